"""Writes as jobs: queued, run one at a time in the background, their progress and outcome kept.

A request that changes the index (insert, delete) returns at once with a job id; the one
worker runs the jobs in order, so two writes never contend for the working dir's lock.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Optional

from graphrag.progress import progress_listener
from graphrag.server.errors import error_body

logger = logging.getLogger(__name__)

# Finished jobs kept for GET /jobs; the oldest finished ones go first.
KEPT_JOBS = 1000


@dataclass
class Job:
    id: str
    kind: str  # "insert" | "delete"
    description: str
    status: str = "queued"  # -> "running" -> "done" | "failed"
    created: float = field(default_factory=time.time)
    started: Optional[float] = None
    finished: Optional[float] = None
    # The stage reporting progress now: {"stage", "done", "total"} (LLM extraction, reports).
    progress: Optional[dict[str, Any]] = None
    stats: Optional[dict[str, Any]] = None  # the insert's or delete's own stats
    error: Optional[dict[str, Any]] = None  # {"error": class name, "message"}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class JobQueue:
    """Jobs in submission order; ``start()`` runs them one at a time on the running loop."""

    def __init__(self, on_committed: Optional[Callable[[], Awaitable[None]]] = None) -> None:
        self._jobs: "OrderedDict[str, Job]" = OrderedDict()
        self._work: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {}
        self._finished: dict[str, asyncio.Event] = {}
        self._queue: "asyncio.Queue[str]" = asyncio.Queue()
        self._worker: Optional[asyncio.Task] = None
        self._on_committed = on_committed

    def submit(self, kind: str, description: str, work: Callable[[], Awaitable[dict[str, Any]]]) -> Job:
        job = Job(id=uuid.uuid4().hex[:16], kind=kind, description=description)
        self._jobs[job.id] = job
        self._work[job.id] = work
        self._finished[job.id] = asyncio.Event()
        self._queue.put_nowait(job.id)
        self._forget_old()
        return job

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

    async def _run_forever(self) -> None:
        while True:
            job_id = await self._queue.get()
            try:
                await self._run(self._jobs[job_id], self._work.pop(job_id))
            finally:
                self._queue.task_done()

    async def _run(self, job: Job, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """Run one job; it is "done" only once readers see what it committed."""
        job.status, job.started = "running", time.time()

        def progressed(stage: str, done: int, total: int) -> None:
            job.progress = {"stage": stage, "done": done, "total": total}

        token = progress_listener.set(progressed)
        try:
            stats = await work()
            if self._on_committed is not None:
                await self._on_committed()
            job.stats, job.status = stats, "done"
        except asyncio.CancelledError:
            job.status, job.error = "failed", {"error": "Cancelled", "message": "the server stopped"}
            raise
        except Exception as exc:  # the job fails, the worker goes on with the next one
            logger.warning("job %s (%s) failed: %s", job.id, job.kind, exc, exc_info=True)
            job.status, job.error = "failed", error_body(exc)
        finally:
            progress_listener.reset(token)
            job.finished = time.time()
            self._finished.pop(job.id).set()

    def _forget_old(self) -> None:
        finished = [j.id for j in self._jobs.values() if j.finished is not None]
        for job_id in finished[:max(0, len(self._jobs) - KEPT_JOBS)]:
            del self._jobs[job_id]
