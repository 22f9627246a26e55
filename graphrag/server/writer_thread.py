"""The writer's own thread and event loop.

A write's CPU stretches (chunking, merging, resolving names, clustering, packing reports) run
between its awaits; on the server's loop each stretch would hold up every request until it
ended. On a thread of its own the loop only waits for the interpreter lock, which Python
hands over every few milliseconds (``sys.getswitchinterval()``), so ``/livez``, the job
status and the queries forwarded to reader processes keep being answered during an insert.

The thread also runs at a lower CPU priority (``WRITER_NICE``, on Linux where a thread has a
nice value of its own; the threads and processes it starts inherit it): on a machine whose
cores the reader processes keep busy, queries go first and the write takes what they leave.

The writer's ``GraphRAG`` is used only on this thread's loop (the engine keeps its clients per
loop). What the job queue needs stays on the server's loop: a job's progress reaches its
listener there, and cancelling the job cancels the write here and waits until it has ended
(its write scope dropped the half-applied state), as a cancelled task on the server's loop did.
"""
from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import weakref
from typing import Any, Coroutine, Optional, TypeVar

from graphrag.progress import progress_listener

T = TypeVar("T")

# How much lower the writer's CPU priority is than the server's (nice, 0..19 higher).
WRITER_NICE = 5


class WriterThread:
    """Coroutines run one after another on a thread's own event loop (started on first use)."""

    def __init__(self, name: str = "graphrag-writer") -> None:
        self._name = name
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._dropped: Optional[weakref.finalize] = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def _started(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._run_forever, args=(self._loop,), name=self._name,
                                            daemon=True)
            self._thread.start()
            # Dropped without ``stop()``, the writer still ends its thread (and so its loop).
            self._dropped = weakref.finalize(self, self._stop_soon, self._loop)
        return self._loop

    @staticmethod
    def _stop_soon(loop: asyncio.AbstractEventLoop) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)

    @staticmethod
    def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
        try:  # this thread only (Linux); elsewhere the writer keeps the server's priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                           os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) + WRITER_NICE)
        except (AttributeError, OSError):
            pass
        try:
            loop.run_forever()
        finally:
            # Closed by the thread that ran it, once stopped: a ``stop()`` cancelled while it
            # waited for the thread, or a writer dropped unstopped, leaves no loop open.
            loop.close()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s outcome, run on the writer's loop with the caller's context; the progress
        listener set there is called on the caller's loop. Cancelled, it cancels ``coro`` and
        returns once ``coro`` has ended: cancelled, or finished all the same (its result then)."""
        loop, caller = self._started(), asyncio.get_running_loop()
        context = contextvars.copy_context()
        listener = progress_listener.get()
        if listener is not None:
            context.run(progress_listener.set, lambda *args: caller.call_soon_threadsafe(listener, *args))
        ended: asyncio.Future = caller.create_future()
        started: list[asyncio.Task] = []

        def settle(task: asyncio.Task) -> None:  # on the caller's loop
            if ended.done():
                return
            if task.cancelled():
                ended.cancel()
            elif task.exception() is not None:
                ended.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                ended.set_result(task.result())

        def begin() -> None:  # on the writer's loop
            task = loop.create_task(coro, context=context)
            started.append(task)
            task.add_done_callback(lambda done: caller.call_soon_threadsafe(settle, done))

        loop.call_soon_threadsafe(begin)
        try:
            return await asyncio.shield(ended)
        except asyncio.CancelledError:
            if ended.done():
                raise
            # ``begin`` was queued before this, so the task exists when it runs.
            loop.call_soon_threadsafe(lambda: started[0].cancel())
            while not ended.done():
                try:
                    await asyncio.shield(ended)
                except asyncio.CancelledError:
                    if ended.cancelled():
                        raise
            return ended.result()

    async def stop(self) -> None:
        """End the thread, once nothing runs on it (a coroutine still running there is dropped)."""
        if self._loop is None or self._thread is None:
            return
        loop, thread, dropped = self._loop, self._thread, self._dropped
        self._loop = self._thread = self._dropped = None
        if dropped is not None:
            dropped.detach()
        self._stop_soon(loop)
        await asyncio.to_thread(thread.join)
