"""The graph API from the command line (graph, retrieve, query --references, export), and the
exported HTML page drawn by a real headless Chromium, offline."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from graphrag import cli
from graphrag.export import community_colours, to_html
from test_graph_api import DOCS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def wd(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cli")
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    wd = str(root / "wd")
    mp = pytest.MonkeyPatch()
    mp.setenv("GRAPHRAG_EMBEDDING", "hash")
    assert cli.main(["index", "--offline", "-w", wd] + [str(root / n) for n in DOCS]) == 0
    yield wd
    mp.undo()


@pytest.fixture(autouse=True)
def _hash_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")


def run_json(capsys: pytest.CaptureFixture, *argv: str) -> object:
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_graph_commands_answer_in_json(wd: str, capsys: pytest.CaptureFixture) -> None:
    entity = run_json(capsys, "graph", "entity", "-w", wd, "kestrel harbor", "--json")
    assert entity["name"] == "KESTREL HARBOR" and entity["documents"] and entity["communities"]
    near = run_json(capsys, "graph", "neighbors", "-w", wd, "Brightwater Instruments", "--relation", "based in",
                    "--json")
    assert [e["name"] for e in near] == ["KESTREL HARBOR"] and near[0]["via"]["description"]
    paths = run_json(capsys, "graph", "paths", "-w", wd, "Marguerite Olvane", "Norland", "--json")
    assert paths[0]["entities"] == ["MARGUERITE OLVANE", "BRIGHTWATER INSTRUMENTS", "KESTREL HARBOR", "NORLAND"]
    assert [Path(h["documents"][0]["source"]).name for h in paths[0]["hops"]] == list(DOCS)
    sub = run_json(capsys, "graph", "subgraph", "-w", wd, "Norland", "Pellham", "--json")
    assert {"NORLAND", "PELLHAM"} <= {e["name"] for e in sub["entities"]} and sub["relations"]
    found = run_json(capsys, "retrieve", "-w", wd, "Who founded Brightwater Instruments?", "--json")
    assert found["mode"] == "local" and found["chunks"][0]["documents"][0]["source"].endswith(".txt")


def test_unknown_entity_exits_1_with_suggestions(wd: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["graph", "entity", "-w", wd, "Kestrel"])
    assert exit_.value.code == 1
    assert "did you mean 'KESTREL HARBOR'" in capsys.readouterr().err


def test_query_references_lists_numbered_sources(wd: str, capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    assert cli.main(["query", "-w", wd, "--mode", "naive", "--references", "Where is Brightwater based?"]) == 0
    out = capsys.readouterr().out
    assert "\nReferences:\n[1] " in out and ".txt (chunk chunk-" in out


def test_export_formats(wd: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "g.graphml"
    assert cli.main(["export", "-w", wd, "--format", "graphml", "-o", str(out)]) == 0
    root = ET.parse(out).getroot()
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    assert len(root.findall(f".//{ns}node")) == 8 and len(root.findall(f".//{ns}edge")) == 7
    capsys.readouterr()
    assert cli.main(["export", "-w", wd, "--format", "mermaid", "--around", "Norland", "--depth", "2"]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.startswith("graph LR\n") and '["NORLAND"]' in mermaid and '["BRIGHTWATER INSTRUMENTS"]' in mermaid
    assert "PELLHAM" not in mermaid
    data = run_json(capsys, "export", "-w", wd, "--format", "json", "--max-nodes", "3")
    assert len(data["entities"]) == 3 and data["truncated"]


def test_html_export_is_drawn_offline_by_headless_chromium(wd: str, tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), "chromium is missing: run `bash .ci/setup.sh` (the README's test command does)"
    page = tmp_path / "graph.html"
    assert cli.main(["export", "-w", wd, "--format", "html", "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=\"?https?:", html)  # nothing fetched from a network
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1200,900"]
    dom = subprocess.run(base + [f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    drawn = re.findall(r'<g class="node" data-name="([^"]+)" data-community="([^"]*)"', dom)
    assert len(drawn) == 8 and 'data-drawn="8"' in dom  # the script ran and drew every entity
    assert {name for name, _ in drawn} >= {"MARGUERITE OLVANE", "NORLAND", "KESTREL HARBOR"}
    assert len(re.findall(r'<line class="edge"', dom)) == 7
    assert "<title>NORLAND (" in dom  # hover text: name, type and description
    fills = set(re.findall(r'<circle r="9" fill="(#[0-9A-Fa-f]{6})"', dom))
    assert len(fills) == len({c for _, c in drawn}) > 1  # one colour per community
    shot = tmp_path / "graph.png"  # kept under pytest's tmp dir as the test's artifact
    subprocess.run(base + [f"--user-data-dir={tmp_path / 'profile-shot'}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 5000


def test_html_escapes_what_could_close_its_script(tmp_path: Path) -> None:
    from graphrag.records import Entity, Subgraph

    sub = Subgraph(entities=(Entity(name="A</script><b>", description="x", communities=("1",)),
                             Entity(name="B", communities=("2",))))
    html = to_html(sub)
    assert html.count("</script>") == 2  # the data block's and the drawing script's own
    assert community_colours(sub) == {"A</script><b>": "#0072B2", "B": "#E69F00"}
