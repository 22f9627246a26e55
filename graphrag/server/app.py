"""The HTTP API (FastAPI): documents in as background jobs, questions answered (streamed as
server-sent events if asked), the web page at ``/``; OpenAPI at ``/docs``.

``build_app`` gives the ASGI app behind the key check and size limits (``security.py``);
``serve`` runs it on uvicorn.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import MISSING, fields
from importlib import resources
from typing import Any, AsyncIterator, Awaitable, Literal, Optional, Sequence, Union, get_type_hints

from fastapi import FastAPI, File, Query, Request, Response, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.exceptions import HTTPException

from graphrag.errors import GraphRAGError, InvalidInputError, StoreUnavailableError, UnreadableFileError
from graphrag.operators.modes import MODES, mode_names
from graphrag.query_param import QueryParam
from graphrag.readers import read_data
from graphrag.redaction import redact, register_secret
from graphrag.server.chat_api import chat_router
from graphrag.server.doc_status import DEFAULT_LIMIT, MAX_LIMIT, STATUSES, select
from graphrag.server.errors import capped, error_body, http_status, validation_message
from graphrag.server.graph_upkeep import upkeep_router
from graphrag.server.security import (DEFAULT_POLICY, ASGIApp, Message, Receive, Send, check_binding, check_key,
                                      host_names, secured, uvicorn_config)
from graphrag.server.service import GraphService, as_json, query_param
from graphrag.server.workspaces import Workspaces, selecting_workspace

logger = logging.getLogger(__name__)

HEALTH_SECONDS = 0.5  # /health answers within a second, a store down or not
MAX_BODY_BYTES = 1 << 20  # a JSON request: a question, or text to index
MAX_UPLOAD_BYTES = 32 << 20  # files sent to POST /documents/files, all together
UPLOAD_PATH = "/documents/files"
DOCS_ASSETS = "/docs/assets"  # Swagger UI's files, from the fastapi-offline package

STATIC = resources.files("graphrag.server") / "static"

# Uploads wait for the reading process here, one at a time (it reads one file at a time), not
# in the loop's default threads: queued slow files would hold every one of those, and with them
# each query's embedding, the drawings and the jobs.
_READING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphrag-upload-reading")


def _query_request_model() -> type[BaseModel]:
    """The body of POST /query: the question, ``stream``, and every ``QueryParam`` field with
    its type and default (a field added to ``QueryParam`` appears here by itself), ``mode``
    one of the registered modes; a misspelt option is refused rather than ignored."""
    hints = {**get_type_hints(QueryParam), "mode": Literal[mode_names()]}  # the registered modes
    options: dict[str, Any] = {}
    for f in fields(QueryParam):
        default = Field(default_factory=f.default_factory) if f.default is MISSING else f.default
        options[f.name] = (hints[f.name], default)
    return create_model("QueryRequest", __config__=ConfigDict(extra="forbid"),
                        question=(str, Field(min_length=1)),
                        stream=(bool, Field(False, description="answer as server-sent events")), **options)


QueryRequest = _query_request_model()


class DocumentsRequest(BaseModel):
    """Text to index: one ``text`` (with its ``source``) or several ``texts`` (``sources``).
    A known source with new text replaces that document's old version."""

    text: Optional[str] = None
    source: Optional[str] = None
    texts: list[str] = []
    sources: Optional[list[Optional[str]]] = None


class ReprocessRequest(BaseModel):
    ids: Optional[list[str]] = None


class SubgraphRequest(BaseModel):
    names: list[str] = Field(min_length=1)
    depth: int = 1
    max_nodes: int = 200


