"""Workspaces per request (``X-Workspace``), on files and on PostgreSQL: no read, write, job or
MCP call in one workspace sees another's data; a workspace exists once written to; an unknown
one is a 404 for reads, a malformed name a 400."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from graphrag.server.workspaces import WORKSPACES_DIR, Workspaces, database_workspace
from graphrag import GraphRAG
from helpers_server import CLI_ENV, DOCS, build_index, cli_serving, free_port, index_config, running, wait_for_job

ALL_POSTGRES = {"kv_storage": "postgres", "vector_storage": "pgvector", "graph_storage": "postgres"}
# One made-up fact per workspace; each must stay in its own.
FACTS = {"north": ("Orsolya Brandt founded Velmore Looms in Tarrow.", "VELMORE LOOMS"),
         "south-2": ("Quentin Aldous founded Harrowgate Kilns in Ostby.", "HARROWGATE KILNS")}


@pytest.fixture(params=["files", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The config options of each backend family (PostgreSQL from the session's server)."""
    if request.param == "files":
        return {}
    options = request.getfixturevalue("postgres_options")
    return {**ALL_POSTGRES, "storage_options": options}


def _ws(name: str | None) -> dict[str, str]:
    return {} if name is None else {"X-Workspace": name}


def _sources(client: httpx.Client, workspace: str | None) -> set[str]:
    listed = client.get("/documents", headers=_ws(workspace))
    assert listed.status_code == 200, listed.text
    return {d["source"] for d in listed.json()}


def _context(client: httpx.Client, workspace: str | None, question: str) -> str:
    answer = client.post("/query", headers=_ws(workspace),
                         json={"question": question, "mode": "local", "only_need_context": True})
    assert answer.status_code == 200, answer.text
    return answer.json()["answer"]


def _indexed(wd: Path, storage: dict[str, Any]) -> GraphService:
    """A service whose default workspace holds the three documents."""
    config = index_config(wd, **storage)
    GraphRAG(config).insert(list(DOCS.values()), sources=list(DOCS))
    return GraphService(config)


@pytest.fixture
def served(tmp_path: Path, storage: dict[str, Any]) -> Iterator[tuple[httpx.Client, Path]]:
    wd = tmp_path / "wd"
    with running(build_app(_indexed(wd, storage))) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, wd


def test_workspaces_see_only_their_own_documents_queries_graph_and_jobs(served: tuple[httpx.Client, Path]) -> None:
    client, wd = served
    assert client.get("/workspaces").json() == []
    # Reads of a workspace no write created are 404s, and create nothing; so are a reprocess
    # and a scan, which a workspace with no documents and no input folder cannot do.
    for method, path in (("GET", "/documents"), ("GET", "/jobs"), ("GET", "/health"), ("GET", "/graph/search?q=x"),
                         ("POST", "/query"), ("POST", "/documents/reprocess"), ("POST", "/documents/scan")):
        missing = client.request(method, path, headers=_ws("north"),
                                 json={"question": "Who?", "only_need_context": True} if path == "/query" else None)
        assert missing.status_code == 404 and missing.json()["error"] == "WorkspaceNotFound", (path, missing.text)
    assert not (wd / WORKSPACES_DIR / "north").exists()
    for bad in ("../wd", "a b", "x" * 65, "", "é"):
        refused = client.get("/documents", headers={"X-Workspace": bad.encode("utf-8")})
        assert refused.status_code == 400 and refused.json()["error"] == "InvalidInputError", bad

    jobs = {}
    for name, (text, _) in FACTS.items():
        job = client.post("/documents", headers=_ws(name), json={"text": text, "source": f"{name}.txt"})
        assert job.status_code == 202
        jobs[name] = job.json()["id"]
    for name, job_id in jobs.items():
        with httpx.Client(base_url=str(client.base_url), timeout=60, headers=_ws(name)) as scoped:
            assert wait_for_job(scoped, job_id)["status"] == "done"
    assert [w["name"] for w in client.get("/workspaces").json()] == ["north", "south-2"]

    # Documents, jobs, queries, graph reads and records: each workspace its own.
    assert _sources(client, None) == set(DOCS)
    assert _sources(client, "north") == {"north.txt"}
    assert _sources(client, "south-2") == {"south-2.txt"}
    for name, job_id in jobs.items():
        other = next(n for n in FACTS if n != name)
        assert client.get(f"/jobs/{job_id}", headers=_ws(name)).status_code == 200
        assert client.get(f"/jobs/{job_id}", headers=_ws(other)).status_code == 404
        assert client.get(f"/jobs/{job_id}").status_code == 404
        assert [j["id"] for j in client.get("/jobs", headers=_ws(name)).json()] == [job_id]
    assert client.get("/jobs").json() == []
    for name, (text, entity) in FACTS.items():
        other = next(n for n in FACTS if n != name)
        question = f"Who founded {entity.title()}?"
        assert entity in _context(client, name, question)
        assert entity not in _context(client, other, question)
        assert entity not in _context(client, None, question)
        assert client.get(f"/graph/entity/{entity}", headers=_ws(name)).status_code == 200
        assert client.get(f"/graph/entity/{entity}", headers=_ws(other)).status_code == 404
        assert client.get(f"/graph/entity/{entity}").status_code == 404
        doc_id = client.get("/documents", headers=_ws(name)).json()[0]["id"]
        # A delete in another workspace does not find it.
        assert client.delete(f"/documents/{doc_id}", headers=_ws(other)).status_code == 404
    assert "MARGUERITE OLVANE" not in _context(client, "north", "Who founded Brightwater Instruments?")


