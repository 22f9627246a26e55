"""Writes as jobs: queued, run one at a time in the background, their progress and outcome kept.

A request that changes the index (insert, delete) returns at once with a job id; the one
worker runs the jobs in order, so two writes never contend for the working dir's lock.

Jobs outlive the server when it has a ``state_dir`` (``server_jobs/`` in the working dir):
each job's record is kept in ``jobs.json`` and what it was asked to do (its *request*, a
JSON object the service turns into work) in ``<id>.json`` until it finishes. A server started
again reports the job that was running when it stopped (``interrupted``: when) and runs it
again, then the queued ones, in their order: a write already committed costs nothing the
second time, and LLM answers already paid for come from the cache.

``cancel`` drops a queued job, or cancels a running one's task: the engine's write scope
(``GraphRAG._writing``) drops its half-applied state on any exception, cancellation too,
and its stores' transaction makes nothing visible before the commit, so a cancelled write
leaves the index as it was. A job whose commit won the race ends ``done`` all the same.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from graphrag.progress import progress_listener
from graphrag.query_param import check_unicode
from graphrag.server.doc_status import write_json
from graphrag.server.errors import capped, error_body

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

logger = logging.getLogger(__name__)

# Finished jobs kept for GET /jobs; the oldest finished ones go first.
KEPT_JOBS = 1000
JOBS_FILE = "jobs.json"

Runner = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
# Told of each job, with its request, as it starts running, progresses and ends (its status says how).
Watcher = Callable[["Job", dict[str, Any]], None]


@dataclass
class Job:
    id: str
    kind: str  # "insert" | "delete" | "reprocess" | "scan" | "entities" (a manual entity decision)
    description: str
    status: str = "queued"  # -> "running" -> "done" | "failed"; or "cancelled" (from queued or running)
    created: float = field(default_factory=time.time)
    started: Optional[float] = None
    finished: Optional[float] = None
    # The stage reporting progress now: {"stage", "done", "total"} (LLM extraction, reports).
    progress: Optional[dict[str, Any]] = None
    stats: Optional[dict[str, Any]] = None  # the insert's or delete's own stats
    error: Optional[dict[str, Any]] = None  # {"error": class name, "message"}
    # When the server stopped while this job ran (it was run again after the restart).
    interrupted: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_text(*values: JSONValue) -> None:
    """Refuse a request holding text that is not Unicode: it could be neither kept, nor
    indexed, nor shown."""
    check_unicode(json.dumps(values, ensure_ascii=False), "the request's JSON")


class JobQueue:
    """Jobs in submission order; ``start()`` runs them one at a time on the running loop,
    each by ``run(request)``; with a ``state_dir``, kept there across restarts."""

    def __init__(self, run: Runner, on_committed: Optional[Callable[[], Awaitable[None]]] = None,
                 state_dir: Optional[str] = None, watch: Optional[Watcher] = None) -> None:
        self._watch = watch
        self._running: Optional[tuple[str, asyncio.Task]] = None  # the job running now, and its work
        self._cancelling: set[str] = set()
        self._jobs: "OrderedDict[str, Job]" = OrderedDict()
        self._requests: dict[str, dict[str, Any]] = {}
        self._finished: dict[str, asyncio.Event] = {}
        self._queue: "asyncio.Queue[str]" = asyncio.Queue()
        self._worker: Optional[asyncio.Task] = None
        self._run_request = run
        self._on_committed = on_committed
        self._state_dir = state_dir
        if state_dir is not None:
            self._load(state_dir)

    def submit(self, kind: str, description: str, request: dict[str, Any]) -> Job:
        _check_text(description, request)
        job = Job(id=uuid.uuid4().hex[:16], kind=kind, description=capped(description))
        if self._state_dir is not None:  # before the job is listed: a listed job can always be resumed
            write_json(self._request_path(job.id), request)
        self._enqueue(job, request)
        self._forget_old()
        self._save()
        return job

    def request_of(self, job_id: str) -> Optional[dict[str, Any]]:
        """What a queued job was asked to do (None once it started)."""
        return self._requests.get(job_id)

    async def cancel(self, job_id: str) -> Optional[Job]:
        """Cancel a queued or running job and return it once it has ended (None: no such job).
        A finished job is returned unchanged."""
        job = self._jobs.get(job_id)
        if job is None or job.finished is not None:
            return job
        if job.status == "queued":  # the worker skips it
            request = self._requests.pop(job_id)
            job.status, job.finished = "cancelled", time.time()
            self._finished.pop(job_id).set()
            self._ended(job, request)
            return job
        if self._running is not None and self._running[0] == job_id:
            self._cancelling.add(job_id)
            self._running[1].cancel()
        await self.wait_for(job_id)
        return job

    @property
    def running_id(self) -> Optional[str]:
        """The job running now (None between jobs)."""
        return None if self._running is None else self._running[0]

    def get(self, job_id: str) -> Optional[Job]:
        return self._jobs.get(job_id)

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._run_forever(), name="graphrag-jobs")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    async def wait_for(self, job_id: str) -> None:
        """Until job ``job_id`` has finished (at once for one no longer kept)."""
        finished = self._finished.get(job_id)
        if finished is not None:
            await finished.wait()

    def _enqueue(self, job: Job, request: dict[str, Any]) -> None:
        self._jobs[job.id] = job
        self._requests[job.id] = request
        self._finished[job.id] = asyncio.Event()
        self._queue.put_nowait(job.id)

    async def _run_forever(self) -> None:
        while True:
            job_id = await self._queue.get()
            try:
                if job_id in self._requests:  # not cancelled while it waited
                    await self._run(self._jobs[job_id], self._requests.pop(job_id))
            except Exception:  # a bug in one job's bookkeeping must not stop every later job
                logger.exception("job %s: recording its outcome failed", job_id)
            finally:
                self._queue.task_done()

    async def _run(self, job: Job, request: dict[str, Any]) -> None:
        """Run one job; it is "done" only once readers see what it committed."""
        job.status, job.started = "running", time.time()
        self._save()
        if self._watch is not None:
            self._watch(job, request)

        def progressed(stage: str, done: int, total: int) -> None:
            job.progress = {"stage": stage, "done": done, "total": total}
            if self._watch is not None:
                self._watch(job, request)

        token = progress_listener.set(progressed)
        work = asyncio.create_task(self._run_request(request), name=f"graphrag-job-{job.id}")
        self._running = (job.id, work)
        try:
            try:
                stats = await work
            except asyncio.CancelledError:
                if job.id not in self._cancelling or not work.cancelled():
                    raise  # the server is stopping
                job.status = "cancelled"
            else:
                if self._on_committed is not None:
                    await self._on_committed()
                job.stats, job.status = stats, "done"
        except asyncio.CancelledError:
            # The server is stopping: the saved state still says "running", so the next
            # server reports the job interrupted and runs it again.
            job.status, job.error = "failed", {"error": "Cancelled", "message": "the server stopped"}
            self._finished.pop(job.id).set()
            raise
        except Exception as exc:  # the job fails, the worker goes on with the next one
            logger.warning("job %s (%s) failed: %s", job.id, job.kind, exc, exc_info=True)
            job.status, job.error = "failed", error_body(exc)
        finally:
            progress_listener.reset(token)
            self._running = None
            self._cancelling.discard(job.id)
        job.finished = time.time()
        self._finished.pop(job.id).set()
        self._ended(job, request)

    def _ended(self, job: Job, request: dict[str, Any]) -> None:
        self._save()
        if self._watch is not None:
            self._watch(job, request)
        if self._state_dir is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._request_path(job.id))

    def _forget_old(self) -> None:
        finished = [j.id for j in self._jobs.values() if j.finished is not None]
        for job_id in finished[:max(0, len(self._jobs) - KEPT_JOBS)]:
            del self._jobs[job_id]

    # ------------------------------------------------------------------ kept across restarts

    def _request_path(self, job_id: str) -> str:
        assert self._state_dir is not None
        return os.path.join(self._state_dir, f"{job_id}.json")

    def _save(self) -> None:
        if self._state_dir is not None:
            write_json(os.path.join(self._state_dir, JOBS_FILE), [j.to_dict() for j in self._jobs.values()])

    def _load(self, state_dir: str) -> None:
        """The jobs a previous server kept: finished ones listed, the one it was running
        (``interrupted``) and the queued ones queued again, in their order."""
        os.makedirs(state_dir, exist_ok=True)
        try:
            with open(os.path.join(state_dir, JOBS_FILE), encoding="utf-8") as f:
                kept = json.load(f)
        except FileNotFoundError:
            return
        known = {f.name for f in fields(Job)}
        for record in kept:
            job = Job(**{k: v for k, v in record.items() if k in known})
            if job.status in ("done", "failed", "cancelled"):
                self._jobs[job.id] = job
                continue
            try:
                with open(self._request_path(job.id), encoding="utf-8") as f:
                    request = json.load(f)
            except (FileNotFoundError, json.JSONDecodeError):
                job.status, job.finished = "failed", time.time()
                job.error = {"error": "Interrupted", "message": "the server stopped before this job was recorded"}
                self._jobs[job.id] = job
                continue
            if job.status == "running":
                job.interrupted, job.status, job.started, job.progress = time.time(), "queued", None, None
                logger.warning("job %s (%s) was interrupted when the server stopped: running it again",
                               job.id, job.description)
            self._enqueue(job, request)
        self._save()
