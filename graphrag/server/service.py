"""One working dir served to many readers and one writer, for the HTTP API and the MCP server.

Queries never wait for a write. They run on a *reader*, a ``GraphRAG`` over the last commit;
writes run as jobs (``jobs.py``) on a separate *writer* instance, whose in-memory stores are
half-applied while it works. Once a write commits, a fresh reader is opened and warmed in
the background and then swapped in: queries already running finish on the old one, so no
query ever straddles two commits. Commits by other processes are noticed the same way (the
working dir's store files are checked at most once a second).

With reader processes (``workers``, ``reader_processes.py``), queries, answers and retrievals run in
worker processes instead, each told the generation of the reader in use here, so they move to
a new commit together with it; the writer and its jobs stay in this process, the writer's work
on a thread of its own (``writer_thread.py``) so that the loop serving requests never waits
for a write's CPU work.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional

from graphrag.config import GraphRAGConfig
from graphrag.errors import DocumentNotFound, InvalidInputError, StoreUnavailableError
from graphrag.graphrag import GraphRAG
from graphrag.query_param import QueryParam
from graphrag.readers import ReadDocument
from graphrag.redaction import protect_logs, redact, register_config_secrets
from graphrag.server.doc_status import DocumentStatus, document_rows, read_statuses
from graphrag.server.jobs import Job, JobQueue
from graphrag.server.json_values import as_json
from graphrag.server.reader_processes import (ConfigFactory, Reader, ReaderProcesses, json_bytes, open_reader,
                                              read)
from graphrag.server.writer_thread import WriterThread

if TYPE_CHECKING:
    from graphrag.querying.streaming import AnswerStream
    from graphrag.storage.base import StorageNameSpace

logger = logging.getLogger(__name__)

# The job queue kept across restarts, in the working dir (a folder: no store file).
JOBS_DIR = "server_jobs"
# The manual entity decisions a job may run: ``GraphRAG.a<op>(**args)`` (graph_upkeep.py).
ENTITY_DECISIONS = ("merge_entities", "never_merge", "undo_entity_decisions")
# How often, at most, a query checks whether another process committed.
DISK_CHECK_SECONDS = 1.0


# The options a request may set (read once: every query is checked against them).
_QUERY_OPTIONS = frozenset(f.name for f in fields(QueryParam))


def query_param(options: dict[str, Any]) -> QueryParam:
    """A ``QueryParam`` from request fields; unknown names are refused, not ignored."""
    unknown = sorted(set(options) - _QUERY_OPTIONS)
    if unknown:
        raise InvalidInputError(f"unknown query option(s): {', '.join(unknown)}")
    return QueryParam(**options)


class GraphService:
    """Queries, document listing and write jobs over one working dir.

    ``workers`` > 0 answers queries in that many reader processes, which build their config with
    ``worker_config`` (picklable; ``config`` itself may hold closures)."""

    def __init__(self, config: GraphRAGConfig, read_only: bool = False, input_dir: Optional[str] = None,
                 workers: int = 0, worker_config: Optional[ConfigFactory] = None) -> None:
        register_config_secrets(config)  # the LLM key and storage passwords: never in a log line
        self.config = config
        self.read_only = read_only
        self.input_dir = input_dir  # the folder POST /documents/scan indexes
        if workers and worker_config is None:
            raise InvalidInputError("reader processes need worker_config, a picklable function building the config")
        self._processes = ReaderProcesses(worker_config, workers) if workers and worker_config else None
        self._reader = Reader(GraphRAG(config))
        self._generation = 0  # raised at each swap of the reader; the reader processes follow it
        self._writer: Optional[GraphRAG] = None if read_only else GraphRAG(config)
        self._writing = WriterThread()  # the writer runs there, off the loop serving requests
        # A read-only server runs no write: it leaves the jobs and statuses a writing server kept alone.
        self.doc_status = None if read_only else DocumentStatus(config.working_dir)
        self.jobs = JobQueue(self._perform, on_committed=self.refresh,
                             state_dir=None if read_only else os.path.join(config.working_dir, JOBS_DIR),
                             watch=self._job_changed)
        if self.doc_status is not None:
            self.doc_status.recover(j.id for j in self.jobs.all() if j.status == "queued")
        self._disk_state = self._store_files_state()
        self._checked_at = time.monotonic()
        self._refreshing: Optional[asyncio.Task] = None
        self._refresh_lock = asyncio.Lock()
        self._closing: set[asyncio.Task] = set()

    @property
    def reader_processes(self) -> Optional[ReaderProcesses]:
        """The processes answering queries, if the service was given ``workers``."""
        return self._processes

    async def start(self) -> None:
        protect_logs()  # once the server's own logging (uvicorn's) is configured
        if self._processes is not None:
            await self._processes.start()
        self.jobs.start()

    async def stop(self) -> None:
        try:
            await self.jobs.stop()
            if self._processes is not None:
                await self._processes.stop()
            if self._refreshing is not None:
                self._refreshing.cancel()
            with contextlib.suppress(Exception):
                await self._reader.rag.aclose()
            if self._writer is not None:
                with contextlib.suppress(Exception):  # on the loop it was used on
                    await (self._writing.run(self._writer.aclose()) if self._writing.started
                           else self._writer.aclose())
        finally:  # the writer's thread and loop end even if the rest failed or was cancelled
            await self._writing.stop()

    # ------------------------------------------------------------------ reading

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[GraphRAG]:
        """The reader over the last commit, for one query's duration."""
        self._notice_other_writers()
        reader = self._reader
        reader.running += 1
        try:
            yield reader.rag
        finally:
            reader.running -= 1
            await reader.close_if_done()

    async def _read(self, operation: str, question: str, param: QueryParam, encoded: bool = False) -> Any:
        """A query, answer or retrieval (``reader_processes.read``): in a reader process if there are
        some, else on this process's reader; ``encoded``: as JSON text (``json_bytes``)."""
        if self._processes is not None:
            self._notice_other_writers()
            return await self._processes.call(self._generation, operation, question, param, encoded)
        async with self.reading() as rag:
            value = await read(rag, operation, question, param)
        return json_bytes(value) if encoded else value

    async def read_json(self, operation: str, question: str, param: QueryParam) -> bytes:
        """``query`` (its text), ``answer`` or ``retrieve`` as JSON text: a reader process's
        encoding passes through, so the server's loop never decodes and encodes it again."""
        return await self._read(operation, question, param, encoded=True)

    async def query(self, question: str, param: QueryParam) -> str:
        return await self._read("query", question, param)

    async def query_stream(self, question: str, param: QueryParam) -> AsyncIterator[str]:
        async with self.reading() as rag:
            async for piece in rag.aquery_stream(question, param):
                yield piece

    @contextlib.asynccontextmanager
    async def answer_stream(self, question: str, param: QueryParam) -> AsyncIterator["AnswerStream"]:
        """The answer streamed on the reader for the block's duration: its text pieces, then
        ``.answer`` (with the references when ``param.with_references``)."""
        async with self.reading() as rag, contextlib.aclosing(rag.aquery_result_stream(question, param)) as stream:
            yield stream

    async def answer(self, question: str, param: QueryParam) -> dict[str, Any]:
        """The answer citing ``[n]``, with the reference each ``n`` stands for."""
        return await self._read("answer", question, param)

    async def retrieve(self, question: str, param: QueryParam) -> dict[str, Any]:
        return await self._read("retrieve", question, param)

    async def graph(self, call: str, *args: Any, **options: Any) -> Any:
        """``rag.knowledge_graph.a<call>(...)`` on the reader, as JSON (see ``graphrag/graph_api.py``)."""
        async with self.reading() as rag:
            return as_json(await getattr(rag.knowledge_graph, f"a{call}")(*args, **options))

    async def drawing(self, names: list[str], depth: int = 1, max_nodes: int = 60) -> str:
        """The subgraph around ``names`` as the self-contained page ``graphrag export --format html``
        writes (its layout runs off the loop)."""
        from graphrag.export import to_html

        async with self.reading() as rag:
            sub = await rag.knowledge_graph.asubgraph(names, depth=depth, max_nodes=max_nodes)
        return await asyncio.to_thread(to_html, sub, f"Around {', '.join(names)}")

    async def record(self, store: str, record_id: str) -> Optional[dict[str, Any]]:
        """A chunk (``text_chunks``) or community report (``community_reports``) as stored."""
        async with self.reading() as rag:
            found = await getattr(rag.stores, store).get_by_id(record_id)
        return None if found is None else {"id": record_id, **found}

    async def list_documents(self) -> list[dict[str, Any]]:
        """Every document with its status (``doc_status.py``): the indexed ones and those
        queued, processing, failed or cancelled."""
        async with self.reading() as rag:
            indexed = await rag.inspection.adocuments()
        statuses = read_statuses(self.config.working_dir) if self.doc_status is None else self.doc_status.entries
        return document_rows(indexed, statuses)

    async def document_count(self) -> int:
        async with self.reading() as rag:
            return await rag.stores.full_docs.count()

    async def unreachable_stores(self, seconds: float) -> dict[str, str]:
        """Each kind of store ("kv", "vector", "graph") on a server that did not answer within
        ``seconds``, with why: every
        store is asked at once, and one of files (nothing to reach) is neither asked nor read."""
        from graphrag.backends import storage_class

        kinds = {"full_docs": "kv", "chunks_vdb": "vector", "graph": "graph"}
        async with self.reading() as rag:
            # Only a store with a server is opened: opening one of files may read it.
            stores = {kind: rag.stores.open(name) for name, kind in kinds.items()
                      if not getattr(storage_class(rag.config, kind).reachable, "checks_nothing", False)}

        async def ask(store: StorageNameSpace) -> Optional[str]:
            try:
                await asyncio.wait_for(store.reachable(), seconds)
            except StoreUnavailableError as exc:
                return redact(str(exc))
            except asyncio.TimeoutError:
                return f"no answer within {seconds:g} s"
            return None

        live = {name: s for name, s in stores.items() if s is not None}
        answers = await asyncio.gather(*(ask(s) for s in live.values()))
        return {name: problem for name, problem in zip(live, answers) if problem}

    # ------------------------------------------------------------------ writing

    def insert(self, texts: list[str], sources: list[Optional[str]]) -> Job:
        self._writable()
        return self._submit_documents("insert", [
            {"op": "insert", "texts": [t], "sources": [s]} for t, s in zip(texts, sources)])

    def insert_read(self, documents: list[ReadDocument]) -> Job:
        """Documents a reader made of uploaded files (``readers.read_data``)."""
        self._writable()
        return self._submit_documents("insert", [{"op": "insert_read", "documents": [asdict(d)]} for d in documents])

    def reprocess(self, doc_ids: Optional[list[str]] = None) -> Job:
        """Index failed or cancelled documents again (``doc_ids``; None: every failed one) from
        what they were asked to index."""
        status = self._statuses()
        wanted = status.ids_with("failed") if doc_ids is None else list(dict.fromkeys(doc_ids))
        redo = status.redo_of(wanted)
        unknown = [d for d in wanted if d not in redo]
        if unknown:
            raise InvalidInputError(f"not failed or cancelled (nothing to reprocess): {', '.join(unknown[:10])}")
        if not redo:
            raise InvalidInputError("no failed documents to reprocess")
        return self._submit_documents("reprocess", list(redo.values()))

    def scan(self) -> Job:
        """Index the new and changed files of the input folder (``input_folder.py``); they are
        known, and queued, once the job runs."""
        self._writable()
        if self.input_dir is None:
            raise InvalidInputError("this server has no input folder (start it with --input-dir DIR)")
        return self.jobs.submit("scan", f"scan {self.input_dir}", {"op": "scan", "parts": []})

    async def delete(self, doc_id: str) -> Job:
        self._writable()
        async with self.reading() as rag:
            if await rag.stores.full_docs.get_by_id(doc_id) is None:
                raise DocumentNotFound(f"unknown document id: {doc_id}", missing=[doc_id])
        return self.jobs.submit("delete", f"delete {doc_id}", {"op": "delete", "doc_id": doc_id})

    def decide(self, op: str, args: dict[str, Any], description: str) -> Job:
        """A manual entity decision as a job: kept in the job list (what, when, its outcome)
        like every write, and logged."""
        self._writable()
        if op not in ENTITY_DECISIONS:
            raise InvalidInputError(f"unknown entity decision {op!r}")
        job = self.jobs.submit("entities", description, {"op": op, "args": args})
        logger.info("Entity decision queued: %r", job.description)  # capped, newlines escaped
        return job

    def _submit_documents(self, kind: str, parts: list[dict[str, Any]]) -> Job:
        """One job over request ``parts`` (each indexes one document); each document is
        queued under the id its cleaned text gives (as ``prepare_documents`` ids it)."""
        from graphrag.server.input_folder import documents_of

        documents = [documents_of(part) for part in parts]
        names = [source or "text" for found in documents for _, source in found] or ["nothing"]
        described = ", ".join(names[:3]) + ("..." if len(names) > 3 else "")
        job = self.jobs.submit(kind, f"{kind} {len(names)} document(s): {described}", {"op": kind, "parts": parts})
        self._statuses().queued(job.id, [d for found in documents for d in found])
        return job

    async def _perform(self, request: dict[str, Any]) -> dict[str, Any]:
        """A job's work from its request (JSON, so a restarted server can run it again)."""
        from graphrag.server.input_folder import documents_of, run_parts, scan_parts

        writer = self._writable()
        if request["op"] in ENTITY_DECISIONS:
            return await self._writing.run(getattr(writer, f"a{request['op']}")(**request["args"]))
        if request["op"] == "delete":
            return await self._writing.run(writer.adelete_documents([request["doc_id"]]))
        if request["op"] == "scan" and not request["parts"]:  # the files are known once it runs
            if self.input_dir is None:  # a scan kept by a server started with --input-dir, run by one without
                raise InvalidInputError("this server has no input folder to scan (start it with --input-dir DIR)")
            assert self.jobs.running_id is not None  # this job's
            request["parts"] = await scan_parts(self.input_dir, self.config.working_dir)
            found = [d for part in request["parts"] for d in documents_of(part)]
            self._statuses().queued(self.jobs.running_id, found)
            self._statuses().processing(self.jobs.running_id)
        return await self._writing.run(run_parts(writer, request.get("parts", [request]), self.input_dir))

    def _job_changed(self, job: Job, request: dict[str, Any]) -> None:
        """A job's documents follow it: processing while it runs, then its outcome."""
        from graphrag.server.input_folder import documents_of, failed_files, record_scanned

        status = self.doc_status
        if status is None:
            return
        if job.status == "running":
            if job.progress is None:
                status.processing(job.id)
            else:
                status.progressed(job.id, job.progress["stage"], job.progress["done"], job.progress["total"])
            return
        if job.kind == "entities":  # no document's status changes
            return
        if job.kind == "delete":
            if job.status == "done":
                status.deleted([request["doc_id"]])
            return
        parts = request.get("parts", [request])
        redo = {doc_id: part for part in parts for doc_id, _ in documents_of(part)}
        if job.status == "done":
            failed = failed_files(job.stats or {})
            status.finished(job.id, "indexed", redo=redo, failed=failed)
            record_scanned(self.config.working_dir, parts, failed)  # a scan's or a reprocess's files
        elif job.status == "cancelled":
            status.finished(job.id, "cancelled", "cancelled by request", redo=redo)
        else:
            status.finished(job.id, "failed", (job.error or {}).get("message"), redo=redo)

    def _statuses(self) -> DocumentStatus:
        if self.doc_status is None:
            raise InvalidInputError("this server is read-only: it inserts and deletes nothing")
        return self.doc_status

    def _writable(self) -> GraphRAG:
        if self._writer is None:
            raise InvalidInputError("this server is read-only: it inserts and deletes nothing")
        return self._writer

    # ------------------------------------------------------------------ a new commit

    async def refresh(self) -> None:
        """Open a reader over the commit now on disk, warm it, and swap it in."""
        async with self._refresh_lock:
            self._disk_state = self._store_files_state()
            opened = self._reader.rag.stores.opened()

            # Off the loop (it may wait for another process's commit to finish). The fresh
            # instance is not shared until the swap.
            fresh = Reader(await asyncio.to_thread(open_reader, self.config, opened))
            # Nothing awaited from the swap to the return: a job is "done" once it returns, and
            # no query may still start on the old reader then.
            old, self._reader = self._reader, fresh
            self._generation += 1
            old.retired = True
            if old.running == 0:  # else the last query on it closes it
                self._closing.add(task := asyncio.create_task(old.close_if_done()))
                task.add_done_callback(self._closing.discard)
            logger.info("Serving the new commit (stores read ahead: %s)", ", ".join(opened) or "none")

    def _notice_other_writers(self) -> None:
        """Start a refresh when another process committed (checked at most once a second)."""
        now = time.monotonic()
        if now - self._checked_at < DISK_CHECK_SECONDS or (self._refreshing and not self._refreshing.done()):
            return
        self._checked_at = now
        if self._store_files_state() != self._disk_state:
            self._refreshing = asyncio.create_task(self.refresh())

    def _store_files_state(self) -> tuple[tuple[str, int, int], ...]:
        """(name, size, mtime) of the working dir's files, the LLM answer cache aside (queries
        add to it; it never changes what an answer is built from)."""
        wd = self.config.working_dir
        with contextlib.suppress(FileNotFoundError):
            return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(wd)
                                if e.is_file() and "llm_response_cache" not in e.name))
        return ()
