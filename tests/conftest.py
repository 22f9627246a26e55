"""Shared fixtures: a local mock OpenAI server, and an environment that never reaches real services."""
from __future__ import annotations

from typing import Iterator

import pytest

import database_servers
from mock_llm_server import MockLLMServer


@pytest.fixture(autouse=True)
def _no_real_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests must never talk to a real endpoint, whatever the developer's shell exports."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def llm_server() -> Iterator[MockLLMServer]:
    with MockLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def server() -> Iterator[MockLLMServer]:
    """A plain mock LLM server shared by a module's tests; a module that needs another
    responder defines its own ``server``."""
    with MockLLMServer() as srv:
        yield srv


@pytest.fixture
def openai_env(llm_server: MockLLMServer, monkeypatch: pytest.MonkeyPatch) -> MockLLMServer:
    """Point the openai client (via its env vars) at the mock server."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return llm_server


@pytest.fixture
def config(tmp_path):
    """A typed engine config rooted in the test's temporary folder."""
    from graphrag.config import GraphRAGConfig

    return GraphRAGConfig(working_dir=str(tmp_path))



@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    """A real PostgreSQL with pgvector for the whole session (about a second to start)."""
    yield from database_servers.postgres_server()


@pytest.fixture
def postgres_options(postgres_uri: str) -> dict[str, str]:
    """``storage_options`` for a workspace of this test's own."""
    return {"dsn": postgres_uri, "workspace": database_servers.next_workspace()}


@pytest.fixture
def falkordb_uri() -> Iterator[str]:
    """A real FalkorDB of this test's own (0.2 s to start and stop), reached over Bolt by the
    ``neo4j`` driver. Its Bolt listener (4.16) can stop answering for good (once a connection to
    it closes, for one), so one test's server must not become the next test's failure."""
    yield from database_servers.falkordb_server()


# A test whose FalkorDB stopped answering runs once more on a new server: a listener gone dead
# is that server's fault, while the engine's error for it ("cannot reach") is tested on purpose
# elsewhere. Anything else a test raises fails it at once.
SERVER_GONE = ["cannot reach the graph database", "ServiceUnavailable", "SessionExpired"]
# A crash test whose kill, on a loaded machine, landed before the moment it is about (its own
# precondition, checked before anything is asserted of the engine) runs again.
KILL_MISSED = ["the kill should land", "no kill landed"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "falkordb_uri" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=SERVER_GONE))
        elif item.module is not None and item.module.__name__ in ("test_reliability", "test_postgres_processes"):
            item.add_marker(pytest.mark.flaky(reruns=2, only_rerun=KILL_MISSED))


@pytest.fixture
def neo4j_options(falkordb_uri: str) -> dict[str, str]:
    """``storage_options`` for the Bolt graph store in a workspace of this test's own."""
    return {"neo4j_uri": falkordb_uri, "workspace": database_servers.next_workspace()}


@pytest.fixture
def milvus_options(tmp_path) -> dict[str, str]:
    """``storage_options`` for the Milvus store: Milvus Lite on a file of this test's own."""
    return {"milvus_uri": str(tmp_path / "milvus.db"), "workspace": database_servers.next_workspace()}
