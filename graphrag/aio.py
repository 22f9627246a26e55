"""asyncio helpers: the sync API's event loop, and objects kept per running loop.

Every sync call (``insert``, ``query`` ...) runs on its thread's one event loop
(``run_sync``), which lives across calls as nano-graphrag's does, so a user's function that
holds a loop-bound client (one module-level ``AsyncOpenAI``) keeps working. Asyncio
primitives and HTTP pools belong to the loop that made them, and the async API may be
driven from any loop: ``PerLoop`` keeps one object per running loop.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import heapq
import itertools
import threading
import weakref
from contextlib import asynccontextmanager
from typing import Any, AsyncIterable, AsyncIterator, Callable, Coroutine, Generic, Iterator, Optional, Protocol, TypeVar

T = TypeVar("T")

SYNC_IN_RUNNING_LOOP = ("called a sync GraphRAG method inside a running event loop; await the async "
                        "version instead (ainsert, aquery, adelete_documents)")


class _ThreadLoop:
    """A thread's loop for sync calls, made on the thread's first sync call and held by the
    thread's ``threading.local`` value alone, which Python drops as the thread ends: the loop
    is closed then, not left unclosed for the collector (with its selector and socket pair).
    Closed only, not run to an end as ``_shut_down`` does: the thread's state is being torn
    down, and a loop run there is left referenced by it (its async generator hooks)."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        if not self.loop.is_running():
            self.loop.close()


_this_thread = threading.local()
_every_loop: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()


def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does at its end: cancel what is left, end async generators, close."""
    if loop.is_closed() or loop.is_running():
        return
    with contextlib.suppress(Exception):
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


@atexit.register
def _shut_down_every_loop() -> None:
    for loop in list(_every_loop):
        _shut_down(loop)


def thread_loop() -> asyncio.AbstractEventLoop:
    """The event loop sync calls on this thread run on, the same for every call and every
    ``GraphRAG``: a client bound to it by one call is still usable by the next."""
    owner: Optional[_ThreadLoop] = getattr(_this_thread, "owner", None)
    if owner is None or owner.loop.is_closed():
        owner = _this_thread.owner = _ThreadLoop()
        _every_loop.add(owner.loop)
    return owner.loop


def run_sync(coro: Coroutine[Any, Any, T], cleanup: Optional[Callable[[], Coroutine[Any, Any, None]]] = None) -> T:
    """Run ``coro`` to its end on the thread's loop, then ``cleanup()``; refused inside a running
    loop (a notebook's, a server's), where the a* method is to be awaited instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        async def run_then_clean_up() -> T:
            try:
                return await coro
            finally:
                if cleanup is not None:
                    await cleanup()

        loop = thread_loop()
        try:
            return loop.run_until_complete(run_then_clean_up())
        finally:
            # The callbacks the call scheduled last (a closed connection's, a finished thread's)
            # run now rather than at the next call: what they hold is freed with the caller's
            # objects (a dropped instance's database connections close when it goes).
            loop.run_until_complete(asyncio.sleep(0))
    coro.close()
    raise RuntimeError(SYNC_IN_RUNNING_LOOP)


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each call at once on the calling thread (it starts none): once the interpreter
    exits, thread pools take no new work, and a file write handed to a thread would fail.
    A ``ThreadPoolExecutor`` only because a loop's default executor must be one."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> "concurrent.futures.Future[T]":
        future: "concurrent.futures.Future[T]" = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


class _Closes(Protocol):
    """What a sync call's object ends with (``_release``): ``GraphRAG``, ``KnowledgeGraph``."""

    async def aclose(self) -> None: ...


