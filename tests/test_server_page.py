"""The web page at / in a real browser (headless Chromium through selenium and chromedriver,
installed by .ci/setup.sh): ask a question and open a citation; open an entity's neighbourhood,
find its nodes drawn, click one to expand it; upload a file and watch its job finish.
A screenshot is kept in test-artifacts/ at the repository root."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select, WebDriverWait

from graphrag import GraphRAG
from graphrag.operators.modes import mode_names
from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from helpers_server import build_index, chromium, index_config, running
from mock_llm_server import MockLLMServer

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wd = tmp_path_factory.mktemp("page") / "wd"
    build_index(wd)
    with MockLLMServer() as llm:
        service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="test-key"))
        with running(build_app(service)) as url:
            yield url


def wait(driver: webdriver.Chrome, seconds: float = 30) -> WebDriverWait:
    return WebDriverWait(driver, seconds)


def test_the_page_asks_explores_and_indexes(browser: webdriver.Chrome, page: str, tmp_path: Path) -> None:
    browser.get(page)
    wait(browser).until(lambda d: "3 document(s)" in d.find_element(By.ID, "status").text)
    rows = browser.find_elements(By.CSS_SELECTOR, "#documents tbody tr")
    assert {r.find_element(By.CSS_SELECTOR, "td").text for r in rows} == {"people.txt", "companies.txt", "places.txt"}

    # Ask: the answer cites [n]; a citation opens the passage it cites.
    browser.find_element(By.ID, "question").send_keys("Where is Brightwater Instruments based?")
    browser.find_element(By.ID, "ask").click()
    citation = wait(browser).until(ready.element_to_be_clickable((By.CSS_SELECTOR, "#answer a.citation")))
    assert browser.find_elements(By.CSS_SELECTOR, "#references li")
    citation.click()
    wait(browser).until(lambda d: d.find_element(By.ID, "passage").is_displayed())
    wait(browser).until(lambda d: "Brightwater Instruments" in d.find_element(By.ID, "passage-text").text)

    # Explore: the neighbourhood is drawn (by the HTML export's renderer, in a frame).
    browser.find_element(By.ID, "entity").send_keys("kestrel harbor")
    browser.find_element(By.ID, "explore").click()
    frame = browser.find_element(By.ID, "graph")
    wait(browser).until(lambda d: "KESTREL HARBOR" in d.find_element(By.ID, "entity-info").text)
    browser.switch_to.frame(frame)
    nodes = wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "svg .node") or None)
    names = {n.get_attribute("data-name") for n in nodes}
    assert {"KESTREL HARBOR", "NORLAND", "BRIGHTWATER INSTRUMENTS"} <= names
    assert "MARGUERITE OLVANE" not in names  # two hops away: not drawn yet
    browser.find_element(By.CSS_SELECTOR, '.node[data-name="BRIGHTWATER INSTRUMENTS"] circle').click()
    browser.switch_to.default_content()
    wait(browser).until(lambda d: "BRIGHTWATER INSTRUMENTS" in d.find_element(By.ID, "entity-info").text)

    def expanded(d: webdriver.Chrome) -> bool:
        d.switch_to.frame(d.find_element(By.ID, "graph"))
        try:
            return "MARGUERITE OLVANE" in {n.get_attribute("data-name") for n in d.find_elements(By.CSS_SELECTOR,
                                                                                                ".node")}
        finally:
            d.switch_to.default_content()

    wait(browser).until(expanded)

    # Upload a file; its job finishes and the document is listed.
    upload = tmp_path / "harbour.md"
    upload.write_text("Ilse Varga founded Quillmoor Press in Dunmere.", encoding="utf-8")
    browser.find_element(By.ID, "file").send_keys(str(upload))
    browser.find_element(By.ID, "upload").click()
    wait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, '#jobs li[data-status="done"]'))
    wait(browser).until(lambda d: "harbour.md" in d.find_element(By.ID, "documents").text)
    wait(browser).until(lambda d: "4 document(s)" in d.find_element(By.ID, "status").text)

    ARTIFACTS.mkdir(exist_ok=True)
    browser.execute_script("document.getElementById('explore-section').scrollIntoView()")
    assert browser.save_screenshot(str(ARTIFACTS / "web_page.png"))


def test_the_page_offers_and_answers_every_registered_mode(browser: webdriver.Chrome, page: str) -> None:
    """The mode list comes from the server's registry (GET /modes), and each mode answers with citations."""
    browser.get(page)
    select = wait(browser).until(lambda d: Select(d.find_element(By.ID, "mode")) if d.find_elements(
        By.CSS_SELECTOR, "#mode option") else None)
    assert [o.get_attribute("value") for o in select.options] == list(mode_names())
    assert all(o.get_attribute("title") for o in select.options)  # each described
    browser.find_element(By.ID, "question").send_keys("Where is Brightwater Instruments based?")
    for mode in mode_names():
        select.select_by_value(mode)
        browser.find_element(By.ID, "ask").click()
        wait(browser).until(lambda d: d.find_element(By.ID, "ask").is_enabled()
                            and d.find_elements(By.CSS_SELECTOR, "#answer a.citation"))
        assert browser.find_elements(By.CSS_SELECTOR, "#references li"), mode