def test_the_database_workspace_of_a_name_is_its_own(tmp_path: Path) -> None:
    """Names differing in case are two workspaces, and a server's own workspace option is part of it."""
    names = {database_workspace("default", n) for n in ("Team", "team", "TEAM", "a-b", "a_b")}
    assert len(names) == 5
    assert database_workspace("default", "team") != database_workspace("other", "team")
    assert all(n[0].isalpha() and len(n) <= 24 and n == n.lower() for n in names)


def test_mcp_over_http_calls_run_in_the_header_s_workspace(tmp_path: Path, storage: dict[str, Any]) -> None:
    import httpx2
    import uvicorn
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from graphrag.server.mcp_tools import create_mcp_server
    from graphrag.server.security import uvicorn_config

    wd = tmp_path / "wd"
    workspaces = Workspaces(_indexed(wd, storage))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    def result(answer: Any) -> Any:
        assert not answer.is_error, answer.content
        return json.loads(answer.content[0].text)

    async def call(workspace: str | None, tool: str, arguments: dict[str, Any]) -> Any:
        async with httpx2.AsyncClient(headers=_ws(workspace), timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await client.call_tool(tool, arguments)

    async def main() -> None:
        await workspaces.start()
        server = uvicorn.Server(uvicorn_config(create_mcp_server(workspaces).streamable_http_app(host="127.0.0.1"),
                                               "127.0.0.1", port))
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                await asyncio.sleep(0.02)
            missing = await call("north", "list_documents", {})
            assert missing.is_error and json.loads(missing.content[0].text)["error"] == "WorkspaceNotFound"
            for name, (text, _) in FACTS.items():
                job = result(await call(name, "insert_text", {"text": text, "source": f"{name}.txt", "wait": True}))
                assert job["status"] == "done", job
            for name, (text, entity) in FACTS.items():
                other = next(n for n in FACTS if n != name)
                docs = result(await call(name, "list_documents", {}))["documents"]
                assert [d["source"] for d in docs] == [f"{name}.txt"]
                found = result(await call(name, "query", {"question": f"Who founded {entity.title()}?",
                                                          "only_need_context": True}))["answer"]
                assert entity in found
                elsewhere = result(await call(other, "query", {"question": f"Who founded {entity.title()}?",
                                                               "only_need_context": True}))["answer"]
                assert entity not in elsewhere
            default = result(await call(None, "list_documents", {}))["documents"]
            assert {d["source"] for d in default} == set(DOCS)
        finally:
            server.should_exit = True
            await serving
            await workspaces.stop()

    asyncio.run(main())


def test_each_workspace_has_its_own_writer(tmp_path: Path) -> None:
    """Two workspaces' inserts run at the same time (each has one writer), and a query in a third
    answers meanwhile."""
    from mock_llm_server import MockLLMServer

    wd = tmp_path / "wd"
    with MockLLMServer(latency=0.2) as llm:
        build_index(wd)
        service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="k", extraction="llm"))
        with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client:
            jobs = {name: client.post("/documents", headers=_ws(name), json={"text": text}).json()["id"]
                    for name, (text, _) in FACTS.items()}
            both_running = False
            while not both_running:
                states = {n: client.get(f"/jobs/{j}", headers=_ws(n)).json()["status"] for n, j in jobs.items()}
                assert "done" not in states.values(), states  # one finished before the other started
                both_running = set(states.values()) == {"running"}
                assert "MARGUERITE OLVANE" in _context(client, None, "Who founded Brightwater Instruments?")
            for name, job_id in jobs.items():
                with httpx.Client(base_url=url, timeout=60, headers=_ws(name)) as scoped:
                    assert wait_for_job(scoped, job_id)["status"] == "done"