def run_at_exit(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``run_sync`` for an ``atexit`` handler: work the loop hands to threads runs inline."""
    thread_loop().set_default_executor(_InlineExecutor(max_workers=1))
    return run_sync(work())


def _release(owner: _Closes) -> Callable[[], Coroutine[Any, Any, None]]:
    """What a sync call ends with: ``arelease()`` where the object has one (its ``aclose()``
    also does what only an explicit close should), else ``aclose()``."""
    return getattr(owner, "arelease", owner.aclose)


def _sync_twin(run: Callable[..., T], method: Callable[..., Any], how: str) -> Callable[..., T]:
    """``run`` named and documented as ``method`` without its ``a`` prefix."""
    run.__name__ = method.__name__.removeprefix("a")
    run.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.{run.__name__}".lstrip(".")
    run.__doc__ = f"``{method.__name__}``, {how}." + (f"\n\n{method.__doc__}" if method.__doc__ else "")
    return run


def blocking(method: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """The sync twin of an ``a*`` method of an object with ``aclose()``: run on the thread's
    loop (``run_sync``), then release the connections the call opened (``arelease()`` where
    the object has one: ``aclose()`` also does what only an explicit close should)."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> T:
        return run_sync(method(self, *args, **kwargs), _release(self))

    return _sync_twin(run, method, "blocking")


def blocking_stream(method: Callable[..., AsyncIterable[T]]) -> Callable[..., Iterator[T]]:
    """The sync twin of an ``a*`` method giving an async iterator: a generator that steps it on
    the thread's loop (``run_sync``), then releases the connections the call opened. Stopping
    early (``close()``, or dropping the generator) stops the query too."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Iterator[T]:
        pieces = method(self, *args, **kwargs).__aiter__()

        async def step() -> tuple[bool, Any]:
            try:
                return True, await pieces.__anext__()
            except StopAsyncIteration:
                return False, None

        async def close() -> None:
            try:
                if hasattr(pieces, "aclose"):
                    await pieces.aclose()
            finally:
                await _release(self)()

        loop = thread_loop()
        try:
            while True:
                more, piece = run_sync(step())
                if not more:
                    return
                yield piece
        finally:
            _finish_on(loop, close())

    return _sync_twin(run, method, "as a blocking generator")


def _finish_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` (a sync stream's end) on ``loop``, the one the stream's query runs on: at
    once where this thread can run it; else (the stream dropped inside a running loop, or
    collected on another thread) as a task at that loop's next turn. A closed loop (its
    thread ended) took the query with it: nothing is left to end."""
    if loop.is_closed():
        coro.close()
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if getattr(_this_thread, "owner", None) is not None and loop is _this_thread.owner.loop:
            run_sync(coro)
            return
    loop.call_soon_threadsafe(loop.create_task, coro)


class PerLoop(Generic[T]):
    """One object per running event loop, made by ``factory`` on the loop's first ``get``."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T]" = weakref.WeakKeyDictionary()

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        item = self._items.get(loop)
        if item is None:
            item = self._items[loop] = self._factory()
        return item

    def pop(self) -> Optional[T]:
        """Forget (and return) the running loop's object, e.g. to close it before the loop ends."""
        return self._items.pop(asyncio.get_running_loop(), None)


class PerLoopBuiltInThread(Generic[T]):
    """Like ``PerLoop``, for objects slow to build (an HTTP client: imports, a TLS context, openai's
    platform probe): built in a worker thread, so a warm-up overlaps other preparation and
    the event loop never stalls on a build. Callers that arrive while a build is under way
    share it; a failed build is not kept."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T]" = weakref.WeakKeyDictionary()
        self._building: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future]" = (
            weakref.WeakKeyDictionary())

    def _start(self) -> "asyncio.Future":
        loop = asyncio.get_running_loop()
        building = self._building.get(loop)
        if building is None:
            building = self._building[loop] = asyncio.ensure_future(asyncio.to_thread(self._factory))
            building.add_done_callback(lambda done: self._finish(loop, done))
        return building

    def _finish(self, loop: asyncio.AbstractEventLoop, done: "asyncio.Future") -> None:
        self._building.pop(loop, None)
        if not done.cancelled() and done.exception() is None:
            self._items.setdefault(loop, done.result())

    async def aget(self) -> T:
        item = self._items.get(asyncio.get_running_loop())
        if item is None:
            # The build's own result: the loop's entry may be popped (closed) meanwhile, or not
            # stored yet (a build just done stores it in a callback still to run).
            item = await asyncio.shield(self._start())
        return item

    def pop(self) -> Optional[T]:
        """Forget (and return) the current loop's object, e.g. to close it before the loop ends."""
        return self._items.pop(asyncio.get_running_loop(), None)

    async def apop(self) -> Optional[T]:
        """``pop``, after any build under way for this loop has ended (so it is not left behind)."""
        building = self._building.get(asyncio.get_running_loop())
        if building is not None:
            await asyncio.gather(asyncio.shield(building), return_exceptions=True)
        return self.pop()

    def warm_up(self) -> None:
        """Start building the running loop's object now, unless it exists or is being built.
        A failure here is left for the first real use to raise."""
        if asyncio.get_running_loop() not in self._items:
            self._start()


class PrioritySlots:
    """A semaphore whose waiters go lowest ``priority`` first (FIFO among equals).

    With a plain FIFO semaphore a task that becomes ready late (a parent community's
    report, once its children are done) queues behind everything already waiting,
    and the end of a run becomes a chain of half-idle rounds.
    """

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._order = itertools.count()

    @asynccontextmanager
    async def slot(self, priority: int = 0) -> AsyncIterator[None]:
        if self._free > 0 and not self._waiters:
            self._free -= 1
        else:
            granted = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiters, (priority, next(self._order), granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # handed a slot just as we were cancelled: pass it on
                granted.cancel()
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            _, _, granted = heapq.heappop(self._waiters)
            if not granted.done():
                granted.set_result(None)
                return
        self._free += 1


def per_loop_slots(slots: int) -> "PerLoop[PrioritySlots]":
    """``slots`` concurrency slots in each event loop."""
    return PerLoop(lambda: PrioritySlots(slots))

