"""Script injection, tried in headless Chromium: entity names, descriptions, document sources
(upload file names) and drawing titles full of markup (``<script>``, ``<!--<script>``,
``"><svg onload=...>``, ``<img onerror=...>``) and of the drawing template's own placeholders
(``%DATA%``, ``%TITLE%``). On the exported HTML file, on /graph/view and on the web page (of a
keyed server, whose key the page asks for): no alert, no global a payload sets, no element a
payload spells, and the graph is drawn with every name as text; the page's Markdown renderer
shows markup as its characters."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from graphrag import GraphRAG
from graphrag.export import export
from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from helpers_server import chromium, index_config, running
from mock_llm_server import COMPLETE, RECORD, TUPLE, MockLLMServer, detect_kind, realistic_responder

# Entity names come upper-cased (and without a leading quote), so theirs set upper-case globals;
# the rest keep their case.
NAMES = ["<SCRIPT>PWNED_A=1</SCRIPT>", "<!--<SCRIPT>", 'ACME"><SVG ONLOAD=PWNED_B=1>', "<IMG SRC=X ONERROR=PWNED_C=1>",
         "%DATA% HARBOR", "%TITLE% HARBOR"]
DESCRIPTION = ('It holds <script>window.pwnedD=1</script> <!--<script> "><svg onload=alert(1)> '
               "<img src=x onerror=alert(2)> %DATA% %TITLE%")
SOURCES = ["<img src=x onerror=window.pwnedE=1>.txt", '%DATA%"><svg onload=window.pwnedF=1>.txt',
           "<!--<script>%TITLE%.txt"]
TITLE = 'Around %DATA% <script>window.pwnedG=1</script> "><svg onload=alert(3)> <!--<script> %TITLE%'
GLOBALS = ["PWNED_A", "PWNED_B", "PWNED_C", "pwnedD", "pwnedE", "pwnedF", "pwnedG"]
KEY = "page-key-\u00fcml\u00e4ut-0123456789"


def responder(request: dict) -> str:
    """Extraction answers naming the payload entities (chained by relations), whatever the text."""
    if detect_kind(request) != "extraction":
        return realistic_responder(request)
    entities = [f'("entity"{TUPLE}{n}{TUPLE}organization{TUPLE}{n}: {DESCRIPTION})' for n in NAMES]
    relations = [f'("relationship"{TUPLE}{a}{TUPLE}{b}{TUPLE}{a} borders {b}. {DESCRIPTION}{TUPLE}5)'
                 for a, b in zip(NAMES, NAMES[1:])]
    return f"{RECORD}\n".join(entities + relations) + f"\n{COMPLETE}"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A working dir whose graph holds the payloads, and the mock LLM's URL."""
    wd = tmp_path_factory.mktemp("xss") / "wd"
    with MockLLMServer(responder=responder) as llm:
        # The payload entities share one description: no resolution judge, which would merge them.
        config = index_config(wd, llm_base_url=llm.base_url, llm_api_key="test-key", extraction="llm",
                              entity_resolution_llm_check=False)
        GraphRAG(config).insert([f"Data Harbor lies by the sea, part {n}." for n in range(len(SOURCES))],
                                sources=SOURCES)
        yield wd, llm.base_url


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with chromium() as driver:
        yield driver


def drawn_names(driver: webdriver.Chrome) -> set[str]:
    """The names drawn, once the drawing script has run."""
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "svg[data-drawn]"))
    return {n.get_attribute("data-name") for n in driver.find_elements(By.CSS_SELECTOR, "svg .node")}


# The page's own scripts: Cytoscape.js, the Markdown renderer, the graph view, the page.
PAGE_SCRIPTS = 4


def listed_nodes(driver: webdriver.Chrome) -> set[str]:
    """The names of the page's graph, from the list beside its canvas."""
    return set(driver.execute_script(
        "return [...document.querySelectorAll('#node-list button')].map(b => b.textContent)"))


def assert_nothing_ran(driver: webdriver.Chrome, scripts: int) -> None:
    """No alert open, no payload's global set, the document holds only its own ``scripts``
    script elements and no element a payload spells, and the page's policy blocked nothing
    (its own script and style are allowed by their hashes)."""
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text
    kinds = driver.execute_script("return arguments[0].map(name => typeof window[name])", GLOBALS)
    assert kinds == ["undefined"] * len(GLOBALS)
    assert driver.execute_script("return document.scripts.length") == scripts
    assert driver.execute_script("return document.querySelectorAll('img, svg svg, [onload], [onerror]').length") == 0
    assert [entry for entry in driver.get_log("browser") if entry["source"] == "security"] == []


