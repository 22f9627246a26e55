"""Resolution's name lookups in a second process, so a large write's blocking runs on another
core while the event loop sends and reads the model calls.

The process (``serve`` in a new interpreter, given the caller's import path: it never runs
the caller's main module, as multiprocessing's spawn would) holds a :class:`LookupsAhead`: it
is started with the names the pass starts from (or the caller's blocking index of them), then
given the write's names batch by batch, and answers each new name's candidates. It runs the
engine's blocking only (names in, pairs out): nothing of the user's is sent to it. It ends when its stdin closes; the caller kills it
if it does not.
"""
from __future__ import annotations

import asyncio
import logging
import os
import pickle
import struct
import sys
from typing import Any, Optional, Union

from .candidates import LookupsAhead, NameIndex

logger = logging.getLogger(__name__)

_LENGTH = struct.Struct("<Q")
# Seconds a closed worker has to exit before it is killed.
EXIT_SECONDS = 5.0
# The worker's CPU priority below the caller's (and a model server's on the same machine):
# it runs mostly on the cycles they leave (on a busy machine, little: the pass looks up
# whatever it has not answered).
NICENESS = 5
# The worker imports with the caller's import path (its arguments), in place of its own: a
# caller may find this package only through a ``sys.path`` it changed at run time (a script
# inserting where it lies), and ``-c`` would put the working directory first, where a
# checkout's sources may shadow the package.
_SERVE = f"import sys; sys.path[:] = sys.argv[1:]; from {__name__} import serve; serve()"


def _frame(value: object) -> bytes:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def serve() -> None:
    """The worker's loop: ``("start", names or their index, loose, niceness)`` or ``("look_up",
    names)`` in, the looked-up names' candidates out, until its stdin closes."""
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the answers
    lookups: Optional[LookupsAhead] = None
    while True:
        head = requests.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            return
        request = pickle.loads(requests.read(_LENGTH.unpack(head)[0]))
        if request[0] == "start":
            if request[3] and hasattr(os, "nice"):
                os.nice(request[3])
            given = request[1]
            lookups = LookupsAhead(given if isinstance(given, NameIndex) else NameIndex(given, loose=request[2]))
            answer: Optional[dict[str, dict[str, str]]] = None
        else:
            assert lookups is not None, "look_up before start"
            new = lookups.add(request[1])
            lookups.look_up(new)
            answer = {name: lookups.found[name] for name in new}
        answers.write(_frame(answer))
        answers.flush()


class LookupProcess:
    """The caller's side: ``await LookupProcess.start(names, loose)``, then ``look_up`` batch
    by batch (one at a time), then ``aclose``. ``names`` may be the caller's blocking index over
    them: the process starts from a copy of it instead of indexing every name again."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._asking = False  # a request is out (its answer may fill the pipe unread)

    @classmethod
    async def start(cls, names: Union[list[str], NameIndex], loose: bool) -> "LookupProcess":
        request = _frame(("start", names, loose, NICENESS))  # a copy of the index as it is now
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _SERVE, *(path for path in sys.path if isinstance(path, str)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        worker = cls(process)
        try:
            await worker._exchange(request)
        except BaseException:
            await worker.aclose()
            raise
        return worker

    # Any: an answer unpickled from the worker, whose shape is the request's (see ``serve``).
    async def _ask(self, request: tuple[object, ...]) -> Any:
        return await self._exchange(_frame(request))

    async def _exchange(self, request: bytes) -> Any:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        self._asking = True
        stdin.write(request)
        await stdin.drain()
        head = await stdout.readexactly(_LENGTH.size)
        answer = pickle.loads(await stdout.readexactly(_LENGTH.unpack(head)[0]))
        self._asking = False
        return answer

    async def look_up(self, names: list[str]) -> dict[str, dict[str, str]]:
        """Index ``names`` (those not given before) and answer their candidates."""
        return await self._ask(("look_up", names))  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """End the worker: its stdin closed, killed if it has not exited in ``EXIT_SECONDS``
        (or if this is cancelled meanwhile), at once if a request was left unanswered."""
        process = self._process
        try:
            if process.returncode is None and self._asking:
                process.kill()
            elif process.returncode is None and process.stdin is not None:
                process.stdin.close()
            await asyncio.wait_for(process.wait(), EXIT_SECONDS)
        except asyncio.TimeoutError:
            logger.warning("the name lookup process did not exit; killed")
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

    @property
    def returncode(self) -> Optional[int]:
        return self._process.returncode
