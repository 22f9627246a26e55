"""Degraded mode: a store's server down at query time, or during a write.

A query answers from the stores still up, with a one-line note in the answer and the log
(naive mode when the graph is down; the graph reached by entity names when the vectors
are); a write refuses with StoreUnavailableError and leaves nothing half-written.
Real servers: PostgreSQL (one store pointed at a dead port, or a private server stopped), and a
FalkorDB and a Milvus Lite server stopped mid-test.
"""
from __future__ import annotations

import logging
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam, StoreUnavailableError, hash_embedding
from graphrag import cli
import database_servers
from database_servers import DEAD_DSN, MilvusLiteServer, PrivateFalkorDB, PrivatePostgres
from mock_llm_server import MockLLMServer
from test_incremental import CORPUS, DOC_E

GRAPH_DOWN = "[Degraded: the graph store is unreachable; answered in naive mode from the text chunks.]"
VECTORS_DOWN = "[Degraded: the vector store is unreachable; answered from the graph, through the entity names"


def settings(tmp_path: Any, server: MockLLMServer, **stores: Any) -> dict[str, Any]:
    return dict(working_dir=str(tmp_path / "wd"), embedding_func=hash_embedding(64), show_progress=False,
                llm_base_url=server.base_url, llm_api_key="k", lock_timeout=5, **stores)


def down(options: dict[str, Any]) -> dict[str, Any]:
    return {**options, "dsn": DEAD_DSN, "connect_timeout": 1}


def snapshot(rag: GraphRAG) -> tuple:
    docs = sorted(d["id"] for d in rag.list_documents())
    return docs, rag.query("x", QueryParam(mode="naive", only_need_context=True))


def indexed(tmp_path: Any, server: MockLLMServer, **stores: Any) -> tuple[GraphRAG, tuple]:
    """A GraphRAG on these stores with CORPUS inserted, and its snapshot."""
    rag = GraphRAG(**settings(tmp_path, server, **stores))
    rag.insert(CORPUS)
    return rag, snapshot(rag)


GRAPH_QUESTION = "Who is Ada Lovelace?"
VECTORS_QUESTION = "Where did marin okafor found Tidewater Labs?"


def degraded_notes(caplog: Any) -> list[str]:
    """The degraded-mode notes logged (by whichever module answers around a down store)."""
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("[Degraded:")]


def assert_local_answered_in_naive_mode(rag: GraphRAG, naive: str, caplog: Any) -> None:
    """The graph is down: local mode gives naive's answer after the note, logged once."""
    with caplog.at_level(logging.WARNING):
        answer = rag.query(GRAPH_QUESTION, QueryParam(mode="local"))
    assert answer == f"{GRAPH_DOWN}\n\n{naive}"
    assert [m.split(" (")[0] for m in degraded_notes(caplog)] == [GRAPH_DOWN]


