"""The index as MCP tools an agent can call (the ``mcp`` SDK), over stdio or streamable HTTP.

Each tool says when to use it; results are JSON. A read-only server has no tool that writes.
Tools share ``GraphService`` with the HTTP API: queries read the last commit, writes are jobs.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any, Awaitable, Callable, Literal, Optional, Sequence

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from graphrag.operators.modes import describe_modes, mode_names
from graphrag.server.errors import error_body
from graphrag.server.service import GraphService, query_param
from graphrag.server.workspaces import WorkspaceMiddleware, Workspaces

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "A knowledge graph built from the user's documents: entities, their relations, and reports on "
    "communities of related entities. Use `query` for an answer in prose, `retrieve` for the evidence, "
    "`search_entities` to find entity names, then `neighbors`, `find_paths` and `subgraph` to explore "
    "around them; `list_documents` to see what is indexed. Writing tools queue a background job and "
    "return it (wait=true returns it finished); the index changes when it finishes.")


def _as_tool(work: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A tool whose failures reach the agent as an error result holding JSON ``{"error",
    "message"}`` (never a traceback)."""
    @functools.wraps(work)
    async def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            return await work(*args, **kwargs)
        except Exception as exc:
            logger.info("tool %s failed: %s", work.__name__, exc, exc_info=True)
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(error_body(exc)))],
                                  is_error=True)

    return tool


def create_mcp_server(service: "GraphService | Workspaces") -> MCPServer:
    """The tools over ``service``; the caller starts and stops the service (its job worker).
    Over HTTP, a call runs in the workspace its ``X-Workspace`` header names."""
    service = Workspaces.of(service)
    server = MCPServer("graphrag", instructions=INSTRUCTIONS, middleware=[WorkspaceMiddleware()])

    # The registered modes, as the tools' schema offers them (an annotation naming them is
    # set on each tool taking a mode before the SDK reads its signature).
    mode_type = Literal[mode_names()]  # type: ignore[valid-type]

    def tool(description: str) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
        def add(fn: Callable[..., Awaitable[Any]]) -> Any:
            if "mode" in fn.__annotations__:
                fn.__annotations__["mode"] = mode_type
            return server.add_tool(_as_tool(fn), description=description)

        return add

    @tool("Answer a question in prose from the knowledge graph, in one of the modes: "
          f"{describe_modes()}. only_need_context=true returns the retrieved context instead of an answer.")
    async def query(question: str, mode: str = "local",
                    only_need_context: bool = False, top_k: int = 20,
                    response_type: str = "Multiple Paragraphs") -> dict[str, Any]:
        param = query_param({"mode": mode, "only_need_context": only_need_context, "top_k": top_k,
                             "response_type": response_type})
        return {"answer": await service.query(question, param)}

    @tool("Retrieve, without writing an answer, what a query mode finds for a question: the passages "
          "(chunks), entities, relations and community reports, each with the documents it came from. "
          "Use it to read the evidence yourself or to cite sources.")
    async def retrieve(question: str, mode: str = "local",
                       top_k: int = 20) -> dict[str, Any]:
        found = await service.retrieve(question, query_param({"mode": mode, "top_k": top_k}))
        found.pop("context_groups", None)  # global: the context again, split per map call
        return found

    @tool("Find entities (people, organisations, places, events, ...) whose descriptions match a text, "
          "most similar first. Use it to find the exact entity names the graph tools take.")
    async def search_entities(text: str, top_k: int = 10) -> dict[str, Any]:
        return {"entities": await service.graph("search", text, top_k=top_k)}

    @tool("The entities related to one entity, within `depth` hops, nearest and most strongly related "
          "first, each with the relation that reached it. Optional filters: a word the relation's "
          "description holds, the neighbour's type, direction 'out' or 'in'.")
    async def neighbors(entity: str, depth: int = 1, relation: Optional[str] = None,
                        entity_type: Optional[str] = None, direction: Literal["both", "out", "in"] = "both",
                        limit: int = 50) -> dict[str, Any]:
        return {"neighbors": await service.graph("neighbors", entity, depth=depth, relation=relation,
                                                 entity_type=entity_type, direction=direction, limit=limit)}

    @tool("How two entities are connected: up to k shortest paths between them (each a chain of "
          "relations), at most max_depth hops long.")
    async def find_paths(source: str, target: str, max_depth: int = 4, k: int = 3) -> dict[str, Any]:
        return {"paths": await service.graph("paths", source, target, max_depth=max_depth, k=k)}

    @tool("The neighbourhood of one or more entities as a small graph: the entities within `depth` hops, "
          "every relation among them, and the communities (with their report titles) they belong to.")
    async def subgraph(entities: list[str], depth: int = 1, max_nodes: int = 50) -> dict[str, Any]:
        return await service.graph("subgraph", entities, depth=depth, max_nodes=max_nodes)

    @tool("List the indexed documents: id, source (file name or label), size in characters and chunks. "
          "Use the id with delete_document.")
    async def list_documents() -> dict[str, Any]:
        return {"documents": await service.list_documents()}

    if not service.read_only:
        @tool("Add a text to the knowledge graph. Indexing runs in the background: the result is the job "
              "(id, status); the text is searchable once it is done. A text with the same source as an "
              "indexed document replaces that document.")
        async def insert_text(text: str, source: Optional[str] = None, wait: bool = False) -> dict[str, Any]:
            job = service.insert([text], [source])
            if wait:
                await service.jobs.wait_for(job.id)
            return job.to_dict()

        @tool("Delete an indexed document by id (from list_documents), and every fact only it "
              "contributed. Runs in the background; the result is the job.")
        async def delete_document(document_id: str, wait: bool = False) -> dict[str, Any]:
            job = await service.delete(document_id)
            if wait:
                await service.jobs.wait_for(job.id)
            return job.to_dict()

    return server


def run_mcp(service: "GraphService | Workspaces", transport: str = "stdio", host: str = "127.0.0.1", port: int = 8001,
            api_key: Optional[str] = None, max_body_bytes: int = 1 << 20, allowed_hosts: Sequence[str] = ()) -> None:
    """Serve over stdio, or streamable HTTP at ``/mcp`` under the HTTP API's binding, Host,
    Origin and key rules (``security.py``)."""
    service = Workspaces.of(service)
    server = create_mcp_server(service)

    async def run(serving: Callable[[], Awaitable[None]]) -> None:
        await service.start()
        try:
            await serving()
        finally:
            await service.stop()

    if transport == "stdio":
        asyncio.run(run(server.run_stdio_async))
        return
    import uvicorn

    from graphrag.redaction import register_secret
    from graphrag.server.security import check_binding, host_names, secured, uvicorn_config

    check_binding(host, api_key, allowed_hosts)
    register_secret(api_key)
    app = secured(server.streamable_http_app(host=host), api_key, lambda _path: max_body_bytes,
                  hosts=host_names(host, allowed_hosts))
    asyncio.run(run(uvicorn.Server(uvicorn_config(app, host, port)).serve))
