"""Reader processes: queries answered in worker processes over the served working dir, so
their CPU work (embedding the question, graph walks, packing the context) runs beside the
server's event loop, and on every core rather than one.

Each worker holds its own ``GraphRAG`` over the last commit and runs many requests at once on
its own event loop (a query waiting for the LLM holds no worker). Workers never write: the
server's process keeps the one writer and its job queue, so a write is made once, by one
process. Every request carries the server's *generation*, raised each time the server swaps
in a reader over a new commit (its own job's, or another process's it noticed); a worker seeing
a newer generation opens a fresh ``GraphRAG`` first, and the requests already running finish on
the old one. A read sent after a job is done therefore reads what the job committed.

Server and worker talk over a Unix socket pair, each side on its own event loop (length-prefixed
pickles): no thread wakes to hand each message over, so none contends for the interpreter lock
with the server's loop. A reply the HTTP API sends as it is comes already encoded as JSON, so
the server's loop only copies its bytes. A worker that owes replies and stops answering, even
pings, is killed and replaced (``STALL_SECONDS``): its requests fail rather than wait forever.

The workers are started with ``spawn`` (a fork would copy the server's threads' locks): the
config reaches them as a picklable zero-argument function that builds it again.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import multiprocessing
import pickle
import socket
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional

import orjson

from graphrag.config import GraphRAGConfig
from graphrag.errors import GraphRAGError
from graphrag.query_param import QueryParam
from graphrag.server.json_values import as_json

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from graphrag.graphrag import GraphRAG
    from graphrag.schema import JSONValue

logger = logging.getLogger(__name__)

ConfigFactory = Callable[[], GraphRAGConfig]

# The reads a worker answers: the ones whose CPU work is the query's own (streams and graph
# calls stay in the server's process, on its reader).
OPERATIONS = ("query", "answer", "retrieve")
START_SECONDS = 120.0  # a worker imports the engine and opens the index before it answers
# A worker with requests waiting that sends nothing for this long, not even the answer to a
# ping, and (where the system tells) uses no CPU meanwhile, is taken for stuck (stopped,
# deadlocked): it is killed, its requests fail, and another takes its place. One computing
# (reading a large index on its first query) is busy, not stuck.
STALL_SECONDS = 60.0
_PING = "ping"  # answered at once by a worker's loop, as a reply with id _PONG
_PONG = 0


class ReaderProcessError(GraphRAGError, RuntimeError):
    """A reader process ended, or sent back an error that could not be rebuilt here (its
    message names only the error's class: a bug's message may hold anything)."""


def _portable(exc: Exception) -> tuple[str, str, tuple, dict[str, Any]]:
    """An error as its class's name, its arguments and its attributes, each that pickles (the
    rest as text): the engine's errors take keyword arguments that pickling would not replay."""
    def plain(value: object) -> object:
        try:  # unpickled too: an error whose class needs keyword arguments pickles but will not load
            pickle.loads(pickle.dumps(value))
            return value
        except Exception:
            return str(value)

    return (type(exc).__module__, type(exc).__qualname__, tuple(plain(a) for a in exc.args),
            {k: plain(v) for k, v in vars(exc).items()})


def _rebuilt(portable: tuple[str, str, tuple, dict[str, Any]]) -> Exception:
    """The error ``_portable`` described, of its class (so the API answers with its status)."""
    module, name, args, state = portable
    try:
        cls = getattr(importlib.import_module(module), name)
        exc = cls.__new__(cls)
        exc.args = args
        vars(exc).update(state)
        return exc
    except Exception:
        return ReaderProcessError(f"a reader process failed ({name})")


async def read(rag: GraphRAG, operation: str, question: str, param: QueryParam) -> JSONValue:
    """One of ``OPERATIONS`` on ``rag``, as JSON values: a query's text, an answer with its
    references, or what a mode retrieves."""
    if operation == "query":
        return await rag.aquery(question, param)
    if operation == "answer":
        answer = await rag.aquery_result(question, param)
        return {"answer": answer.text, "references": as_json(answer.references)}
    return as_json(await rag.aretrieve(question, param))


