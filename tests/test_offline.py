"""The example text indexed and queried with no LLM, no model and no network at all."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.querying import NO_LLM_NOTE

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "data" / "saltmarsh_lantern_works.md"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def rag(tmp_path_factory: pytest.TempPathFactory) -> GraphRAG:
    rag = GraphRAG(working_dir=str(tmp_path_factory.mktemp("offline")), extraction="nlp",
                   embedding_func=hash_embedding(64), chunk_token_size=300, chunk_overlap_token_size=30,
                   query_better_than_threshold=0.0)
    stats = rag.insert(EXAMPLE.read_text(encoding="utf-8"), sources=[str(EXAMPLE)])
    assert stats["documents_inserted"] == 1 and stats["communities"] > 0
    assert stats["llm"] == {} or all(s["calls"] == 0 for s in stats["llm"].values())
    return rag


def test_graph_has_the_story_entities(rag: GraphRAG) -> None:
    graph = rag.stores.graph.graph
    names = set(graph.nodes)
    for name in ("ADA PENNICK", "QUILLHAVEN", "SALTMARSH LANTERN WORKS", "TOBIAS WREN", "SILAS GORRAN"):
        assert name in names, sorted(names)
    assert graph.has_edge("ADA PENNICK", "TOBIAS WREN") or graph.has_edge("TOBIAS WREN", "ADA PENNICK")
    assert rag.list_documents()[0]["source"] == str(EXAMPLE)


@pytest.mark.parametrize("mode,question,expected", [
    ("local", "Who was Tobias Wren?", "TOBIAS WREN"),
    ("global", "What happened to the Gorran Oil Company?", "GORRAN"),
    ("naive", "What did Hester Tate do after the Great Dunmere Flood?", "Hester Tate"),
])
def test_every_mode_answers_with_note_and_context(rag: GraphRAG, mode: str, question: str, expected: str) -> None:
    answer = rag.query(question, QueryParam(mode=mode))
    assert answer.startswith(NO_LLM_NOTE)
    body = answer[len(NO_LLM_NOTE):]
    assert expected.lower() in body.lower(), body[:2000]
    assert "Sorry" not in body[:200]


def test_context_only_has_no_note(rag: GraphRAG) -> None:
    context = rag.query("Who was Ada Pennick?", QueryParam(mode="local", only_need_context=True))
    assert not context.startswith(NO_LLM_NOTE)
    assert "ADA PENNICK" in context
