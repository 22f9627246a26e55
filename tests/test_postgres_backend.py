"""All three stores in a real PostgreSQL (with pgvector), end to end through the engine.

The store contract itself is checked by tests/test_storage_conformance.py; here: the engine
on PostgreSQL gives what it gives on files, a write commits as one transaction, writers
queue on the workspace's advisory lock, workspaces are apart, secrets stay secret.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.backends import storage_class
from graphrag.config import GraphRAGConfig
from graphrag.errors import ConfigurationError, WorkingDirLockedError
from graphrag.indexing.pipeline import Pipeline
from graphrag.storage.postgres import POOL_SIZE, database_for
import database_servers
from helpers_storage import graph_shape, run
from test_incremental import CORPUS, DOC_E

ALL_POSTGRES = {"kv_storage": "postgres", "vector_storage": "pgvector", "graph_storage": "postgres"}


@pytest.fixture
def make_rag(server, tmp_path, postgres_uri):
    """``make_rag(name, workspace=..., files=False)``: a GraphRAG on PostgreSQL (or on files),
    in a workspace of this test's own."""
    server.reset()
    prefix = database_servers.next_workspace()

    def make(name: str = "wd", workspace: str = "e2e", files: bool = False, **overrides: Any) -> GraphRAG:
        settings: dict[str, Any] = dict(
            working_dir=str(tmp_path / name), embedding_func=hash_embedding(64), show_progress=False,
            llm_base_url=server.base_url, llm_api_key="k", lock_timeout=5)
        if not files:
            settings.update(ALL_POSTGRES, storage_options={"dsn": postgres_uri, "workspace": f"{prefix}_{workspace}"})
        return GraphRAG(**{**settings, **overrides})

    return make


def test_the_engine_on_postgres_builds_what_it_builds_on_files(make_rag, server):
    files = make_rag("files", files=True)
    files.insert(CORPUS)
    server.reset()
    rag = make_rag("pg", workspace="same")
    stats = rag.insert(CORPUS)
    assert stats["documents_inserted"] == len(CORPUS) and stats["communities"] > 0
    assert run(graph_shape(rag)) == run(graph_shape(files))
    assert stats["communities"] == files.last_insert_stats["communities"]
    # Nothing of the index is in the working dir: every store is in the database.
    assert [f for f in os.listdir(rag.config.working_dir) if not f.startswith(".")] == []

    for mode in ("local", "global", "naive"):
        answer = rag.query("Who founded Tidewater Labs?", QueryParam(mode=mode))
        assert answer.strip() and "No documents are indexed" not in answer
    context = rag.query("Who founded Tidewater Labs?", QueryParam(mode="local", only_need_context=True))
    assert "MARIN OKAFOR" in context.upper()

    # A fresh process-like instance on the same workspace sees the committed index.
    again = make_rag("pg-other-dir", workspace="same")
    assert {d["id"] for d in again.list_documents()} == {d["id"] for d in rag.list_documents()}


def test_incremental_insert_reinsert_and_delete_on_postgres(make_rag, server):
    rag = make_rag()
    rag.insert(CORPUS)
    nodes_before, _ = run(graph_shape(rag))

    calls = len(server.requests)
    again = rag.insert(CORPUS)  # already indexed: no LLM call, nothing written
    assert again["documents_inserted"] == 0 and len(server.requests) == calls

    server.reset()
    added = rag.insert(DOC_E)
    assert added["documents_inserted"] == 1
    assert server.calls_by_kind["extraction"] == added["chunks_inserted"] == 1  # only the new chunk
    nodes_with_e, _ = run(graph_shape(rag))
    assert any("KESTREL" in n for n in nodes_with_e) and nodes_before < nodes_with_e

    e_id = next(d["id"] for d in rag.list_documents() if d["chars"] == len(DOC_E))
    server.reset()
    removed = rag.delete_documents(e_id)
    assert removed["documents_removed"] == 1 and not server.calls_by_kind["extraction"]
    nodes_after, _ = run(graph_shape(rag))
    assert nodes_after == nodes_before
    assert len(rag.list_documents()) == len(CORPUS)