def open_reader(config: GraphRAGConfig, opened: list[str]) -> GraphRAG:
    """A ``GraphRAG`` over the last commit with the stores ``opened`` already read, so the first
    reads after it is swapped in find them loaded (blocking: run it off the loop)."""
    from graphrag.graphrag import GraphRAG

    rag = GraphRAG(config)
    for name in opened:
        rag.stores.open(name)
    return rag


class Reader:
    """A ``GraphRAG`` over one commit (the server's ``generation`` of it) and the reads running
    on it: its connections close after the last read, once a newer reader replaced it."""

    def __init__(self, rag: GraphRAG, generation: int = 0) -> None:
        self.rag, self.generation = rag, generation
        self.running = 0
        self.retired = False

    async def close_if_done(self) -> None:
        if self.retired and self.running == 0:
            await self.rag.aclose()


def json_bytes(value: JSONValue) -> bytes:
    """``value`` as the JSON text an HTTP response carries (as Starlette's ``JSONResponse``
    writes it), so a reply encoded in a worker passes through the server untouched.

    A text (a query's answer or context) is encoded by orjson, which writes a string's bytes
    exactly as ``json.dumps`` does here, many times faster; other values by ``json``, since
    orjson writes some floats differently (``1e+16`` as ``1e16``)."""
    if isinstance(value, str):
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:  # a lone surrogate: json's own error, as before
            pass
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


# A message between the server and a worker: its pickle's length, then the pickle.
_LENGTH = struct.Struct("!Q")


def _frame(message: object) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(payload)) + payload


async def _next_message(incoming: asyncio.StreamReader) -> Any:
    """The next message, or None once the other side closed the connection (or sent None)."""
    try:
        size, = _LENGTH.unpack(await incoming.readexactly(_LENGTH.size))
        return pickle.loads(await incoming.readexactly(size))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


# ---------------------------------------------------------------------------- in the worker


