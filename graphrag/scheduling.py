"""What runs beside what during a write: one scope that starts overlapping work and, on any
error, cancels all of it; and a timer of the pipeline's stages."""
from __future__ import annotations

import asyncio
import contextlib
import time
from types import TracebackType
from typing import Any, Coroutine, Iterator, Optional, TypeVar, Union

T = TypeVar("T")
Dependency = Union[asyncio.Event, "asyncio.Future[Any]"]


class BackgroundWork:
    """``async with BackgroundWork(timer) as background: background.start(coro, after=[...])``.

    Leaving the block awaits every started task. If the block or any task fails, the other
    tasks are cancelled (a failing task also interrupts the block, so no further LLM call is
    paid for) and the first error is raised once everything has stopped. A task started with
    ``finish_on_error=True`` is awaited instead of cancelled: it writes files in a thread,
    which a cancellation would not stop, and the failed commit's clean-up must find them.
    """

    def __init__(self, timer: Optional["StageTimer"] = None) -> None:
        self._timer = timer or StageTimer()
        self._tasks: list[asyncio.Task] = []
        self._must_finish: set[asyncio.Task] = set()
        self._owner: Optional[asyncio.Task] = None
        self._failure: Optional[BaseException] = None
        self._interrupted_owner = False
        self._closing = False

    async def __aenter__(self) -> "BackgroundWork":
        self._owner = asyncio.current_task()
        return self

    def start(self, work: Coroutine[Any, Any, T], *, after: tuple[Dependency, ...] = (),
              stage: Optional[str] = None, finish_on_error: bool = False) -> "asyncio.Task[T]":
        """Run ``work`` once each of ``after`` (events set, tasks done) allows; its time from
        then on counts towards ``stage``."""
        task = asyncio.ensure_future(self._run(work, after, stage))
        self._tasks.append(task)
        if finish_on_error:
            self._must_finish.add(task)
        # Cancelled before it started: closed, so no "coroutine was never awaited" warning.
        task.add_done_callback(lambda done: done.cancelled() and work.close())
        task.add_done_callback(self._on_done)
        return task

    async def _run(self, work: Coroutine[Any, Any, T], after: tuple[Dependency, ...], stage: Optional[str]) -> T:
        for dependency in after:
            await (dependency.wait() if isinstance(dependency, asyncio.Event) else dependency)
        if stage is None:
            return await work
        with self._timer.stage(stage):
            return await work

    def _on_done(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None or self._failure is not None:
            return
        self._failure = task.exception()
        self._cancel_all()
        if not self._closing and self._owner is not None and not self._owner.done():
            self._interrupted_owner = True
            self._owner.cancel()

    def _cancel_all(self) -> None:
        for task in self._tasks:
            if task not in self._must_finish:
                task.cancel()

    async def _wait_all(self) -> None:
        pending = [task for task in self._tasks if not task.done()]
        if pending:
            await asyncio.wait(pending)  # unlike gather, being cancelled does not cancel them

    async def __aexit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> bool:
        self._closing = True
        if exc is not None:
            self._cancel_all()
        try:
            await self._wait_all()
        except asyncio.CancelledError:  # the caller gave up on the write: stop everything
            self._cancel_all()
            await self._wait_all()
            raise
        if self._failure is not None and (exc is None or self._interrupted_owner):
            if self._interrupted_owner and self._owner is not None and hasattr(self._owner, "uncancel"):
                self._owner.uncancel()
            raise self._failure
        return False


class StageTimer:
    """Wall seconds per pipeline stage; a stage timed more than once (or by tasks running
    side by side) adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def rounded(self) -> dict[str, float]:
        return {name: round(value, 3) for name, value in self.seconds.items()}
