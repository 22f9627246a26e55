"""Every registered query mode through every entry point (retrieve, cited query, stream, CLI,
MCP, HTTP), so a mode registered without a retriever or cited prompts fails here; and a
three-hop question whose chain one ``retrieve`` call returns whole."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from mcp import Client

from graphrag import GraphRAG, QueryParam
from graphrag import cli
from graphrag.errors import InvalidInputError
from graphrag.operators.modes import MODES, QueryMode, get_mode, mode_names, register, unregister
from graphrag.server.app import build_app
from graphrag.server.mcp_tools import create_mcp_server
from graphrag.server.service import GraphService
from helpers_server import DOCS, build_index, index_config, running
from mock_llm_server import MockLLMServer

QUESTION = "Who founded Brightwater Instruments?"


@pytest.fixture(scope="module")
def llm() -> Iterator[MockLLMServer]:
    with MockLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def wd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("modes") / "wd"
    build_index(path)
    return path


@pytest.fixture(scope="module")
def rag(wd: Path, llm: MockLLMServer) -> GraphRAG:
    return GraphRAG(index_config(wd, llm_base_url=llm.base_url, llm_api_key="k"))


def test_the_registry_declares_everything_a_mode_needs() -> None:
    assert {"local", "global", "naive", "hybrid"} <= set(mode_names())
    for mode in MODES.values():
        assert mode.run() and mode.retrieve() and mode.prompts and mode.cited_prompts and mode.budgets
        assert mode.description and "\n" not in mode.description
        assert set(mode.degraded) <= {"graph", "vector"} and set(mode.degraded.values()) <= set(MODES)
    with pytest.raises(InvalidInputError, match="hybrid"):
        QueryParam(mode="sideways")


@pytest.mark.parametrize("mode", mode_names())
def test_retrieve_cited_query_and_stream(rag: GraphRAG, mode: str) -> None:
    found = rag.retrieve(QUESTION, QueryParam(mode=mode))
    assert found.mode == mode and found.context and found.citable()
    assert all(record.documents for record in found.citable())

    answer = rag.query_result(QUESTION, QueryParam(mode=mode))
    assert answer.references and all(r.documents[0].source in DOCS for r in answer.references)
    assert str(answer).endswith(answer.references[-1].line())
    assert "References:" in rag.query(QUESTION, QueryParam(mode=mode, with_references=True))

    async def streamed(param: QueryParam) -> list[str]:
        return [piece async for piece in rag.aquery_stream(QUESTION, param)]

    pieces = asyncio.run(streamed(QueryParam(mode=mode)))
    assert "".join(pieces).strip()
    cited = asyncio.run(streamed(QueryParam(mode=mode, with_references=True)))
    assert "References:" in "".join(cited)


@pytest.mark.parametrize("mode", mode_names())
def test_the_cli_queries_and_retrieves_in_every_mode(wd: Path, mode: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
    monkeypatch.setattr(cli, "_setup_logging", lambda verbose: None)  # leave the test's root logger be
    assert cli.main(["query", QUESTION, "-w", str(wd), "--mode", mode, "--context-only", "--references"]) == 0
    assert "References:" in capsys.readouterr().out
    assert cli.main(["retrieve", QUESTION, "-w", str(wd), "--mode", mode, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["mode"] == mode and printed["context"]


def test_mcp_and_http_offer_and_answer_every_mode(wd: Path, llm: MockLLMServer) -> None:
    service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="k"))

    async def over_mcp() -> None:
        await service.start()
        try:
            async with Client(create_mcp_server(service)) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert tools["query"].input_schema["properties"]["mode"]["enum"] == list(mode_names())
                for mode in mode_names():
                    answer = await client.call_tool("query", {"question": QUESTION, "mode": mode})
                    assert not answer.is_error and json.loads(answer.content[0].text)["answer"]
                    found = await client.call_tool("retrieve", {"question": QUESTION, "mode": mode})
                    assert not found.is_error and json.loads(found.content[0].text)["mode"] == mode
        finally:
            await service.stop()

    asyncio.run(over_mcp())

    with running(build_app(GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="k")))) as url:
        with httpx.Client(base_url=url, timeout=60) as api:
            listed = api.get("/modes").json()
            assert [m["name"] for m in listed] == list(mode_names()) and all(m["description"] for m in listed)
            schema = api.get("/openapi.json").json()["components"]["schemas"]["QueryRequest"]["properties"]
            assert schema["mode"]["enum"] == list(mode_names())
            for mode in mode_names():
                cited = api.post("/query", json={"question": QUESTION, "mode": mode, "with_references": True})
                assert cited.status_code == 200 and cited.json()["references"], (mode, cited.text)
                found = api.post("/retrieve", json={"question": QUESTION, "mode": mode}).json()
                assert found["mode"] == mode and found["chunks"] + found["reports"]
                with api.stream("POST", "/query", json={"question": QUESTION, "mode": mode, "stream": True}) as s:
                    assert "event: done" in "".join(s.iter_text())


def test_a_registered_mode_is_offered_everywhere(rag: GraphRAG, wd: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A mode is one registration: QueryParam, retrieve, cited answers and the CLI take it at once."""
    naive = get_mode("naive")
    register(QueryMode(name="passages", description="naive's retrieval under another name", runner=naive.runner,
                       retriever=naive.retriever, prompts=naive.prompts, cited_prompts=naive.cited_prompts,
                       budgets=naive.budgets))
    try:
        found = rag.retrieve(QUESTION, QueryParam(mode="passages"))
        assert found.mode == "passages" and found.chunks
        assert rag.query_result(QUESTION, QueryParam(mode="passages")).references
        monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
        monkeypatch.setattr(cli, "_setup_logging", lambda verbose: None)
        assert cli.main(["query", QUESTION, "-w", str(wd), "--mode", "passages", "--context-only"]) == 0
        assert "Brightwater" in capsys.readouterr().out
    finally:
        unregister("passages")
    with pytest.raises(InvalidInputError):
        QueryParam(mode="passages")


# --------------------------------------------------------------------------- a three-hop chain

CHAIN_DOCS = {
    "founder.txt": "Maren Holt founded Tidewell Systems in 1998. Maren Holt studied physics in Arlen.",
    "company.txt": "Tidewell Systems is headquartered in Corvale. Tidewell Systems builds tide sensors.",
    "city.txt": "Corvale is a city in Estmark. The harbour of Corvale is busy all year.",
    "other_company.txt": "Jonas Peller founded Grayfield Foods. Grayfield Foods is headquartered in Lunmoor.",
    "other_city.txt": "Lunmoor is a city in Vantria. A spring market is held in Lunmoor every year.",
}
CHAIN_SOURCES = {"founder.txt", "company.txt", "city.txt"}


def test_hybrid_retrieves_every_document_of_a_three_hop_chain(tmp_path: Path) -> None:
    rag = GraphRAG(index_config(tmp_path / "chain"))
    rag.insert(list(CHAIN_DOCS.values()), sources=list(CHAIN_DOCS))
    found = rag.retrieve("In which country is the company founded by Maren Holt based?", QueryParam(mode="hybrid"))
    sources = [d.source for chunk in found.chunks for d in chunk.documents]
    assert set(sources[:3]) == CHAIN_SOURCES  # the whole chain, ranked above both distractors
    assert {"MAREN HOLT", "TIDEWELL SYSTEMS", "CORVALE"} <= {e.name for e in found.entities}
