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
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from graphrag import __version__
from graphrag.errors import InvalidInputError
from graphrag.operators.modes import describe_modes, mode_names
from graphrag.server import graph_upkeep
from graphrag.server.errors import error_body, validation_message
from graphrag.server.jobs import Job
from graphrag.server.service import GraphService, query_param
from graphrag.server.workspaces import WorkspaceMiddleware, Workspaces

logger = logging.getLogger(__name__)

READING = (
    "A knowledge graph built from the user's documents: entities, their relations, and reports on "
    "communities of related entities. Use `query` for an answer in prose (with_references=true for one "
    "citing its sources), `retrieve` for the evidence, `search_entities` or `search_labels` to find entity "
    "names (`popular_entities` for the best connected), then `neighbors`, `find_paths` and `subgraph` to "
    "explore around them; `list_documents` to see what is indexed.")
WRITING = (
    " Writing tools (`insert_text`, `delete_document`, `merge_entities`, `never_merge`, "
    "`undo_entity_decisions`) queue a background job and return it (wait=true returns it finished; "
    "`job_status` reports one); the index changes when it finishes.")


def instructions(read_only: bool) -> str:
    """What the server tells an agent; a read-only server names no tool it lacks."""
    return READING if read_only else READING + WRITING


def _error_result(exc: BaseException) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(error_body(exc)))], is_error=True)


def _as_tool(work: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A tool whose failures reach the agent as an error result holding JSON ``{"error",
    "message"}`` (never a traceback)."""
    @functools.wraps(work)
    async def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            return await work(*args, **kwargs)
        except Exception as exc:
            logger.info("tool %s failed: %s", work.__name__, exc, exc_info=True)
            return _error_result(exc)

    return tool


class _GraphMCPServer(MCPServer):
    """The SDK's server, with a call it refuses before the tool runs (arguments that fail the
    tool's schema, an unknown tool) answered in the same JSON error shape as a tool's failure."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            message = validation_message(cause.errors()) if isinstance(cause, ValidationError) else str(exc)
            logger.info("tool %s refused: %s", name, message)
            return _error_result(InvalidInputError(f"{name}: {message}"))


# What each kind of tool does to the index, as MCP's hints: a read changes nothing; every
# write may replace or regroup what is there, and asking again for the same changes nothing more.
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def create_mcp_server(service: "GraphService | Workspaces") -> MCPServer:
    """The tools over ``service``; the caller starts and stops the service (its job worker).
    Over HTTP, a call runs in the workspace its ``X-Workspace`` header names."""
    service = Workspaces.of(service)
    server = _GraphMCPServer("graphrag", instructions=instructions(service.read_only), version=__version__,
                             middleware=[WorkspaceMiddleware(service)])

    # The registered modes, as the tools' schema offers them (an annotation naming them is
    # set on each tool taking a mode before the SDK reads its signature).
    mode_type = Literal[mode_names()]  # type: ignore[valid-type]

    def tool(description: str, annotations: ToolAnnotations = READ) -> Callable[[Callable[..., Awaitable[Any]]], None]:
        def add(fn: Callable[..., Awaitable[Any]]) -> None:
            if "mode" in fn.__annotations__:
                fn.__annotations__["mode"] = mode_type
            return server.add_tool(_as_tool(fn), description=description, annotations=annotations)

        return add

    async def finished(job: Job, wait: bool) -> dict[str, Any]:
        if wait:
            await service.jobs.wait_for(job.id)
        return job.to_dict()

    @tool("Answer a question in prose from the knowledge graph, in one of the modes: "
          f"{describe_modes()}. with_references=true returns an answer citing its sources as [n] and the "
          "reference each n stands for. only_need_context=true returns the retrieved context instead of an answer.")
    async def query(question: str, mode: str = "local", with_references: bool = False,
                    only_need_context: bool = False, top_k: int = 20,
                    response_type: str = "Multiple Paragraphs") -> dict[str, Any]:
        param = query_param({"mode": mode, "only_need_context": only_need_context, "top_k": top_k,
                             "response_type": response_type, "with_references": with_references})
        if with_references:
            return await service.answer(question, param)
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

    @tool("Entity names as a person or agent types them: names starting with the text first (any case or "
          "punctuation), then names one of whose words starts with it, then names spelt like it; each with "
          "its type and degree (how many relations it has).")
    async def search_labels(text: str, limit: int = 20) -> dict[str, Any]:
        return {"entities": await service.graph("labels", text, limit)}

    @tool("The best connected entities (most relations first), with their type and degree: where to start "
          "exploring an unfamiliar graph.")
    async def popular_entities(limit: int = 20) -> dict[str, Any]:
        return {"entities": await service.graph("popular", limit)}

    if not service.read_only:
        @tool("A job's status (queued, running, done or failed), progress, stats or error, by the id a "
              "writing tool returned.")
        async def job_status(job_id: str) -> dict[str, Any]:
            job = service.jobs.get(job_id)
            if job is None:
                raise InvalidInputError(f"no job {job_id}")
            return job.to_dict()

        @tool("Merge entities the graph holds apart into one node named `into`, for good: the decision holds "
              "across later inserts and deletes (undo_entity_decisions drops it). Runs in the background; "
              "the result is the job.", WRITE)
        async def merge_entities(names: list[str], into: str, wait: bool = False) -> dict[str, Any]:
            return await finished(graph_upkeep.merge(service, names, into), wait)

        @tool("Keep two entities in different nodes whatever the evidence says (undo_entity_decisions drops "
              "the decision). Runs in the background; the result is the job.", WRITE)
        async def never_merge(a: str, b: str, wait: bool = False) -> dict[str, Any]:
            return await finished(graph_upkeep.never_merge(service, a, b), wait)

        @tool("Drop every merge_entities or never_merge decision naming these entities: they go back to "
              "what the evidence decides. Runs in the background; the result is the job.", WRITE)
        async def undo_entity_decisions(names: list[str], wait: bool = False) -> dict[str, Any]:
            return await finished(graph_upkeep.undo(service, names), wait)

        @tool("Add a text to the knowledge graph. Indexing runs in the background: the result is the job "
              "(id, status); the text is searchable once it is done. A text with the same source as an "
              "indexed document replaces that document.", WRITE)
        async def insert_text(text: str, source: Optional[str] = None, wait: bool = False) -> dict[str, Any]:
            return await finished(service.insert([text], [source]), wait)

        @tool("Delete an indexed document by id (from list_documents), and every fact only it "
              "contributed. Runs in the background; the result is the job.", WRITE)
        async def delete_document(document_id: str, wait: bool = False) -> dict[str, Any]:
            return await finished(await service.delete(document_id), wait)

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
