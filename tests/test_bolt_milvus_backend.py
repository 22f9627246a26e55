"""Files for the KV stores, the graph over Bolt (a real FalkorDB through the ``neo4j`` driver)
and the vectors in Milvus (Milvus Lite on a file), end to end through the engine.

The store contracts are checked by tests/test_storage_conformance.py; here: the engine on
this combination builds what it builds on files, every query mode answers, delete,
incremental insert and a re-insert with no LLM call work, a failed write leaves the last
commit, and the knowledge graph API reads the Bolt graph.
"""
from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.backends import storage_class
from graphrag.config import GraphRAGConfig
from graphrag.errors import ConfigurationError
from graphrag.indexing.pipeline import Pipeline
from graphrag.operators.modes import mode_names
from graphrag.storage.graph_neo4j import Neo4jGraphStorage
from graphrag.storage.vector_milvus import MilvusVectorStorage
import database_servers
from helpers_server import CHAIN, DOCS
from helpers_storage import graph_shape, run
from test_incremental import CORPUS, DOC_E

BOLT_MILVUS = {"vector_storage": "milvus", "graph_storage": "neo4j"}


@pytest.fixture
def make_rag(server, tmp_path, falkordb_uri):
    """``make_rag(name, files=False)``: a GraphRAG with its KV in files, its graph in FalkorDB
    (a workspace of this test's own) and its vectors in Milvus Lite (a file of its own)."""
    server.reset()
    workspace = database_servers.next_workspace()

    def make(name: str = "wd", files: bool = False, **overrides: Any) -> GraphRAG:
        settings: dict[str, Any] = dict(
            working_dir=str(tmp_path / name), embedding_func=hash_embedding(64), show_progress=False,
            llm_base_url=server.base_url, llm_api_key="k")
        if not files:
            settings.update(BOLT_MILVUS, storage_options={
                "neo4j_uri": falkordb_uri, "workspace": workspace, "milvus_uri": str(tmp_path / "milvus.db")})
        return GraphRAG(**{**settings, **overrides})

    return make


def test_the_engine_on_bolt_and_milvus_builds_what_it_builds_on_files(make_rag, server):
    files = make_rag("files", files=True)
    files.insert(CORPUS)
    server.reset()
    rag = make_rag()
    assert isinstance(rag.stores.graph, Neo4jGraphStorage) and isinstance(rag.stores.chunks_vdb, MilvusVectorStorage)
    stats = rag.insert(CORPUS)
    assert stats["documents_inserted"] == len(CORPUS) and stats["communities"] > 0
    assert run(graph_shape(rag)) == run(graph_shape(files))
    assert stats["communities"] == files.last_insert_stats["communities"]
    # The graph and the vectors are not files of the working dir.
    assert not any(name.endswith((".graphml", "vdb_entities.json", "vdb_chunks.json"))
                   for name in os.listdir(rag.config.working_dir))

    for mode in mode_names():
        answer = rag.query("Who founded Tidewater Labs?", QueryParam(mode=mode))
        assert answer.strip() and "No documents are indexed" not in answer
    for mode in ("local", "naive"):
        context = rag.query("Who founded Tidewater Labs?", QueryParam(mode=mode, only_need_context=True))
        assert context == files.query("Who founded Tidewater Labs?", QueryParam(mode=mode, only_need_context=True))
    assert "MARIN OKAFOR" in rag.query("Who founded Tidewater Labs?",
                                       QueryParam(mode="local", only_need_context=True)).upper()

    # Another instance on the same stores sees the committed index.
    again = make_rag()
    assert run(graph_shape(again)) == run(graph_shape(rag))
    assert again.query("Who founded Tidewater Labs?", QueryParam(mode="naive", only_need_context=True)) == \
        rag.query("Who founded Tidewater Labs?", QueryParam(mode="naive", only_need_context=True))


def test_incremental_insert_reinsert_and_delete_on_bolt_and_milvus(make_rag, server):
    rag = make_rag()
    rag.insert(CORPUS)
    nodes_before, edges_before = run(graph_shape(rag))
    entity_vectors_before = run(rag.stores.entities_vdb.count())

    calls = len(server.requests)
    again = rag.insert(CORPUS)  # already indexed: no LLM call, nothing written
    assert again["documents_inserted"] == 0 and len(server.requests) == calls

    server.reset()
    added = rag.insert(DOC_E)
    assert added["documents_inserted"] == 1
    assert server.calls_by_kind["extraction"] == added["chunks_inserted"] == 1  # only the new chunk
    nodes_with_e, _ = run(graph_shape(rag))
    assert any("KESTREL" in n for n in nodes_with_e) and nodes_before < nodes_with_e
    assert run(rag.stores.entities_vdb.count()) > entity_vectors_before

    e_id = next(d["id"] for d in rag.list_documents() if d["chars"] == len(DOC_E))
    server.reset()
    removed = rag.delete_documents(e_id)
    assert removed["documents_removed"] == 1 and not server.calls_by_kind["extraction"]
    assert run(graph_shape(rag)) == (nodes_before, edges_before)
    assert run(rag.stores.entities_vdb.count()) == entity_vectors_before
    assert len(rag.list_documents()) == len(CORPUS)
    for mode in mode_names():
        assert rag.query("Who founded Tidewater Labs?", QueryParam(mode=mode)).strip()