async def _serve_requests(config: GraphRAGConfig, sock: socket.socket) -> None:
    incoming, outgoing = await asyncio.open_unix_connection(sock=sock)
    current = Reader(await asyncio.to_thread(open_reader, config, []))
    opening = asyncio.Lock()

    async def reader_for(generation: int) -> Reader:
        """The reader of ``generation`` or newer: one fresh instance per new commit."""
        nonlocal current
        if current.generation < generation:
            async with opening:
                if current.generation < generation:
                    fresh = await asyncio.to_thread(open_reader, config, current.rag.stores.opened())
                    old, current = current, Reader(fresh, generation)
                    old.retired = True
                    with contextlib.suppress(Exception):  # a close failing fails no read
                        await old.close_if_done()
        return current

    async def handle(request_id: int, generation: int, operation: str, question: str, param: QueryParam,
                     encoded: bool) -> None:
        try:
            reader = await reader_for(generation)
            reader.running += 1
            try:
                value = await read(reader.rag, operation, question, param)
                reply = (request_id, True, json_bytes(value) if encoded else value)
            finally:
                reader.running -= 1
                with contextlib.suppress(Exception):
                    await reader.close_if_done()
        except Exception as exc:  # sent back; the server raises it for this request only
            reply = (request_id, False, _portable(exc))
        try:
            frame = _frame(reply)
        except Exception as exc:  # a value that would not pickle: the request fails, not the worker
            frame = _frame((request_id, False, _portable(ReaderProcessError(
                f"an answer the reader process could not send back ({type(exc).__name__})"))))
        outgoing.write(frame)  # one whole frame per call, from the loop's thread: frames never interleave

    tasks: set[asyncio.Task] = set()
    outgoing.write(_frame((-1, True, None)))  # ready
    while (message := await _next_message(incoming)) is not None:
        if message == _PING:
            outgoing.write(_frame((_PONG, True, None)))
            continue
        task = asyncio.create_task(handle(*message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in list(tasks):
        task.cancel()
    await current.rag.aclose()


def _worker_main(make_config: ConfigFactory, sock: socket.socket) -> None:
    """A worker process's entry: answer requests until the server closes the connection."""
    try:
        config = make_config()  # outside any loop: it may call the engine's sync API
        _run(_serve_requests(config, sock))
    except KeyboardInterrupt:  # the terminal's Ctrl-C reaches the whole process group
        pass


def _run(main: Coroutine[Any, Any, None]) -> None:
    """``main`` on uvloop where it is installed (as the server's own loop runs under uvicorn):
    the loop's work on each message is then in C; else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


# ---------------------------------------------------------------------------- in the server


def _cpu_ticks(pid: Optional[int]) -> Optional[int]:
    """The user and system CPU time a process has used, in clock ticks; None where ``/proc``
    does not tell (not Linux) or the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime: the 14th and 15th fields
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class _Worker:
    process: BaseProcess
    index: int
    started: asyncio.Future  # done once the worker has opened the index
    outgoing: Optional[asyncio.StreamWriter] = None  # set once the connection is open, before ``started``
    replies: Optional[asyncio.Task] = None  # reads the worker's replies
    pending: dict[int, asyncio.Future] = field(default_factory=dict)
    alive: bool = True
    answered: int = 0
    # The loop's time of the worker's last message, or of the request that found nothing pending.
    heard: float = 0.0
    cpu: Optional[int] = None  # its CPU time at the watchdog's last round (clock ticks)
    stalled: bool = False  # killed by the watchdog


class ReaderProcesses:
    """``count`` worker processes answering ``OPERATIONS``; each request goes to the worker with
    the fewest running. A worker silent for ``stall_seconds`` with requests waiting is replaced
    (``STALL_SECONDS``)."""

    def __init__(self, make_config: ConfigFactory, count: int, stall_seconds: float = STALL_SECONDS) -> None:
        if count < 1:
            raise ValueError("reader processes: count must be at least 1")
        self._make_config = make_config
        self._count = count
        self._stall_seconds = stall_seconds
        self._workers: list[_Worker] = []
        self._next_id = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stopping = False
        self._watchdog: Optional[asyncio.Task] = None

    async def start(self) -> None:
        """Start the workers and wait until each has opened the index."""
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._workers = [self._spawn(i) for i in range(self._count)]
        await asyncio.wait_for(asyncio.gather(*(w.started for w in self._workers)), START_SECONDS)
        self._watchdog = self._loop.create_task(self._watch(), name="graphrag-readers-watchdog")
        logger.info("%d reader process(es) serving queries", self._count)

    def _spawn(self, index: int) -> _Worker:
        """Worker ``index`` started; ``started`` is done once it has opened the index."""
        assert self._loop is not None
        context = multiprocessing.get_context("spawn")
        ours, theirs = socket.socketpair()
        process = context.Process(target=_worker_main, args=(self._make_config, theirs),
                                  name=f"graphrag-reader-{index}", daemon=True)
        process.start()
        theirs.close()
        worker = _Worker(process, index, self._loop.create_future())
        worker.pending[-1] = worker.started
        worker.replies = self._loop.create_task(self._receive(worker, ours), name=f"graphrag-reader-{index}-replies")
        return worker

    def pids(self) -> list[Optional[int]]:
        """The workers' process ids (in their start order)."""
        return [w.process.pid for w in self._workers]

    def answered(self) -> list[int]:
        """How many requests each worker has answered (in their start order)."""
        return [w.answered for w in self._workers]

    async def call(self, generation: int, operation: str, question: str, param: QueryParam,
                   encoded: bool = False) -> Any:
        """``operation`` answered by a worker over ``generation`` or a newer commit; ``encoded``:
        as its JSON text (UTF-8 bytes), encoded in the worker."""
        assert self._loop is not None and operation in OPERATIONS
        live = [w for w in self._workers if w.alive and w.started.done()]
        if not live:  # each is a replacement still opening the index, or gone for good
            starting = [w.started for w in self._workers if w.alive]
            if not starting:
                raise ReaderProcessError("no reader process is running")
            await asyncio.wait_for(asyncio.wait(starting, return_when=asyncio.FIRST_COMPLETED), START_SECONDS)
            return await self.call(generation, operation, question, param, encoded)
        worker = min(live, key=lambda w: len(w.pending))
        assert worker.outgoing is not None  # open before the worker said it started
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future = self._loop.create_future()
        if not worker.pending:  # the worker owed nothing: its silence counts from now
            worker.heard = self._loop.time()
        worker.pending[request_id] = future
        try:
            worker.outgoing.write(_frame((request_id, generation, operation, question, param, encoded)))
        except (OSError, RuntimeError) as exc:
            worker.pending.pop(request_id, None)
            raise ReaderProcessError(f"reader process {worker.process.name} is gone") from exc
        return await future

    async def stop(self) -> None:
        self._stopping = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        for worker in self._workers:
            if worker.outgoing is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    worker.outgoing.write(_frame(None))  # the worker closes its stores and exits
        for worker in self._workers:
            await asyncio.to_thread(worker.process.join, 10)
            if worker.process.is_alive():
                worker.process.terminate()
            if worker.replies is not None:
                worker.replies.cancel()
                with contextlib.suppress(BaseException):
                    await worker.replies
        self._workers.clear()

    async def _receive(self, worker: _Worker, sock: socket.socket) -> None:
        """A worker's replies, each to its request's future, until its connection closes."""
        try:
            incoming, worker.outgoing = await asyncio.open_unix_connection(sock=sock)
            while (message := await _next_message(incoming)) is not None:
                worker.heard = self._loop.time()  # type: ignore[union-attr]
                self._settle(worker, *message)
        finally:
            if worker.outgoing is not None:
                worker.outgoing.close()
            else:
                sock.close()
            self._lost(worker)

    async def _watch(self) -> None:
        """Ping each worker that owes replies and has been silent a while; kill one silent, and
        using no CPU, for ``stall_seconds`` (its connection then closes, and ``_lost`` fails its
        requests and starts another)."""
        assert self._loop is not None
        interval = self._stall_seconds / 4
        now = self._loop.time()
        while True:
            await asyncio.sleep(interval)
            before, now = now, self._loop.time()
            # This loop held up meanwhile: the replies may be waiting unread here. No verdict
            # this time; the next one comes after they are read.
            held = now - before > 2 * interval
            for worker in self._workers:
                if not (worker.alive and worker.started.done() and worker.pending) or worker.stalled:
                    continue
                cpu = _cpu_ticks(worker.process.pid)
                if cpu is not None and cpu != worker.cpu:  # computing: alive, if not answering
                    worker.heard = now
                worker.cpu = cpu
                silent = now - worker.heard
                if silent >= self._stall_seconds and not held:
                    logger.error("reader process %s answered nothing for %.0f s with %d request(s) waiting; "
                                 "killing it", worker.process.name, silent, len(worker.pending))
                    worker.stalled = True
                    worker.process.kill()  # a stopped process too
                elif silent >= interval:
                    assert worker.outgoing is not None
                    with contextlib.suppress(OSError, RuntimeError):  # a closed one: _lost follows
                        worker.outgoing.write(_frame(_PING))

    @staticmethod
    def _settle(worker: _Worker, request_id: int, ok: bool, value: Any) -> None:
        future = worker.pending.pop(request_id, None)
        if future is None or future.done():
            return
        worker.answered += 1
        if ok:
            future.set_result(value)
        else:
            future.set_exception(_rebuilt(value))

    def _lost(self, worker: _Worker) -> None:
        """A worker's connection closed: its requests fail, and a worker that had opened the
        index is replaced (one that never did would fail again: its error is the server's start's)."""
        if not worker.alive:
            return
        worker.alive = False
        opened = worker.started.done() and not worker.started.cancelled() and worker.started.exception() is None
        replace = opened and not self._stopping
        running = len(worker.pending) - (not worker.started.done())
        if running or replace:
            logger.error("reader process %s ended with %d request(s) running%s", worker.process.name, running,
                         "; starting another" if replace else "")
        why = f"answered nothing for {self._stall_seconds:g} s" if worker.stalled else "ended"
        for future in worker.pending.values():
            if not future.done():
                future.set_exception(ReaderProcessError(f"reader process {worker.process.name} {why}"))
        worker.pending.clear()
        if replace:
            worker.process.join(0)  # reaped: no zombie left behind
            self._workers[worker.index] = self._spawn(worker.index)