def test_the_api_docs_render_offline(browser: webdriver.Chrome, page: str) -> None:
    """Swagger UI from the package, under the server's Content-Security-Policy: every endpoint
    listed, nothing blocked, nothing fetched from elsewhere."""
    browser.get(f"{page}/docs")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) >= 15)
    assert "/graph/view" in browser.find_element(By.ID, "swagger-ui").text
    assert not [e for e in browser.get_log("browser") if e["source"] == "security"]
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(name.startswith(page) for name in loaded)


# Three passages of the shipped Chinese set, indexed offline: 深圳 and 任正非 are two hops
# apart, through 广东省.
CHINESE = ("华为", "深圳", "腾讯")


@pytest.fixture(scope="module")
def chinese_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import json

    data = Path(__file__).resolve().parent / "data" / "chinese" / "corpus.json"
    texts = {p["title"]: p["text"] for p in json.loads(data.read_text("utf-8"))}
    wd = tmp_path_factory.mktemp("chinese-page") / "wd"
    GraphRAG(index_config(wd)).insert([f"{t}\n{texts[t]}" for t in CHINESE], sources=[f"{t}.txt" for t in CHINESE])
    with MockLLMServer() as llm:
        service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="test-key"))
        with running(build_app(service)) as url:
            yield url


def _drawn(driver: webdriver.Chrome) -> set[str]:
    driver.switch_to.frame(driver.find_element(By.ID, "graph"))
    try:
        return {n.get_attribute("data-name") for n in driver.find_elements(By.CSS_SELECTOR, "svg .node")}
    finally:
        driver.switch_to.default_content()


def test_the_page_shows_chinese_names_intact(browser: webdriver.Chrome, chinese_page: str) -> None:
    """Documents, a cited answer in Chinese, its references and passage, and the drawn
    neighbourhood all show the names as the documents write them."""
    browser.get(chinese_page)
    wait(browser).until(lambda d: "3 document(s)" in d.find_element(By.ID, "status").text)
    assert {"华为.txt", "深圳.txt", "腾讯.txt"} <= set(browser.find_element(By.ID, "documents").text.split())

    Select(browser.find_element(By.ID, "mode")).select_by_value("local")
    browser.find_element(By.ID, "question").send_keys("华为技术有限公司的总部在哪里？")
    browser.find_element(By.ID, "ask").click()
    citation = wait(browser).until(ready.element_to_be_clickable((By.CSS_SELECTOR, "#answer a.citation")))
    answer = browser.find_element(By.ID, "answer").text
    assert answer.startswith("根据所给的上下文") and "华为技术有限公司的总部在哪里" in answer
    references = browser.find_element(By.ID, "references").text
    assert "华为.txt" in references
    citation.click()
    wait(browser).until(lambda d: d.find_element(By.ID, "passage").is_displayed())
    wait(browser).until(lambda d: "，" in d.find_element(By.ID, "passage-text").text)
    assert any(t in browser.find_element(By.ID, "passage-text").text for t in CHINESE)

    browser.find_element(By.ID, "entity").send_keys("深圳")
    browser.find_element(By.ID, "explore").click()
    wait(browser).until(lambda d: "深圳" in d.find_element(By.ID, "entity-info").text)
    names = wait(browser).until(lambda d: _drawn(d) or None)
    assert {"深圳", "广东省", "香港"} <= names and "任正非" not in names
    browser.switch_to.frame(browser.find_element(By.ID, "graph"))
    labels = {t.text for t in browser.find_elements(By.CSS_SELECTOR, "svg .node text")}
    browser.find_element(By.CSS_SELECTOR, '.node[data-name="广东省"] circle').click()
    browser.switch_to.default_content()
    assert {"深圳", "广东省"} <= labels  # the drawn labels, not only the attributes
    wait(browser).until(lambda d: "广东省" in d.find_element(By.ID, "entity-info").text)
    wait(browser).until(lambda d: "任正非" in _drawn(d))