def test_a_failed_insert_leaves_the_previous_graph_and_vectors(make_rag, server, monkeypatch):
    rag = make_rag()
    rag.insert(CORPUS[:2])
    before = (run(graph_shape(rag)), run(rag.stores.chunks_vdb.get_ids()), len(rag.list_documents()))

    async def reports_fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the report stage died")

    monkeypatch.setattr(Pipeline, "report", reports_fail)
    server.reset()
    with pytest.raises(RuntimeError, match="report stage died"):
        rag.insert(CORPUS[2:])  # the graph and vectors were written before the reports
    assert server.calls_by_kind["extraction"] > 0
    assert (run(graph_shape(rag)), run(rag.stores.chunks_vdb.get_ids()), len(rag.list_documents())) == before

    monkeypatch.undo()
    server.reset()
    stats = rag.insert(CORPUS[2:])
    assert stats["documents_inserted"] == 2 and server.calls_by_kind["extraction"] == 0  # from the cache


def test_the_knowledge_graph_api_reads_the_bolt_graph(make_rag):
    rag = make_rag(extraction="nlp")
    rag.insert(list(DOCS.values()), sources=list(DOCS))
    kg = rag.knowledge_graph
    paths = kg.paths("marguerite olvane", "Norland")
    assert paths and list(paths[0].entities) == CHAIN
    assert [[d.source for d in hop.documents] for hop in paths[0].hops] == [
        ["people.txt"], ["companies.txt"], ["places.txt"]]
    entity = kg.entity("brightwater-instruments")
    assert entity.name == "BRIGHTWATER INSTRUMENTS"
    assert {d.source for d in entity.documents} == {"people.txt", "companies.txt"}
    assert "KESTREL HARBOR" in {e.name for e in kg.neighbors("Brightwater Instruments")}
    assert set(CHAIN) <= {e.name for e in kg.subgraph(["Kestrel Harbor"], depth=2).entities}
    assert kg.search("Marguerite Olvane", top_k=3)[0].name == "MARGUERITE OLVANE"  # through the Milvus vectors


def test_workspaces_are_apart_values_arrive_intact_and_names_are_validated(tmp_path, neo4j_options):
    hostile = "x'}) DETACH DELETE n // \\b \\' é🌍"
    long_text = "".join(f"{i} words, 'quoted' and \\ more, മലയാളം 🌍; " for i in range(600))  # ~30 KB
    options = {**neo4j_options, "milvus_uri": str(tmp_path / "m.db")}
    first = GraphRAGConfig(working_dir=str(tmp_path / "a"), **BOLT_MILVUS, storage_options=options)
    other = GraphRAGConfig(working_dir=str(tmp_path / "b"), **BOLT_MILVUS,
                           storage_options={**options, "workspace": options["workspace"] + "_other"})

    async def main():
        graph = Neo4jGraphStorage(namespace="chunk_entity_relation", global_config=first)
        await graph.upsert_node(hostile, {"description": hostile})
        await graph.upsert_edge(hostile, "B", {"weight": 1.0, "description": long_text})
        await graph.set_graph_attribute("split", long_text)
        vectors = MilvusVectorStorage(namespace="chunks", global_config=first, embedding_func=hash_embedding(8))
        await vectors.upsert({hostile: {"content": hostile}})
        for store in (graph, vectors):
            await store.index_commit_callback()
        assert await graph.get_node_edges(hostile) == [(hostile, "B")]
        assert (await graph.get_node(hostile))["description"] == hostile
        assert (await graph.get_edge("B", hostile))["description"] == long_text
        assert await graph.get_graph_attribute("split") == long_text
        assert (await vectors.query(hostile, top_k=1))[0]["id"] == hostile
        elsewhere = Neo4jGraphStorage(namespace="chunk_entity_relation", global_config=other)
        assert await elsewhere.count_nodes() == 0 and await graph.count_nodes() == 2
        assert await MilvusVectorStorage(namespace="chunks", global_config=other,
                                         embedding_func=hash_embedding(8)).count() == 0
        await graph.close()

    run(main())
    for bad in ("bad-name", "1st", "x` DETACH"):
        config = GraphRAGConfig(working_dir=str(tmp_path), storage_options={**options, "workspace": bad})
        with pytest.raises(ConfigurationError, match="workspace"):
            Neo4jGraphStorage(namespace="chunk_entity_relation", global_config=config)
    with pytest.raises(ConfigurationError, match="namespace"):
        MilvusVectorStorage(namespace="no spaces", global_config=first, embedding_func=hash_embedding(8))