def test_a_failed_insert_leaves_the_previous_commit_and_the_rerun_pays_nothing_twice(make_rag, server,
                                                                                     monkeypatch):
    rag = make_rag()
    rag.insert(CORPUS[:2])
    before = (run(graph_shape(rag)), len(rag.list_documents()))

    async def reports_fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the report stage died")

    monkeypatch.setattr(Pipeline, "report", reports_fail)
    server.reset()
    with pytest.raises(RuntimeError, match="report stage died"):
        rag.insert(CORPUS[2:])  # documents, chunks, graph and vectors were written before the reports
    paid = server.calls_by_kind["extraction"]
    assert paid > 0
    assert (run(graph_shape(rag)), len(rag.list_documents())) == before

    monkeypatch.undo()
    server.reset()
    stats = rag.insert(CORPUS[2:])
    assert stats["documents_inserted"] == 2 and server.calls_by_kind["extraction"] == 0  # from the cache


def test_writers_queue_on_the_workspace_lock_and_readers_do_not_wait(tmp_path, postgres_options):
    def config(name: str, workspace: str) -> GraphRAGConfig:
        return GraphRAGConfig(working_dir=str(tmp_path / name), lock_timeout=0.3, **ALL_POSTGRES,
                              storage_options={**postgres_options, "workspace": f"{postgres_options['workspace']}_{workspace}"})

    first, second, elsewhere = (config("a", "locked"), config("b", "locked"), config("c", "other"))
    kv = storage_class(first, "kv")

    async def main():
        writer = kv(namespace="docs", global_config=first)
        await writer.index_start_callback()
        await writer.upsert({"k": {"v": 1}})
        reader = kv(namespace="docs", global_config=second)
        assert await reader.get_by_id("k") is None  # not committed yet, and the read does not wait
        with pytest.raises(WorkingDirLockedError, match="workspace '.*_locked'"):
            await reader.index_start_callback()
        other = kv(namespace="docs", global_config=elsewhere)
        await other.index_start_callback()  # another workspace: its own lock
        await other.index_abort_callback()
        await writer.index_commit_callback()
        assert await reader.get_by_id("k") == {"v": 1}
        assert await other.get_by_id("k") is None  # workspaces do not see each other
        await reader.index_start_callback()  # the lock is free again
        await reader.index_abort_callback()
        for store in (writer, reader, other):
            await store.close()

    run(main())


def test_records_kept_by_a_reader_follow_another_writers_commits(tmp_path, postgres_options):
    """A store queries read by record keeps what it read only while no write changed the table."""
    def config(name: str) -> GraphRAGConfig:
        return GraphRAGConfig(working_dir=str(tmp_path / name), **ALL_POSTGRES, storage_options=postgres_options)

    kv = storage_class(config("a"), "kv")
    writer_config, reader_config = config("a"), config("b")  # two configs: two processes' views

    async def main():
        writer = kv(namespace="reports", global_config=writer_config, **kv.options_for(read_by_record=True))
        reader = kv(namespace="reports", global_config=reader_config, **kv.options_for(read_by_record=True))
        assert reader.cached
        previous = None
        for value, action in [(1, "upsert"), (2, "upsert"), (None, "delete")]:
            await writer.index_start_callback()
            if action == "upsert":
                await writer.upsert({"r": {"v": value}})
            else:
                await writer.delete(["r"])
            assert await reader.get_by_ids(["r", "none"]) == [previous, None]  # not committed yet
            assert await reader.all_keys() == (["r"] if previous else [])
            await writer.index_commit_callback()
            previous = {"v": value} if value else None
            assert await reader.get_by_ids(["r", "none"]) == [previous, None]
            assert await reader.all_keys() == (["r"] if previous else [])  # kept keys follow the commit too
            # The writer, during its own write, reads its own changes, not what it kept.
            await writer.index_start_callback()
            await writer.upsert({"r": {"v": 99}})
            assert await writer.get_by_ids(["r"]) == [{"v": 99}]
            await writer.index_abort_callback()
            assert await writer.get_by_ids(["r"]) == [previous]
        for store in (writer, reader):
            await store.close()

    run(main())