# Made-up facts of the workspaces a capped server opens and closes in turn.
MANY = {"w0": ("Ilsabet Corrow founded Damsel Forges in Quillon.", "DAMSEL FORGES"),
        "w1": ("Tobiah Merrant founded Ferncastle Mills in Ulvery.", "FERNCASTLE MILLS"),
        "w2": ("Anneliese Vosk founded Greyholt Tanneries in Pimbury.", "GREYHOLT TANNERIES"),
        "w3": ("Corwin Ashdale founded Larkmere Glassworks in Snelby.", "LARKMERE GLASSWORKS"),
        "w4": ("Perrine Obell founded Whitcombe Foundry in Yarrow.", "WHITCOMBE FOUNDRY")}


def _written_workspaces(wd: Path) -> None:
    """The default index and each of ``MANY`` as a workspace on disk, as a server writes them."""
    build_index(wd)
    for name, (text, _) in MANY.items():
        GraphRAG(index_config(wd / WORKSPACES_DIR / name)).insert([text], sources=[f"{name}.txt"])


def _open(client: httpx.Client) -> set[str]:
    return {w["name"] for w in client.get("/workspaces").json() if w["open"]}


def test_a_capped_server_closes_idle_workspaces_and_reopens_them_with_their_data(
        tmp_path: Path, storage: dict[str, Any]) -> None:
    wd = tmp_path / "wd"
    workspaces = Workspaces(_indexed(wd, storage), max_open=2)
    with running(build_app(workspaces)) as url, httpx.Client(base_url=url, timeout=60) as client:
        for name, (text, _) in MANY.items():  # each written while the cap closes others
            job = client.post("/documents", headers=_ws(name), json={"text": text, "source": f"{name}.txt"})
            with httpx.Client(base_url=url, timeout=60, headers=_ws(name)) as scoped:
                assert wait_for_job(scoped, job.json()["id"])["status"] == "done"
            assert len(_open(client)) <= 2
        for round_ in range(2):  # the second round reopens each, closed by the first
            for name, (_, entity) in MANY.items():
                others = [e for n, (_, e) in MANY.items() if n != name]
                found = _context(client, name, f"Who founded {entity.title()}?")
                assert entity in found and not any(o in found for o in others), (round_, name)
                assert _sources(client, name) == {f"{name}.txt"}
                opened = _open(client)
                assert name in opened and len(opened) <= 2, (name, opened)
        assert workspaces.open_names == ["w3", "w4"]  # the least recently used closed first
        assert "MARGUERITE OLVANE" in _context(client, None, "Who founded Brightwater Instruments?")
        # A write to a closed workspace reopens it and adds to what it held.
        job = client.post("/documents", headers=_ws("w0"), json={"text": FACTS["north"][0], "source": "more.txt"})
        with httpx.Client(base_url=url, timeout=60, headers=_ws("w0")) as scoped:
            assert wait_for_job(scoped, job.json()["id"])["status"] == "done"
        assert _sources(client, "w0") == {"w0.txt", "more.txt"}
        assert _sources(client, "w1") == {"w1.txt"}
        assert len(_open(client)) <= 2


