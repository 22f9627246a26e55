"""The graph's upkeep over HTTP against uvicorn: label search and popular entities in the shape
the page codes against, and merge, never-merge and undo as jobs through the CLI's decisions."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest

from graphrag.server.app import build_app
from graphrag.server.graph_upkeep import MAX_DECISION_NAMES, MAX_NAME_CHARS
from graphrag.server.service import GraphService
from helpers_server import build_index, index_config, running, wait_for_job


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    wd = tmp_path_factory.mktemp("upkeep") / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd)))) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            yield client


def test_labels_prefix_first_then_spelt_alike(api: httpx.Client) -> None:
    found = api.get("/graph/labels", params={"q": "kest"}).json()
    assert found[0] == {"name": "KESTREL HARBOR", "type": found[0]["type"], "degree": 2}
    assert set(found[0]) == {"name", "type", "degree"}
    # A word's start matches too, and a misspelling finds the name after every exact match.
    assert api.get("/graph/labels", params={"q": "harb"}).json()[0]["name"] == "KESTREL HARBOR"
    assert api.get("/graph/labels", params={"q": "Kestrl Harbr"}).json()[0]["name"] == "KESTREL HARBOR"
    assert [e["name"] for e in api.get("/graph/labels", params={"q": "p"}).json()][0] == "PELLHAM"
    assert api.get("/graph/labels", params={"q": "zzqx"}).json() == []
    assert len(api.get("/graph/labels", params={"limit": 2}).json()) == 2
    assert api.get("/graph/labels", params={"limit": -1}).status_code == 400


def test_popular_entities_by_degree(api: httpx.Client) -> None:
    popular = api.get("/graph/popular", params={"limit": 4}).json()
    degrees = [e["degree"] for e in popular]
    assert len(popular) == 4 and degrees == sorted(degrees, reverse=True)
    for entity in popular:  # the degree the entity call reports
        assert api.get(f"/graph/entity/{entity['name']}").json()["degree"] == entity["degree"]


def test_merge_never_merge_and_undo_run_as_jobs(api: httpx.Client) -> None:
    def done(path: str, body: dict) -> dict:
        submitted = api.post(path, json=body)
        assert submitted.status_code == 202 and submitted.json()["kind"] == "entities"
        return wait_for_job(api, submitted.json()["id"])

    merged = done("/graph/merge", {"names": ["Pellham", "Vastria"], "into": "Pellham"})
    assert merged["status"] == "done" and merged["description"] == "merge Pellham, Vastria into Pellham"
    assert "VASTRIA" in api.get("/graph/entity/PELLHAM").json()["aliases"]
    assert "VASTRIA" not in {e["name"] for e in api.get("/graph/labels", params={"q": "vastria"}).json()}

    undone = done("/graph/undo", {"names": ["Vastria"]})
    assert undone["status"] == "done" and undone["stats"]["undone"]["merges"] == {"VASTRIA": "PELLHAM"}
    assert api.get("/graph/labels", params={"q": "vastria"}).json()[0]["name"] == "VASTRIA"

    kept = done("/graph/never-merge", {"names": ["Pellham", "Vastria"]})
    assert kept["status"] == "done"
    assert done("/graph/undo", {"names": ["Pellham"]})["stats"]["undone"]["never"] == [["PELLHAM", "VASTRIA"]]

    unknown = done("/graph/merge", {"names": ["Nobody Atall"], "into": "Pellham"})
    assert unknown["status"] == "failed" and unknown["error"]["error"] == "EntityNotFound"
    nothing = done("/graph/undo", {"names": ["Pellham"]})
    assert nothing["status"] == "failed" and nothing["error"]["error"] == "InvalidInputError"
    refused = api.post("/graph/never-merge", json={"names": ["Pellham"]})
    assert refused.status_code == 400 and refused.json()["error"] == "InvalidInputError"
    assert [j["kind"] for j in api.get("/jobs").json()].count("entities") == 6  # each decision kept



def test_hostile_decisions_are_refused_before_they_are_queued(api: httpx.Client) -> None:
    """A decision's names end up in the job list and the log, and a merge may create its
    ``into``: blank, oversized or too many names, or a never-merge of one entity with
    itself, are a 400 in the README's error shape, and no job is queued."""
    jobs_before = len(api.get("/jobs").json())
    for path, body in [
        ("/graph/merge", {"names": ["Pellham"], "into": "x" * (MAX_NAME_CHARS + 1)}),
        ("/graph/merge", {"names": ["Pellham"], "into": " ** "}),
        ("/graph/merge", {"names": [f"name {i}" for i in range(MAX_DECISION_NAMES + 1)], "into": "Pellham"}),
        ("/graph/never-merge", {"names": ["Pellham", '"pellham"']}),
        ("/graph/undo", {"names": [""]}),
    ]:
        refused = api.post(path, json=body)
        assert refused.status_code == 400, (path, refused.text)
        assert refused.json()["error"] == "InvalidInputError" and len(refused.text) < 1000
    assert len(api.get("/jobs").json()) == jobs_before


def test_a_read_only_server_has_reads_only(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd), read_only=True))) as url:
        paths = httpx.get(url + "/openapi.json").json()["paths"]
        assert "/graph/labels" in paths and "/graph/popular" in paths
        assert not {"/graph/merge", "/graph/never-merge", "/graph/undo"} & set(paths)
        assert httpx.post(url + "/graph/merge", json={"names": ["Pellham"], "into": "Vastria"}).status_code in (404, 405)
