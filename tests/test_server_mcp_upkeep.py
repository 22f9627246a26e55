"""The MCP tools as an agent sees them, through the mcp SDK's client in process: hints on every
tool, the server's version, cited answers in every mode, graph upkeep as jobs with their status,
argument errors in the JSON error shape, and instructions that match the tools offered."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
from mcp import Client

from graphrag import __version__
from graphrag.operators.modes import mode_names
from graphrag.server.mcp_tools import create_mcp_server
from graphrag.server.service import GraphService
from helpers_server import DOCS, build_index, index_config
from mock_llm_server import MockLLMServer

WRITE_TOOLS = {"insert_text", "delete_document", "merge_entities", "never_merge", "undo_entity_decisions"}


def result_json(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def error_json(result: Any) -> dict[str, Any]:
    assert result.is_error
    return json.loads(result.content[0].text)


def session(service: GraphService, work: Callable[[Client], Awaitable[None]]) -> None:
    async def run() -> None:
        await service.start()
        try:
            async with Client(create_mcp_server(service)) as client:
                await work(client)
        finally:
            await service.stop()

    asyncio.run(run())


@pytest.fixture()
def wd(tmp_path: Path) -> Path:
    build_index(tmp_path / "wd")
    return tmp_path / "wd"


def test_hints_version_and_cited_answers_in_every_mode(wd: Path) -> None:
    with MockLLMServer() as llm:
        service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="k"))

        async def work(client: Client) -> None:
            assert client.server_info.version == __version__
            assert all(w in client.instructions for w in WRITE_TOOLS | {"job_status"})
            for tool in (await client.list_tools()).tools:
                hints = tool.annotations
                assert None not in (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint), tool.name
                assert hints.read_only_hint is (tool.name not in WRITE_TOOLS), tool.name
                assert hints.destructive_hint is (tool.name in WRITE_TOOLS), tool.name
            for mode in mode_names():
                cited = result_json(await client.call_tool("query", {
                    "question": "Where is Brightwater Instruments based?", "mode": mode, "with_references": True}))
                assert "[1]" in cited["answer"], mode
                assert cited["references"][0]["number"] == 1
                assert cited["references"][0]["documents"][0]["source"] in DOCS, mode

        session(service, work)


def test_upkeep_tools_and_job_status(wd: Path) -> None:
    async def work(client: Client) -> None:
        labels = result_json(await client.call_tool("search_labels", {"text": "kestrl"}))["entities"]
        assert labels[0]["name"] == "KESTREL HARBOR" and set(labels[0]) == {"name", "type", "degree"}
        popular = result_json(await client.call_tool("popular_entities", {"limit": 3}))["entities"]
        assert [e["degree"] for e in popular] == sorted((e["degree"] for e in popular), reverse=True)

        job = result_json(await client.call_tool("merge_entities", {"names": ["Vastria"], "into": "Pellham"}))
        assert job["kind"] == "entities" and job["status"] in ("queued", "running", "done")
        while (status := result_json(await client.call_tool("job_status", {"job_id": job["id"]})))["status"] != "done":
            assert status["status"] != "failed", status
            await asyncio.sleep(0.05)
        near = result_json(await client.call_tool("neighbors", {"entity": "Pellham"}))["neighbors"]
        assert "VASTRIA" not in {e["name"] for e in near}  # one node now
        kept = result_json(await client.call_tool("never_merge", {"a": "Pellham", "b": "Vastria", "wait": True}))
        assert kept["status"] == "done"
        undone = result_json(await client.call_tool("undo_entity_decisions", {"names": ["Vastria"], "wait": True}))
        assert undone["stats"]["undone"]["never"] == [["PELLHAM", "VASTRIA"]]
        assert error_json(await client.call_tool("job_status", {"job_id": "nope"}))["error"] == "InvalidInputError"

    session(GraphService(index_config(wd)), work)


def test_argument_errors_are_the_json_error_shape(wd: Path) -> None:
    async def work(client: Client) -> None:
        for tool, arguments in (("query", {"question": "Who?", "mode": "sideways"}),
                                ("neighbors", {"entity": "Pellham", "depth": "deep"}),
                                ("find_paths", {"source": "Pellham"})):
            error = error_json(await client.call_tool(tool, arguments))
            assert error["error"] == "InvalidInputError" and error["message"].startswith(tool), error
            assert "pydantic" not in error["message"] and "errors.pydantic.dev" not in error["message"]
        assert "target" in error["message"]  # the field that is wrong

    session(GraphService(index_config(wd)), work)


def test_read_only_instructions_name_no_write_tool(wd: Path) -> None:
    async def work(client: Client) -> None:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert not tools & (WRITE_TOOLS | {"job_status"})
        assert not any(name in client.instructions for name in WRITE_TOOLS | {"job_status"})
        assert "job" not in client.instructions.lower() and "writ" not in client.instructions.lower()
        refused = error_json(await client.call_tool("merge_entities", {"names": ["Vastria"], "into": "Pellham"}))
        assert refused["error"] == "InvalidInputError" and "merge_entities" in refused["message"]

    session(GraphService(index_config(wd), read_only=True), work)