def test_a_workspace_running_a_job_stays_open_beyond_the_cap(tmp_path: Path) -> None:
    """A job's workspace is not closed while the job runs, whatever else opens; once idle, it is."""
    from mock_llm_server import MockLLMServer

    wd = tmp_path / "wd"
    _written_workspaces(wd)
    with MockLLMServer(latency=3.0) as llm:  # each LLM call of the insert takes this long
        config = index_config(wd, llm_base_url=llm.base_url, llm_api_key="k", extraction="llm")
        workspaces = Workspaces(GraphService(config), max_open=1)
        with running(build_app(workspaces)) as url, httpx.Client(base_url=url, timeout=60) as client:
            text, entity = FACTS["north"]
            job_id = client.post("/documents", headers=_ws("w0"), json={"text": text, "source": "slow.txt"}).json()["id"]
            for name, (_, other) in list(MANY.items())[1:]:  # reads only: no LLM call
                assert other in _context(client, name, f"Who founded {other.title()}?")
                # The job's workspace stays open; the read's, beyond the cap, closes once answered.
                assert _open(client) == {"w0"}
            assert client.get(f"/jobs/{job_id}", headers=_ws("w0")).json()["status"] == "running"
            with httpx.Client(base_url=url, timeout=60, headers=_ws("w0")) as scoped:
                assert wait_for_job(scoped, job_id)["status"] == "done"
            assert _sources(client, "w0") == {"w0.txt", "slow.txt"}
            assert _sources(client, "w4") == {"w4.txt"}  # idle now, the job's workspace closes
            assert _open(client) == {"w4"}


def test_graphrag_serve_max_open_workspaces(tmp_path: Path) -> None:
    """The CLI's option reaches the server; a cap under 1 is a usage error."""
    import subprocess
    import sys

    wd = tmp_path / "wd"
    _written_workspaces(wd)
    refused = subprocess.run([sys.executable, "-m", "graphrag.cli", "serve", "--working-dir", str(wd),
                              "--max-open-workspaces", "0"], capture_output=True, text=True, timeout=60, env=CLI_ENV)
    assert refused.returncode == 2 and "--max-open-workspaces" in refused.stderr
    with cli_serving(wd, "--workers", "0", "--offline", "--max-open-workspaces", "1") as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        for name in ("w0", "w1", "w2"):
            assert _sources(client, name) == {f"{name}.txt"}
            assert _open(client) == {name}


def test_a_workspace_in_use_is_not_closed(tmp_path: Path) -> None:
    """A request or MCP call holding its workspace (``using``) keeps it open past the cap; the
    last one to leave closes it, and the next use reopens it."""
    wd = tmp_path / "wd"
    _written_workspaces(wd)
    workspaces = Workspaces(GraphService(index_config(wd)), max_open=1)

    async def main() -> None:
        await workspaces.start()
        try:
            async with workspaces.using("w0"):
                held = workspaces.current()
                async with workspaces.using("w1"):
                    assert workspaces.current() is not held
                    assert workspaces.open_names == ["w0", "w1"]  # both in use: beyond the cap
                assert workspaces.open_names == ["w0"]  # w1 idle: closed at once
                assert workspaces.current() is held
                assert [d["source"] for d in await held.list_documents()] == ["w0.txt"]
            async with workspaces.using("w1"):
                assert [d["source"] for d in await workspaces.list_documents()] == ["w1.txt"]
            assert workspaces.open_names == ["w1"]
        finally:
            await workspaces.stop()

    asyncio.run(main())
