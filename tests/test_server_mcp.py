"""`graphrag mcp` driven by the mcp SDK's own client over stdio: list the tools, call each one;
a read-only server has no writing tool and refuses insert_text."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from graphrag.operators.modes import mode_names
from helpers_server import CHAIN, DOCS, build_index

READ_TOOLS = {"query", "retrieve", "search_entities", "neighbors", "find_paths", "subgraph", "list_documents",
              "search_labels", "popular_entities"}
WRITE_TOOLS = {"insert_text", "delete_document", "merge_entities", "never_merge", "undo_entity_decisions"}
JOB_TOOLS = {"job_status"}  # a writing server's: reads the jobs its writing tools queue


def server(wd: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "graphrag.cli", "mcp", "--working-dir", str(wd), *flags],
                                 env={"GRAPHRAG_EMBEDDING": "hash"})


def result_json(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


@pytest.fixture(scope="module")
def wd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "wd"
    build_index(path)
    return path


def test_every_tool_over_stdio(wd: Path) -> None:
    async def session() -> None:
        async with Client(server(wd, "--offline"), read_timeout_seconds=120) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == READ_TOOLS | WRITE_TOOLS | JOB_TOOLS
            for tool in tools.values():  # an agent chooses by these
                assert len(tool.description or "") > 60 and tool.input_schema["type"] == "object"
            assert tools["query"].input_schema["required"] == ["question"]
            for name in ("query", "retrieve"):  # the registered modes, every one
                assert tools[name].input_schema["properties"]["mode"]["enum"] == list(mode_names())

            answer = result_json(await client.call_tool("query", {"question": "Who founded Brightwater Instruments?",
                                                                  "mode": "local"}))
            assert "MARGUERITE OLVANE" in answer["answer"]  # no LLM here: the context, under a note
            found = result_json(await client.call_tool("retrieve", {"question": "Who founded Brightwater?"}))
            assert found["entities"] and found["chunks"][0]["documents"][0]["source"] in DOCS
            hits = result_json(await client.call_tool("search_entities", {"text": "Brightwater Instruments"}))
            assert "BRIGHTWATER INSTRUMENTS" in {e["name"] for e in hits["entities"]}
            near = result_json(await client.call_tool("neighbors", {"entity": "kestrel harbor"}))
            assert {"NORLAND", "BRIGHTWATER INSTRUMENTS"} <= {e["name"] for e in near["neighbors"]}
            paths = result_json(await client.call_tool("find_paths", {"source": CHAIN[0], "target": CHAIN[-1]}))
            assert paths["paths"][0]["entities"] == CHAIN
            sub = result_json(await client.call_tool("subgraph", {"entities": ["Norland"], "depth": 1}))
            assert {"NORLAND", "KESTREL HARBOR"} <= {e["name"] for e in sub["entities"]}
            docs = result_json(await client.call_tool("list_documents", {}))["documents"]
            assert sorted(d["source"] for d in docs) == sorted(DOCS)

            job = result_json(await client.call_tool("insert_text", {
                "text": "Ilse Varga founded Quillmoor Press in Dunmere.", "source": "press.txt", "wait": True}))
            assert job["status"] == "done" and job["stats"]["documents_inserted"] == 1
            near = result_json(await client.call_tool("neighbors", {"entity": "Ilse Varga"}))["neighbors"]
            assert "QUILLMOOR PRESS" in {e["name"] for e in near}  # readable once the job is done
            press = next(d["id"] for d in result_json(await client.call_tool("list_documents", {}))["documents"]
                         if d["source"] == "press.txt")
            deleted = result_json(await client.call_tool("delete_document", {"document_id": press, "wait": True}))
            assert deleted["status"] == "done" and deleted["stats"]["documents_removed"] == 1

            missing = await client.call_tool("neighbors", {"entity": "Nobody Atall"})
            assert missing.is_error
            error = json.loads(missing.content[0].text)
            assert error["error"] == "EntityNotFound" and "Traceback" not in missing.content[0].text
            unknown = await client.call_tool("delete_document", {"document_id": "doc-nope"})
            assert unknown.is_error and json.loads(unknown.content[0].text)["error"] == "DocumentNotFound"

    asyncio.run(session())


def test_a_read_only_server_refuses_to_write(wd: Path) -> None:
    async def session() -> None:
        async with Client(server(wd, "--read-only"), read_timeout_seconds=120) as client:
            assert {t.name for t in (await client.list_tools()).tools} == READ_TOOLS
            refused = await client.call_tool("insert_text", {"text": "Ilse Varga founded Quillmoor Press."})
            assert refused.is_error and "insert_text" in refused.content[0].text
            docs = result_json(await client.call_tool("list_documents", {}))["documents"]
            assert len(docs) == len(DOCS)

    asyncio.run(session())


def test_streamable_http_needs_the_key(wd: Path) -> None:
    """`--transport http`: the same key rule as the HTTP API; a client carrying it lists and calls tools."""
    import httpx
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from helpers_server import free_port

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "graphrag.cli", "mcp", "--working-dir", str(wd), "--read-only",
                                "--transport", "http", "--port", str(port), "--api-key", "mcp-key-0123456789abcdef"],
                               env={"PATH": "/usr/bin:/bin", "GRAPHRAG_EMBEDDING": "hash"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                break
            except httpx.ConnectError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.1)
        assert refused.status_code == 401 and refused.json()["error"] == "Unauthorized"
        key = {"X-API-Key": "mcp-key-0123456789abcdef"}
        rebound = httpx.post(url, json={}, headers={**key, "Host": f"evil.example:{port}"})
        assert rebound.status_code == 421  # a name pointed at this machine by another site
        cross = httpx.post(url, json={}, headers={**key, "Origin": "https://evil.example"})
        assert cross.status_code == 403 and cross.json()["error"] == "CrossOriginRequest"

        async def session() -> None:
            async with httpx2.AsyncClient(headers={"X-API-Key": "mcp-key-0123456789abcdef"}, timeout=60) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    assert {t.name for t in (await client.list_tools()).tools} == READ_TOOLS
                    docs = result_json(await client.call_tool("list_documents", {}))["documents"]
                    assert len(docs) == len(DOCS)

        asyncio.run(session())
    finally:
        process.terminate()
        process.wait(timeout=15)
