"""Files read in a separate process, so a file that would take too long or too much memory is
stopped at its limit instead of holding the caller (a server's event loop, an index run).

A reader's own checks (``ReadLimits``) run between pages and blocks; one page can take
minutes by itself (a page of a million text operators), which only another process can cut
short. The process (``serve`` in a new interpreter: it never runs the caller's main module,
as multiprocessing's spawn would) is started on the first read and reused; it reads
one file at a time, under an address-space limit of ``max_memory_bytes``, answering each
request on its stdout. When a file overruns ``max_seconds`` the process is killed and the
next read starts another.
"""
from __future__ import annotations

import importlib
import logging
import pickle
import select
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any, Optional

from graphrag.errors import UnreadableFileError

from .base import ReadDocument, ReadOptions

if TYPE_CHECKING:
    from types import ModuleType

logger = logging.getLogger(__name__)

# Time for the worker to start and to pass the file and its text back, beside the reading.
GRACE_SECONDS = 1.0


def _read(module: str, name: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
    """In the worker: the reader ``module`` on ``data``, under the memory limit."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = options.max_memory_bytes if hard == resource.RLIM_INFINITY else min(options.max_memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        return importlib.import_module(module).read(name, data, options)
    except MemoryError:
        raise UnreadableFileError(f"reading needed over the limit of {options.max_memory_bytes / 2**20:.0f} MiB "
                                  "of memory") from None
    except RecursionError:  # JSON arrays or markup nested a million deep: refused like any other bomb
        raise UnreadableFileError("it is nested deeper than the reader can follow") from None
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def serve() -> None:
    """The worker's loop: a pickled request in, a pickled ("ok", documents) or ("error",
    exception) out, until its stdin closes."""
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the answers
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("ok", _read(*request))
        except Exception as exc:
            answer = ("error", exc)
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


class ReadingWorker:
    """The process files are read in; ``read`` is safe to call from several threads (the
    reads take turns)."""

    def __init__(self) -> None:
        self._process: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()

    def read(self, reader: ModuleType, name: str, data: bytes, options: ReadOptions) -> list[ReadDocument]:
        """``reader.read(name, data, options)`` in the worker; ``UnreadableFileError`` past the
        time or memory limit."""
        with self._lock:
            process = self._started()
            try:
                pickle.dump((reader.__name__, name, data, options), process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                process.stdin.flush()
                ready, _, _ = select.select([process.stdout], [], [], options.max_seconds + GRACE_SECONDS)
                if not ready:
                    logger.warning("stopped reading %s after %.0f s", name, options.max_seconds + GRACE_SECONDS)
                    raise UnreadableFileError(f"reading took over the limit of {options.max_seconds:g} s")
                status, value = pickle.load(process.stdout)
            except (OSError, EOFError, pickle.UnpicklingError) as exc:  # the worker died (killed, out of memory)
                self.close()
                raise UnreadableFileError(f"the reading process failed ({type(exc).__name__})") from None
            except UnreadableFileError:
                self.close()
                raise
        if status == "error":
            raise value
        return value

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen([sys.executable, "-c", f"from {__name__} import serve; serve()"],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._process

    def close(self) -> None:
        """End the worker (a later read starts another)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None


WORKER = ReadingWorker()