def test_a_milvus_collection_of_another_dimension_is_refused(tmp_path, milvus_options):
    from graphrag.storage import EmbeddingDimensionError

    config = GraphRAGConfig(working_dir=str(tmp_path), vector_storage="milvus", storage_options=milvus_options)

    async def main():
        store = MilvusVectorStorage(namespace="chunks", global_config=config, embedding_func=hash_embedding(8))
        await store.upsert({"a": {"content": "some text"}})
        await store.index_commit_callback()

    run(main())
    assert MilvusVectorStorage.describe_stored(config, "chunks") == {"vectors": 1, "dim": 8}
    with pytest.raises(EmbeddingDimensionError, match="8-dimensional"):
        MilvusVectorStorage.check_compatible(config, "chunks", 16)


def test_backend_names_and_missing_extras(tmp_path, monkeypatch):
    config = GraphRAGConfig(working_dir=str(tmp_path), vector_storage="milvus", graph_storage="neo4j")
    assert storage_class(config, "graph") is Neo4jGraphStorage
    assert storage_class(config, "vector") is MilvusVectorStorage
    monkeypatch.setitem(sys.modules, "neo4j", None)  # as if not installed
    with pytest.raises(ConfigurationError, match=r'graph_storage=.neo4j. needs the .neo4j. extra: '
                                                  r'pip install "filegraphrag\[neo4j\]"'):
        GraphRAG(working_dir=str(tmp_path), graph_storage="neo4j", embedding_func=hash_embedding(8))
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    with pytest.raises(ConfigurationError, match=r'vector_storage=.milvus. needs the .milvus. extra'):
        GraphRAG(working_dir=str(tmp_path), vector_storage="milvus", embedding_func=hash_embedding(8))


def test_graph_reads_spanning_several_messages_equal_single_reads(neo4j_options, tmp_path):
    """Batched reads cut into several statements (FalkorDB's message cap) answer as one read would,
    before and after the commit, and with deletes pending (degrees then merge the write)."""
    config = GraphRAGConfig(working_dir=str(tmp_path), graph_storage="neo4j", storage_options=neo4j_options)
    names = [f"NODE {i:03d} {'X' * 40}" for i in range(150)]
    pairs = [(names[i], names[(i * 7 + 1) % 150]) for i in range(150)]

    async def main():
        graph = Neo4jGraphStorage(namespace="g", global_config=config)
        for name in names:
            await graph.upsert_node(name, {"description": name.lower(), "source_id": "c1"})
        for a, b in pairs:
            await graph.upsert_edge(a, b, {"weight": 1.0, "description": f"{a} - {b}"})
        for step in ("pending", "committed", "deletes pending"):
            if step == "deletes pending":
                await graph.delete_edge(*pairs[0])
                await graph.delete_node(names[5])
            assert await graph.get_nodes_batch(names) == [await graph.get_node(n) for n in names]
            assert await graph.get_edges_batch(pairs) == [await graph.get_edge(a, b) for a, b in pairs]
            edges = await graph.get_nodes_edges_batch(names)
            assert [sorted(e) for e in edges] == [sorted(await graph.get_node_edges(n) or []) for n in names]
            assert await graph.node_degrees_batch(names) == [len(e) for e in edges]
            if step == "deletes pending":
                assert edges[5] == [] and pairs[0] not in [tuple(sorted(e)) for e in edges[0]]
            assert dict(await graph.get_nodes_attributes(("source_id",))) == \
                {n: {"source_id": "c1"} for n in names if n != names[5] or step != "deletes pending"}
            if step == "pending":
                await graph.index_commit_callback()
        await graph.index_abort_callback()

    asyncio.run(main())


def test_another_instances_commit_reaches_a_readers_walk(make_rag):
    """The Bolt graph is read live; a reader's hybrid walk is rebuilt once another instance
    commits a change to it."""
    from graphrag.operators.walk_graph import graph_index

    async def walk_entities(rag: GraphRAG) -> set[str]:
        try:
            return set((await graph_index(rag.stores)).entities)
        finally:
            await rag.stores.close()

    writer = make_rag("writer")
    writer.insert(CORPUS[0])
    reader = make_rag("writer")
    before = run(walk_entities(reader))
    assert before
    writer.insert(DOC_E)
    after = run(walk_entities(reader))
    assert before < after and any("FARROW" in name for name in after - before)
    assert run(walk_entities(reader)) == after



def test_only_a_dead_server_earns_a_bolt_test_another_run(request, falkordb_uri):
    """A test on FalkorDB runs once more only for the errors of a server gone (conftest)."""
    from conftest import SERVER_GONE

    assert request.node.get_closest_marker("flaky").kwargs == {"reruns": 1, "only_rerun": SERVER_GONE}


def test_tests_without_falkordb_get_no_second_run(request, tmp_path):
    assert request.node.get_closest_marker("flaky") is None