def assert_entities_reached_by_name(rag: GraphRAG, caplog: Any) -> None:
    """The vectors are down: local and naive reach the graph by the entity names in the question."""
    for mode in ("local", "naive"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            answer = rag.query(VECTORS_QUESTION, QueryParam(mode=mode, only_need_context=True))
        first, _, context = answer.partition("\n\n")
        assert first.startswith(VECTORS_DOWN), answer
        entities = context.split("-----Relationships-----")[0].upper()
        assert "MARIN OKAFOR" in entities and "TIDEWATER LABS" in entities  # found by name, any case
        ours = degraded_notes(caplog)
        assert len(ours) == 1 and ours[0].startswith(VECTORS_DOWN)


def test_graph_down_local_answers_in_naive_mode_and_writes_refuse(tmp_path, server, postgres_options, caplog):
    stores = dict(graph_storage="postgres")
    rag, before = indexed(tmp_path, server, **stores, storage_options=postgres_options)
    question = GRAPH_QUESTION
    naive = rag.query(question, QueryParam(mode="naive"))
    global_answer = rag.query(question, QueryParam(mode="global"))

    cut_off = GraphRAG(**settings(tmp_path, server, **stores, storage_options=down(postgres_options)))
    assert_local_answered_in_naive_mode(cut_off, naive, caplog)
    assert DEAD_DSN not in caplog.text
    # Streamed, the note goes out first, then the answer (here cached, in one piece).
    streamed = list(cut_off.query_stream(question, QueryParam(mode="local")))
    assert streamed[0] == f"{GRAPH_DOWN}\n\n" and "".join(streamed) == f"{GRAPH_DOWN}\n\n{naive}"
    assert cut_off.query(question, QueryParam(mode="global")) == global_answer  # reports need no graph
    assert cut_off.query(question, QueryParam(mode="naive")) == naive

    with pytest.raises(StoreUnavailableError, match="graph store") as refused:
        cut_off.insert(DOC_E)
    assert refused.value.store == "graph" and DEAD_DSN not in str(refused.value)
    back = GraphRAG(**settings(tmp_path, server, **stores, storage_options=postgres_options))
    assert snapshot(back) == before  # nothing half-written: not the files, not the database
    assert back.insert(DOC_E)["documents_inserted"] == 1


def test_vectors_down_queries_reach_the_graph_by_entity_names(tmp_path, server, postgres_options, caplog):
    stores = dict(vector_storage="pgvector")
    rag, before = indexed(tmp_path, server, **stores, storage_options=postgres_options)

    cut_off = GraphRAG(**settings(tmp_path, server, **stores, storage_options=down(postgres_options)))
    assert_entities_reached_by_name(cut_off, caplog)

    with pytest.raises(StoreUnavailableError, match="vector store"):
        cut_off.insert(DOC_E)
    back = GraphRAG(**settings(tmp_path, server, **stores, storage_options=postgres_options))
    assert snapshot(back) == before


def test_postgres_stopped_mid_test_refuses_in_one_line_and_keeps_the_last_commit(tmp_path, server, capsys,
                                                                                 monkeypatch):
    pg = PrivatePostgres(str(tmp_path / "pg"))
    try:
        options = {"dsn": pg.uri, "workspace": database_servers.next_workspace(), "connect_timeout": 1}
        stores = dict(kv_storage="postgres", vector_storage="pgvector", graph_storage="postgres")
        rag = GraphRAG(**settings(tmp_path, server, **stores, storage_options=options))
        rag.insert(CORPUS[:3])
        before = snapshot(rag)

        pg.stop()
        with pytest.raises(StoreUnavailableError):  # the documents themselves are out of reach
            rag.query("Who is Ada Lovelace?", QueryParam(mode="local"))
        with pytest.raises(StoreUnavailableError):
            rag.insert(CORPUS[3:])
        # The CLI: one line and exit code 1, no traceback.
        for variable in ("GRAPHRAG_KV_STORAGE", "GRAPHRAG_VECTOR_STORAGE", "GRAPHRAG_GRAPH_STORAGE",
                         "GRAPHRAG_WORKSPACE"):
            monkeypatch.setenv(variable, "")  # undone after the test, whatever main sets
        monkeypatch.setenv("GRAPHRAG_POSTGRES_DSN", pg.uri)
        monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
        monkeypatch.setattr(cli, "_setup_logging", lambda verbose: None)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            cli.main(["query", "anything", "-w", str(tmp_path / "wd"), "--kv-storage", "postgres",
                      "--vector-storage", "pgvector", "--graph-storage", "postgres", "--workspace", options["workspace"]])
        err = capsys.readouterr().err.strip().splitlines()
        assert exited.value.code == 1 and len(err) == 1 and "cannot reach PostgreSQL" in err[0] and "Traceback" not in err[0]

        pg.start()
        assert snapshot(rag) == before  # the same GraphRAG works again once the server is back
        assert rag.insert(CORPUS[3:])["documents_inserted"] == len(CORPUS) - 3
    finally:
        pg.stop()


def test_falkordb_stopped_mid_test_local_answers_in_naive_mode_and_writes_refuse(tmp_path, server, caplog):
    falkordb = PrivateFalkorDB()
    try:
        rag, before = indexed(tmp_path, server, graph_storage="neo4j", storage_options={
            "neo4j_uri": falkordb.uri, "workspace": database_servers.next_workspace()})
        naive = rag.query(GRAPH_QUESTION, QueryParam(mode="naive"))
        assert not rag.query(GRAPH_QUESTION, QueryParam(mode="local")).startswith("[Degraded")

        falkordb.stop()
        assert_local_answered_in_naive_mode(rag, naive, caplog)
        assert falkordb.uri not in caplog.text
        with pytest.raises(StoreUnavailableError, match="graph store") as refused:
            rag.insert(DOC_E)
        assert refused.value.store == "graph"
        assert snapshot(rag) == before  # the files kept their last commit
    finally:
        falkordb.stop()


def test_milvus_stopped_mid_test_queries_reach_the_graph_by_entity_names(tmp_path, server, caplog):
    milvus = MilvusLiteServer(str(tmp_path / "milvus"))
    try:
        rag, before = indexed(tmp_path, server, vector_storage="milvus", storage_options={
            "milvus_uri": milvus.uri, "workspace": database_servers.next_workspace()})
        assert not rag.query(VECTORS_QUESTION, QueryParam(mode="local", only_need_context=True)).startswith(
            "[Degraded")

        milvus.stop()
        assert_entities_reached_by_name(rag, caplog)
        with pytest.raises(StoreUnavailableError, match="vector store") as refused:
            rag.insert(DOC_E)
        assert refused.value.store == "vector"
        assert snapshot(rag)[0] == before[0]  # the documents kept their last commit (naive needs the vectors)
    finally:
        milvus.stop()