def test_names_and_values_are_validated_or_passed_as_parameters(tmp_path, postgres_options):
    hostile = "x'); DROP TABLE graphrag_kv; --"
    config = GraphRAGConfig(working_dir=str(tmp_path), storage_options=postgres_options, **ALL_POSTGRES)
    kv, graph = storage_class(config, "kv"), storage_class(config, "graph")

    async def main():
        store = kv(namespace="docs", global_config=config)
        await store.upsert({hostile: {"text": hostile}})
        g = graph(namespace="chunk_entity_relation", global_config=config)
        await g.upsert_node(hostile, {"description": hostile})
        await g.upsert_edge(hostile, "B", {"weight": 1.0})
        await store.index_commit_callback()
        assert await store.get_by_id(hostile) == {"text": hostile}
        assert await g.get_node_edges(hostile) == [(hostile, "B")]
        await store.close()

    run(main())
    for bad in ("bad-name", "1st", "a" * 25, "x; DROP"):
        bad_config = GraphRAGConfig(working_dir=str(tmp_path), storage_options={**postgres_options, "workspace": bad})
        with pytest.raises(ConfigurationError, match="workspace"):
            database_for(bad_config)
    with pytest.raises(ConfigurationError, match="namespace"):
        kv(namespace="no spaces", global_config=config)


def test_backend_names_env_vars_and_the_nano_options(tmp_path, monkeypatch):
    from graphrag.storage import JsonKVStorage, NanoVectorDBStorage, NetworkXStorage
    from graphrag.storage.graph_postgres import PostgresGraphStorage

    config = GraphRAGConfig(working_dir=str(tmp_path))
    assert [storage_class(config, k) for k in ("kv", "vector", "graph")] == \
        [JsonKVStorage, NanoVectorDBStorage, NetworkXStorage]
    monkeypatch.setenv("GRAPHRAG_GRAPH_STORAGE", "postgres")
    assert storage_class(config, "graph") is PostgresGraphStorage
    # nano-graphrag's class options win over any name.
    assert storage_class(GraphRAGConfig(working_dir=str(tmp_path), graph_storage_cls=NetworkXStorage,
                                        graph_storage="postgres"), "graph") is NetworkXStorage
    with pytest.raises(ConfigurationError, match="unknown kv_storage 'redis'"):
        storage_class(GraphRAGConfig(working_dir=str(tmp_path), kv_storage="redis"), "kv")


def test_a_missing_extra_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(ConfigurationError, match=r'vector_storage=.pgvector. needs the .postgres. extra: '
                                                  r'pip install "filegraphrag\[postgres\]"'):
        GraphRAG(working_dir=str(tmp_path), vector_storage="pgvector", embedding_func=hash_embedding(8))


def test_the_connection_string_is_never_logged_shown_or_written(make_rag, postgres_uri, caplog):
    caplog.set_level(logging.DEBUG)
    rag = make_rag(extraction="nlp")
    rag.insert(CORPUS[:1])
    rag.query("Tidewater", QueryParam(mode="naive", only_need_context=True))
    assert postgres_uri not in repr(rag.config) and "dsn" not in repr(rag.config)
    assert postgres_uri not in caplog.text
    for root, _, names in os.walk(rag.config.working_dir):
        for name in names:
            with open(os.path.join(root, name), "rb") as fh:
                assert postgres_uri.encode() not in fh.read()