def test_the_exported_html_draws_payloads_as_text(index: tuple[Path, str], browser: webdriver.Chrome,
                                                  tmp_path: Path) -> None:
    wd, _ = index
    sub = GraphRAG(index_config(wd)).knowledge_graph.subgraph(["%DATA% HARBOR", "<SCRIPT>PWNED_A=1</SCRIPT>"],
                                                             depth=3)
    page = tmp_path / "graph.html"
    page.write_text(export(sub, "html", title=TITLE), encoding="utf-8")
    browser.get(page.as_uri())
    assert drawn_names(browser) == set(NAMES)
    assert browser.find_element(By.CSS_SELECTOR, "svg").get_attribute("data-drawn") == str(len(NAMES))
    assert browser.title == TITLE and browser.find_element(By.CSS_SELECTOR, "#info h3").text == TITLE
    assert_nothing_ran(browser, scripts=2)
    # The data block holds no markup at all: every <, > and & in it is an escape.
    data = browser.find_element(By.ID, "graph-data").get_attribute("textContent")
    assert "<" not in data and ">" not in data and "&" not in data
    hovered = browser.find_element(By.CSS_SELECTOR, '.node[data-name="%DATA% HARBOR"] circle')
    webdriver.ActionChains(browser).move_to_element(hovered).perform()
    WebDriverWait(browser, 10).until(lambda d: SOURCES[0] in d.find_element(By.ID, "info").text)
    assert DESCRIPTION in browser.find_element(By.ID, "info").text
    assert_nothing_ran(browser, scripts=2)


def test_the_page_and_graph_view_of_a_keyed_server(index: tuple[Path, str], browser: webdriver.Chrome,
                                                   tmp_path: Path) -> None:
    wd, llm_url = index
    service = GraphService(index_config(wd, llm_base_url=llm_url, llm_api_key="test-key"))
    with running(build_app(service, api_key=KEY)) as url:
        # The page asks for the key, then lists the documents by their (payload) names as text.
        browser.get(url)
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "key-form").is_displayed())
        browser.find_element(By.ID, "key").send_keys(KEY)
        browser.find_element(By.ID, "key-save").click()
        WebDriverWait(browser, 30).until(lambda d: "3 document(s)" in d.find_element(By.ID, "status").text)
        sources = {r.find_element(By.CSS_SELECTOR, "td").text
                   for r in browser.find_elements(By.CSS_SELECTOR, "#documents tbody tr")}
        assert sources == set(SOURCES)

        # Uploading a file whose name is a payload: listed as text once its job is done.
        upload = tmp_path / "<img src=x onerror=window.pwnedE=1>%DATA%.txt"
        upload.write_text("Lighthouse keepers meet on Mondays.", encoding="utf-8")
        browser.find_element(By.ID, "file").send_keys(str(upload))
        browser.find_element(By.ID, "upload").click()
        WebDriverWait(browser, 60).until(lambda d: upload.name in d.find_element(By.ID, "documents").text)

        # Exploring draws the payload entities on the canvas, and lists them as text.
        browser.find_element(By.ID, "entity").send_keys("%DATA% HARBOR")
        browser.find_element(By.ID, "explore").click()
        WebDriverWait(browser, 30).until(lambda d: "%DATA% HARBOR" in d.find_element(By.ID, "entity-info").text)
        listed = WebDriverWait(browser, 30).until(lambda d: listed_nodes(d) if len(listed_nodes(d)) > 2 else None)
        assert {"%DATA% HARBOR", "%TITLE% HARBOR"} <= listed and listed <= set(NAMES)
        assert DESCRIPTION.split(" <img")[0] in browser.find_element(By.ID, "entity-info").text
        assert_nothing_ran(browser, scripts=PAGE_SCRIPTS)

        # A cited answer (Markdown) and why it was given: the payloads stay text there too.
        browser.find_element(By.ID, "question").send_keys("What lies by %DATA% HARBOR?")
        browser.find_element(By.ID, "ask").click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "why").is_displayed())
        chips = {b.get_attribute("textContent") for b in browser.find_elements(By.CSS_SELECTOR, "#why-entities button")}
        assert chips and chips <= set(NAMES)
        assert_nothing_ran(browser, scripts=PAGE_SCRIPTS)

        # The renderer itself, given Markdown full of markup: every payload shows as its characters.
        text = "\n".join(["# " + NAMES[0], TITLE, "* " + DESCRIPTION, "| a | b |", "|---|---|",
                           f"| {NAMES[3]} | {SOURCES[1]} |", "```csv", "name,description", '"' + NAMES[2].replace('"', '""') + '",x', "```",
                           "[click](javascript:alert(1)) [2] **<b>bold</b>** `<i>code</i>`"])
        shown = browser.execute_script("""
            const box = document.createElement('div');
            box.append(renderMarkdown(arguments[0], {citation: () => null}));
            document.body.append(box);
            return [box.textContent, box.querySelectorAll('a').length, box.querySelectorAll('b, i, img, svg, script').length];
            """, text)
        assert NAMES[0] in shown[0] and NAMES[2] in shown[0] and NAMES[3] in shown[0] and "<b>bold</b>" in shown[0]
        assert shown[1:] == [0, 0]
        assert_nothing_ran(browser, scripts=PAGE_SCRIPTS)

        # /graph/view opened directly (with the key in a header, as a script would send it).
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"X-API-Key": KEY}})
        try:
            names = "&".join(f"names={n}" for n in ("%25DATA%25%20HARBOR", "%3C!--%3CSCRIPT%3E",
                                                        "acme%22%3E%3Csvg%20onload%3DPWNED_B%3D1%3E"))
            browser.get(f"{url}/graph/view?{names}&depth=3")
            assert drawn_names(browser) == set(NAMES)
            assert browser.title.startswith("Around %DATA% HARBOR, <!--<SCRIPT>")
            assert_nothing_ran(browser, scripts=2)
        finally:
            browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