def _sse(event: Optional[str], data: dict[str, Any]) -> str:
    return (f"event: {event}\n" if event else "") + f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def create_app(service: "GraphService | Workspaces") -> FastAPI:
    service = Workspaces.of(service)  # each call in the workspace the request names (X-Workspace)

    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    # /docs is served from the package (fastapi-offline's files), never from a CDN: see docs_page.
    app = FastAPI(title="graphrag", summary="Query and grow a GraphRAG index", lifespan=lifespan,
                  docs_url=None, redoc_url=None)

    @app.exception_handler(GraphRAGError)
    async def engine_error(_: Request, exc: GraphRAGError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": "InvalidInputError", "message": capped(validation_message(exc.errors()))},
                            status_code=400)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": "HTTPError", "message": capped(str(exc.detail))}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        return _error_response(exc)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.get("/docs", include_in_schema=False)
    async def docs_page() -> FileResponse:
        return FileResponse(str(STATIC / "docs.html"))

    app.mount(DOCS_ASSETS, StaticFiles(directory=_swagger_ui_path()), name="docs-assets")

    @app.get("/livez", summary="Liveness for a load balancer: no key needed, nothing revealed")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/health", summary="What the server holds; 503 naming the store that did not answer within 1 s",
             response_model=None)
    async def health() -> Union[dict[str, Any], JSONResponse]:
        jobs = service.jobs.all()
        body: dict[str, Any] = {
            "status": "ok", "read_only": service.read_only, "documents": None,
            "jobs": {status: sum(j.status == status for j in jobs) for status in ("queued", "running")}}
        # Every store on a server is asked at once; a database that hangs would hold the check
        # for its connect timeout, so each answers within the limit or is reported.
        unreachable = await service.unreachable_stores(HEALTH_SECONDS)
        if not unreachable:
            try:
                body["documents"] = await asyncio.wait_for(service.document_count(), HEALTH_SECONDS)
            except (StoreUnavailableError, asyncio.TimeoutError) as exc:
                store = exc.store if isinstance(exc, StoreUnavailableError) else "kv"
                unreachable[store] = redact(str(exc)) or f"no answer within {HEALTH_SECONDS:g} s"
        if unreachable:
            return JSONResponse({**body, "status": "unavailable", "stores": unreachable}, status_code=503)
        return body

    @app.get("/modes", summary="The query modes, each with a one-line description")
    async def modes() -> list[dict[str, str]]:
        return [{"name": m.name, "description": m.description} for m in MODES.values()]

    @app.get("/documents", summary="Documents with their status, a page at a time (the total in X-Total-Count)")
    async def list_documents(response: Response, status: Optional[Literal[STATUSES]] = None,  # type: ignore[valid-type]
                             q: Optional[str] = None, offset: int = Query(0, ge=0),
                             limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)) -> list[dict[str, Any]]:
        total, page = select(await service.list_documents(), status, q, offset, limit)
        response.headers["X-Total-Count"] = str(total)
        return page

    @app.get("/workspaces", summary="The named workspaces (the X-Workspace header selects one), and whether each "
                                     "is open now (at most --max-open-workspaces idle ones are)")
    async def list_workspaces() -> list[dict[str, Any]]:
        opened = set(service.open_names)
        return [{"name": name, "open": name in opened} for name in service.names()]

    if not service.read_only:  # a read-only server offers no write endpoint at all
        @app.post("/documents", status_code=202, summary="Index text in the background; returns the job")
        async def insert_text(body: DocumentsRequest) -> dict[str, Any]:
            texts = ([body.text] if body.text is not None else []) + body.texts
            sources = ([body.source] if body.text is not None else []) + (body.sources or [None] * len(body.texts))
            if not texts or len(sources) != len(texts):
                raise InvalidInputError("send `text` (and `source`), or `texts` (and as many `sources`)")
            return service.insert(texts, sources).to_dict()

        @app.post(UPLOAD_PATH, status_code=202,
                  summary="Index uploaded files (PDF, Word, HTML, Markdown, text, JSON records) in the background")
        async def insert_files(files: list[UploadFile] = File(...)) -> dict[str, Any]:
            documents = []
            for upload in files:
                name = os.path.basename(upload.filename or "upload.txt")
                try:
                    data = await upload.read()
                    documents += await asyncio.get_running_loop().run_in_executor(_READING, read_data, name, data)
                except UnreadableFileError as exc:  # a 400 naming the file, like any invalid input
                    raise InvalidInputError(f"{name}: {exc}") from None
            return service.insert_read(documents).to_dict()

        @app.post("/documents/reprocess", status_code=202,
                  summary="Index failed or cancelled documents again (no ids: every failed one); returns the job")
        async def reprocess(body: Optional[ReprocessRequest] = None) -> dict[str, Any]:
            return service.reprocess(body.ids if body is not None else None).to_dict()

        @app.post("/documents/scan", status_code=202,
                  summary="Index the new and changed files of the input folder (--input-dir); returns the job")
        async def scan() -> dict[str, Any]:
            return service.scan().to_dict()

        @app.post("/jobs/{job_id}/cancel", summary="Cancel a queued or running job; returns it once it ended")
        async def cancel_job(job_id: str) -> dict[str, Any]:
            job = await service.jobs.cancel(job_id)
            if job is None:
                raise HTTPException(404, f"no job {job_id}")
            return job.to_dict()

        @app.delete("/documents/{doc_id}", status_code=202,
                    summary="Delete a document, and what only it contributed, in the background")
        async def delete_document(doc_id: str) -> dict[str, Any]:
            return (await service.delete(doc_id)).to_dict()

    @app.get("/jobs", summary="Every job kept, oldest first")
    async def list_jobs() -> list[dict[str, Any]]:
        return [j.to_dict() for j in service.jobs.all()]

    @app.get("/jobs/{job_id}", summary="A job: status, progress, and the insert's or delete's stats")
    async def get_job(job_id: str) -> dict[str, Any]:
        job = service.jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job.to_dict()

    @app.get("/readers", summary="The file suffixes an upload is read by (its reader), e.g. .pdf; others as text")
    async def readers() -> dict[str, list[str]]:
        from graphrag.readers import known_suffixes

        return {"suffixes": known_suffixes()}

    @app.post("/query", summary="Answer a question (mode and every QueryParam field; stream=true for SSE: text "
                                "pieces, then a `references` event when with_references, then `done`)",
              response_model=None)
    async def query(body: QueryRequest) -> Response:  # type: ignore[valid-type]
        if not body.stream:
            return await _read_reply(service, "/query", body)
        param = query_param(body.model_dump(exclude={"question", "stream"}))

        async def events() -> AsyncIterator[str]:
            try:
                async with service.answer_stream(body.question, param) as pieces:
                    async for piece in pieces:
                        yield _sse(None, {"text": piece})
                if param.with_references:  # known once the text has all come: the citations it kept
                    assert pieces.answer is not None
                    yield _sse("references", {"references": as_json(pieces.answer.references)})
                yield _sse("done", {})
            except Exception as exc:  # the status line is gone: the error is the last event
                if not isinstance(exc, GraphRAGError):
                    logger.error("streamed query failed", exc_info=exc)
                yield _sse("error", error_body(exc))

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    @app.post("/retrieve", summary="What a mode retrieves for a question, as records with their sources")
    async def retrieve(body: QueryRequest) -> Response:  # type: ignore[valid-type]
        return await _read_reply(service, "/retrieve", body)

    @app.get("/chunks/{chunk_id}", summary="A chunk (a cited passage): its text and document")
    async def chunk(chunk_id: str) -> dict[str, Any]:
        return await _found(service.record("text_chunks", chunk_id), f"no chunk {chunk_id}")

    @app.get("/reports/{report_id}", summary="A community report (cited by global answers)")
    async def report(report_id: str) -> dict[str, Any]:
        return await _found(service.record("community_reports", report_id), f"no community report {report_id}")

    @app.get("/graph/entity/{name:path}", summary="An entity by name (any case); 404 with close matches")
    async def entity(name: str) -> dict[str, Any]:
        return await service.graph("entity", name)

    @app.get("/graph/neighbors/{name:path}", summary="Entities within depth hops, nearest and heaviest first")
    async def neighbors(name: str, depth: int = 1, direction: Literal["both", "out", "in"] = "both",
                        relation: Optional[str] = None, entity_type: Optional[str] = None,
                        min_weight: float = 0.0, limit: int = 50) -> list[dict[str, Any]]:
        return await service.graph("neighbors", name, depth=depth, direction=direction, relation=relation,
                                   entity_type=entity_type, min_weight=min_weight, limit=limit)

    @app.get("/graph/paths", summary="Shortest paths between two entities")
    async def paths(source: str, target: str, max_depth: int = 4, k: int = 3) -> list[dict[str, Any]]:
        return await service.graph("paths", source, target, max_depth=max_depth, k=k)

    @app.post("/graph/subgraph", summary="Entities around some seeds, the relations among them, their communities")
    async def subgraph(body: SubgraphRequest) -> dict[str, Any]:
        return await service.graph("subgraph", body.names, depth=body.depth, max_nodes=body.max_nodes)

    @app.get("/graph/view", response_class=HTMLResponse,
             summary="The subgraph around some entities drawn as a page (the HTML export's renderer)")
    async def view(names: list[str] = Query(min_length=1), depth: int = 1, max_nodes: int = 60) -> HTMLResponse:
        return HTMLResponse(await service.drawing(names, depth=depth, max_nodes=max_nodes))

    @app.get("/graph/search", summary="Entities whose descriptions are nearest the text")
    async def search(q: str, top_k: int = 10) -> list[dict[str, Any]]:
        return await service.graph("search", q, top_k=top_k)

    @app.get("/graph/graph_search", summary="Vector hits expanded through the graph, scored by hops")
    async def graph_search(q: str, top_k: int = 10, depth: int = 1, decay: float = 0.5,
                           limit: int = 50) -> list[dict[str, Any]]:
        return await service.graph("graph_search", q, top_k=top_k, depth=depth, decay=decay, limit=limit)

    app.include_router(upkeep_router(service))
    app.include_router(chat_router(service))
    return app