def test_the_cli_indexes_and_answers_on_postgres(tmp_path, postgres_options, monkeypatch, capsys):
    from graphrag import cli

    for variable in ("GRAPHRAG_KV_STORAGE", "GRAPHRAG_VECTOR_STORAGE", "GRAPHRAG_GRAPH_STORAGE",
                     "GRAPHRAG_WORKSPACE"):
        monkeypatch.setenv(variable, "")  # "" is unset to the engine; undone after the test, whatever main sets
    monkeypatch.setenv("GRAPHRAG_POSTGRES_DSN", postgres_options["dsn"])
    monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
    monkeypatch.setattr(cli, "_setup_logging", lambda verbose: None)
    (tmp_path / "doc.txt").write_text(CORPUS[0], encoding="utf-8")
    flags = ["-w", str(tmp_path / "wd"), "--kv-storage", "postgres", "--vector-storage", "pgvector",
             "--graph-storage", "postgres", "--workspace", postgres_options["workspace"]]
    assert cli.main(["index", str(tmp_path / "doc.txt"), "--offline", *flags]) == 0
    assert cli.main(["query", "Who founded Tidewater Labs?", "--mode", "local", "--context-only", *flags]) == 0
    assert "MARIN OKAFOR" in capsys.readouterr().out.upper()
    assert [f for f in os.listdir(tmp_path / "wd") if not f.startswith(".")] == []
    assert postgres_options["dsn"] not in capsys.readouterr().err


def test_a_synchronous_call_takes_up_the_previous_ones_connection_unless_the_server_dropped_it(
        tmp_path, postgres_options):
    """Each synchronous call runs on an event loop of its own; the connection its pool opened is
    parked when the loop closes and used by the next call's, but not once the server closed it."""
    import time

    import psycopg

    config = GraphRAGConfig(working_dir=str(tmp_path), storage_options=postgres_options, **ALL_POSTGRES)
    store = storage_class(config, "kv")(namespace="docs", global_config=config)

    async def backend_pid() -> int:
        try:
            return (await store._rows("SELECT pg_backend_pid()"))[0][0]
        finally:
            await store.close()

    first = asyncio.run(backend_pid())
    assert asyncio.run(backend_pid()) == first  # no new connection
    with psycopg.connect(postgres_options["dsn"], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    time.sleep(0.2)  # the server's goodbye reaches the parked socket
    second = asyncio.run(backend_pid())
    assert second != first and asyncio.run(backend_pid()) == second


def test_an_instance_dropped_closes_its_parked_connections(tmp_path, postgres_options):
    """Parked connections belong to their GraphRAG's database: once the instance is gone, so are
    they (a scratch database can be dropped, a server's connection slots are not used up)."""
    import gc
    import time

    import psycopg

    def sessions() -> int:
        with psycopg.connect(postgres_options["dsn"], autocommit=True) as admin:
            # Client sessions only: autovacuum workers (up to three, after the tables earlier tests
            # wrote) also show under the database's name, and come and go on their own.
            return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                 "AND backend_type = 'client backend' "
                                 "AND pid <> pg_backend_pid()").fetchone()[0]

    gc.collect()  # earlier tests' instances
    before = sessions()
    rag = GraphRAG(working_dir=str(tmp_path), storage_options=postgres_options, extraction="nlp",
                   embedding_func=hash_embedding(64), show_progress=False, **ALL_POSTGRES)
    rag.insert(CORPUS[0])
    rag.query("Who founded Tidewater Labs?", QueryParam(mode="local", only_need_context=True))
    assert sessions() > before  # parked between synchronous calls
    del rag
    gc.collect()
    deadline = time.monotonic() + 5
    while sessions() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sessions() <= before


def test_another_instances_commit_reaches_a_readers_walk(tmp_path, postgres_options):
    """A reader reads PostgreSQL live; the matrices its hybrid walk built are rebuilt once
    another instance (another process) commits a change to the graph, not kept stale."""
    from graphrag.operators.walk_graph import graph_index

    def make() -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path), storage_options=postgres_options, extraction="nlp",
                        embedding_func=hash_embedding(64), show_progress=False, **ALL_POSTGRES)

    async def walk_entities(rag: GraphRAG) -> set[str]:
        try:
            return set((await graph_index(rag.stores)).entities)
        finally:
            await rag.stores.close()

    writer, reader = make(), make()
    writer.insert(CORPUS[0])
    assert "MARIN OKAFOR" in reader.query("Who founded Tidewater Labs?",
                                          QueryParam(mode="hybrid", only_need_context=True)).upper()
    before = asyncio.run(walk_entities(reader))
    writer.insert(DOC_E)
    after = asyncio.run(walk_entities(reader))
    assert "NADIA FARROW" not in before and "NADIA FARROW" in after
    assert asyncio.run(walk_entities(reader)) == after  # kept while nothing changes


def test_reads_by_id_asked_for_together_share_one_statement(tmp_path, postgres_options):
    """Concurrent ``get_by_id`` calls (a global query's map calls looking up the LLM cache) answer as
    single reads would, with one statement between them; a later call reads anew."""
    config = GraphRAGConfig(working_dir=str(tmp_path), storage_options=postgres_options, **ALL_POSTGRES)
    store = storage_class(config, "kv")(namespace="cache", global_config=config,
                                        **storage_class(config, "kv").options_for(durable_upserts=True))

    async def main():
        await store.upsert({f"k{i}": {"v": i} for i in range(5)})  # durable: written at once
        statements = []
        rows = store._rows

        async def counted(query: str, params: tuple = ()) -> list[tuple]:
            statements.append(query)
            return await rows(query, params)

        store._rows = counted
        wanted = ["k3", "none", "k0", "k3"]
        assert await asyncio.gather(*(store.get_by_id(k) for k in wanted)) == [{"v": 3}, None, {"v": 0}, {"v": 3}]
        assert len(statements) == 1
        await store.upsert({"k0": {"v": 10}})
        assert await store.get_by_id("k0") == {"v": 10} and len(statements) == 2
        await store.close()

    run(main())


def test_more_statements_at_once_than_connections_wait_their_turn_not_a_timeout(tmp_path, postgres_options):
    """An extraction asks the LLM cache thousands of things at once: statements beyond the pool's
    size queue without a deadline (the pool's timeout is for a server that cannot be reached)."""
    config = GraphRAGConfig(working_dir=str(tmp_path), storage_options={**postgres_options, "connect_timeout": 1},
                            **ALL_POSTGRES)
    db = database_for(config)

    async def slow(i: int) -> int:
        async with db.autocommit() as conn:
            return (await (await conn.execute("SELECT %s::int FROM pg_sleep(0.1)", (i,))).fetchone())[0]

    async def main():
        try:
            # Some 17 rounds of 0.1 s over the pool's connections: past its 1 s timeout in all.
            count = 15 * POOL_SIZE
            assert await asyncio.gather(*(slow(i) for i in range(count))) == list(range(count))
        finally:
            await db.close()

    run(main())


def test_the_embedding_rerank_keeps_sentence_vectors_in_postgres(make_rag):
    """rerank="embedding" keeps each chunk's sentence vectors in a KV namespace: in the
    database, read by another instance (only the question embedded), gone with the document."""
    from graphrag.operators.chunking import doc_id_for
    from test_rerank import HEADED_DOCS, HEADED_QUESTION, _counting_embedding, _kept_sentence_vectors

    rag = make_rag(extraction="nlp", rerank="embedding", embedding_func=hash_embedding(256))
    rag.insert(HEADED_DOCS)
    assert sorted(_kept_sentence_vectors(rag).values()) == sorted(HEADED_DOCS)
    embedded: list[str] = []
    reader = make_rag("reader", extraction="nlp", rerank="embedding", enable_llm_cache=False,
                      embedding_func=_counting_embedding(embedded))
    chunks = reader.retrieve(HEADED_QUESTION, QueryParam(mode="naive")).chunks
    assert chunks[0].content.startswith("Quarvale Lighthouse\n") and embedded == [HEADED_QUESTION]
    rag.delete_documents(doc_id_for(HEADED_DOCS[2]))
    assert sorted(_kept_sentence_vectors(rag).values()) == sorted(HEADED_DOCS[:2])