def _json_response(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _error_response(exc: Exception) -> JSONResponse:
    """The README's error shape for an error a request raised: the engine's with its status,
    anything else a 500 (logged)."""
    if isinstance(exc, GraphRAGError):
        return JSONResponse(error_body(exc), status_code=http_status(exc))
    logger.error("request failed", exc_info=exc)
    return JSONResponse(error_body(exc), status_code=500)


# The reads answered whole as the JSON a reader encoded: POST /query (not streamed) and /retrieve.
READ_PATHS = ("/query", "/retrieve")


async def _read_reply(service: Workspaces, path: str, body: BaseModel) -> Response:
    """The answer to a POST of ``READ_PATHS`` (``body`` a ``QueryRequest``), as the JSON
    encoded where the query ran (a reader process's: not decoded here)."""
    question = body.question  # type: ignore[attr-defined]
    param = query_param(body.model_dump(exclude={"question", "stream"}))
    if path == "/retrieve":
        return _json_response(await service.read_json("retrieve", question, param))
    if param.with_references:
        return _json_response(await service.read_json("answer", question, param))
    return _json_response(b'{"answer":' + await service.read_json("query", question, param) + b"}")


class LeanReads:
    """POST /query and /retrieve answered without FastAPI's routing, dependency solving and
    middleware, which were most of the server's own CPU per query on cheap (naive) queries
    (benchmarks/README.md, "Naive throughput").

    It sits inside the security checks (``secured``) and the workspace selection, so every
    request passes the same ones; it parses and validates the body as FastAPI does (JSON
    into the same ``QueryRequest``) and answers with the same functions. Anything else goes
    to ``app`` with its body as received: another content type, a body that does not parse
    or validate (FastAPI words the error), a streamed query, a client gone mid-body."""

    def __init__(self, app: ASGIApp, service: Workspaces) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in READ_PATHS
                or _content_type(scope) != b"application/json"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replaying(chunks, receive, message), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        try:
            body = QueryRequest.model_validate(json.loads(b"".join(chunks)))
        except Exception:  # FastAPI answers it, as it would have
            body = None
        if body is None or (scope["path"] == "/query" and body.stream):
            await self.app(scope, _replaying(chunks, receive), send)
            return
        try:
            response = await _read_reply(self.service, scope["path"], body)
        except Exception as exc:
            response = _error_response(exc)
        await response(scope, receive, send)


def _content_type(scope: dict) -> Optional[bytes]:
    return next((value for name, value in scope["headers"] if name == b"content-type"), None)


def _replaying(chunks: list[bytes], receive: Receive, last: Optional[Message] = None) -> Receive:
    """``receive`` giving the body already read (then ``last``, the message that ended it)
    before what the client sends next."""
    pending: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": last is not None}]
    if last is not None:
        pending.append(last)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _found(lookup: Awaitable[Optional[dict[str, Any]]], missing: str) -> dict[str, Any]:
    found = await lookup
    if found is None:
        raise HTTPException(404, missing)
    return found


def _swagger_ui_path() -> str:
    """Swagger UI 5 (OpenAPI 3.1, which FastAPI writes), as the fastapi-offline package ships it."""
    return str(resources.files("fastapi_offline") / "static")


def _is_public(path: str) -> bool:
    """Paths served without the key: the page's shell and files, the API docs, liveness.
    None of them holds anything of the index (the page asks for the key, then fetches)."""
    return path in ("/", "/livez", "/docs", "/openapi.json") or path.startswith(("/static/", DOCS_ASSETS + "/"))


def content_security_policy() -> str:
    """The default policy, plus the graph drawing's inline script and style by their hashes
    (the page shows a drawing inline)."""
    from graphrag.export import DRAWING_SOURCES

    drawing = (f"{directive} 'self' {source}" for directive, source in DRAWING_SOURCES.items())
    return "; ".join([DEFAULT_POLICY, *drawing])


def build_app(service: "GraphService | Workspaces", api_key: Optional[str] = None,
              max_body_bytes: int = MAX_BODY_BYTES, max_upload_bytes: int = MAX_UPLOAD_BYTES, *,
              host: str = "127.0.0.1", allowed_hosts: Sequence[str] = ()) -> ASGIApp:
    """The API behind the checks of ``security.py``: Host and Origin (the names ``host`` and
    ``allowed_hosts``), the key, the size limits (uploads may be larger than the rest)."""
    if api_key:
        check_key(api_key)
        register_secret(api_key)
    service = Workspaces.of(service)
    return secured(selecting_workspace(LeanReads(create_app(service), service), service), api_key,
                   lambda path: max_upload_bytes if path == UPLOAD_PATH else max_body_bytes,
                   hosts=host_names(host, allowed_hosts), public=_is_public,
                   content_security_policy=content_security_policy())


def serve(service: "GraphService | Workspaces", host: str = "127.0.0.1", port: int = 8000, api_key: Optional[str] = None,
          max_body_bytes: int = MAX_BODY_BYTES, max_upload_bytes: int = MAX_UPLOAD_BYTES,
          allowed_hosts: Sequence[str] = ()) -> None:
    import uvicorn

    check_binding(host, api_key, allowed_hosts)
    app = build_app(service, api_key, max_body_bytes, max_upload_bytes, host=host, allowed_hosts=allowed_hosts)
    uvicorn.Server(uvicorn_config(app, host, port)).run()
