"""The storage contract (storage/base.py), checked against every backend.

A new backend plugs in by adding a factory to ``KV_BACKENDS``, ``VECTOR_BACKENDS`` or
``GRAPH_BACKENDS``: ``factory(config, namespace)`` returns a store of the working dir
``config.working_dir``; calling it again after ``index_done_callback`` must see what
was committed (a reopen, as the engine does after a failed write). A graph backend is
checked on the core contract, and on each capability it declares (``GRAPH_CAPABILITIES``
lists what each must declare, so none is dropped unnoticed).
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from typing import Any, Callable

import pytest

from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.operators.clustering import cluster_graph, community_schema
from graphrag.storage import (
    BaseGraphStorage,
    BaseKVStorage,
    BaseVectorStorage,
    JsonKVStorage,
    NanoVectorDBStorage,
    NetworkXStorage,
)
from graphrag.storage.base import CAPABILITIES, ClusterMemberships, capabilities, walk_links
from graphrag.storage.graph_neo4j import Neo4jGraphStorage
from graphrag.storage.graph_postgres import PostgresGraphStorage
from graphrag.storage.postgres import PostgresKVStorage
from graphrag.storage.vector_milvus import MilvusVectorStorage
from graphrag.storage.vector_pgvector import PGVectorStorage
from graphrag.stores import Stores

Factory = Callable[[GraphRAGConfig, str], Any]

KV_BACKENDS: dict[str, Factory] = {
    "json": lambda config, ns: JsonKVStorage(namespace=ns, global_config=config),
    "json-lookup": lambda config, ns: JsonKVStorage(namespace=ns, global_config=config, lookup=True),
    "json-journal": lambda config, ns: JsonKVStorage(namespace=ns, global_config=config,
                                                     **JsonKVStorage.options_for(durable_upserts=True)),
}
# KV backends opened with ``options_for(durable_upserts=True)``: their upserts outlive a failed write.
DURABLE_UPSERTS = {"json-journal"}
VECTOR_BACKENDS: dict[str, Factory] = {
    "nano": lambda config, ns: NanoVectorDBStorage(namespace=ns, global_config=config,
                                                   embedding_func=hash_embedding(32), meta_fields={"name"}),
}
GRAPH_BACKENDS: dict[str, Factory] = {
    "networkx": lambda config, ns: NetworkXStorage(namespace=ns, global_config=config),
}

# Backends on a database server: the fixture (tests/conftest.py) whose ``storage_options``
# the config gets, one workspace per test on a server started once per session.
KV_BACKENDS["postgres"] = lambda config, ns: PostgresKVStorage(namespace=ns, global_config=config)
KV_BACKENDS["postgres-durable"] = lambda config, ns: PostgresKVStorage(
    namespace=ns, global_config=config, **PostgresKVStorage.options_for(durable_upserts=True))
DURABLE_UPSERTS.add("postgres-durable")
VECTOR_BACKENDS["pgvector"] = lambda config, ns: PGVectorStorage(
    namespace=ns, global_config=config, embedding_func=hash_embedding(32), meta_fields={"name"})
GRAPH_BACKENDS["postgres"] = lambda config, ns: PostgresGraphStorage(namespace=ns, global_config=config)
GRAPH_BACKENDS["neo4j"] = lambda config, ns: Neo4jGraphStorage(namespace=ns, global_config=config)
VECTOR_BACKENDS["milvus"] = lambda config, ns: MilvusVectorStorage(
    namespace=ns, global_config=config, embedding_func=hash_embedding(32), meta_fields={"name"})
# What each graph backend declares beyond the core contract (storage/base.py).
GRAPH_CAPABILITIES = {
    "networkx": {"graph_attributes", "cluster_memberships", "walk_links"},
    "postgres": {"graph_attributes", "cluster_memberships"},
    "neo4j": {"graph_attributes", "cluster_memberships"},
}
SERVER_OPTIONS = {"postgres": "postgres_options", "postgres-durable": "postgres_options",
                  "pgvector": "postgres_options", "neo4j": "neo4j_options", "milvus": "milvus_options"}


def backend_config(request: Any, config: GraphRAGConfig) -> GraphRAGConfig:
    """``config``, with the settings of the database server the backend under test needs."""
    fixture = SERVER_OPTIONS.get(request.param)
    return replace(config, storage_options=request.getfixturevalue(fixture)) if fixture else config


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def config(tmp_path) -> GraphRAGConfig:
    # No similarity floor: every stored vector is a candidate.
    return GraphRAGConfig(working_dir=str(tmp_path), embedding_batch_num=4, max_graph_cluster_size=3,
                          query_better_than_threshold=-1.0)


@pytest.fixture(params=sorted(KV_BACKENDS))
def open_kv(request, config) -> Callable[[], BaseKVStorage]:
    config = backend_config(request, config)

    def open_store(namespace: str = "docs") -> BaseKVStorage:
        return KV_BACKENDS[request.param](config, namespace)

    open_store.durable_upserts = request.param in DURABLE_UPSERTS  # type: ignore[attr-defined]
    return open_store


@pytest.fixture(params=sorted(VECTOR_BACKENDS))
def open_vectors(request, config) -> Callable[[], BaseVectorStorage]:
    config = backend_config(request, config)
    return lambda namespace="entities": VECTOR_BACKENDS[request.param](config, namespace)


def _graph_opener(request: Any, config: GraphRAGConfig) -> Callable[[], BaseGraphStorage]:
    config = backend_config(request, config)
    return lambda namespace="chunk_entity_relation": GRAPH_BACKENDS[request.param](config, namespace)


@pytest.fixture(params=sorted(GRAPH_BACKENDS))
def open_graph(request, config) -> Callable[[], BaseGraphStorage]:
    """Every graph backend: the core contract."""
    open_store = _graph_opener(request, config)
    open_store.backend = request.param  # type: ignore[attr-defined]
    return open_store


@pytest.fixture(params=sorted(n for n in [*GRAPH_BACKENDS, *VECTOR_BACKENDS] if n in SERVER_OPTIONS))
def open_database(request, config) -> Callable[[], Any]:
    """Every graph and vector backend on a database server (those that commit outside the files)."""
    factory = GRAPH_BACKENDS.get(request.param) or VECTOR_BACKENDS[request.param]
    config = backend_config(request, config)
    return lambda: factory(config, "entities")


@pytest.fixture(params=sorted(n for n, declared in GRAPH_CAPABILITIES.items() if "cluster_memberships" in declared))
def open_clustered_graph(request, config) -> Callable[[], BaseGraphStorage]:
    """The graph backends declaring ``ClusterMemberships`` (and so graph attributes)."""
    return _graph_opener(request, config)


def _stores_of(store: Any) -> Stores:
    stores = Stores({"store": lambda: store}, working_dir=store.working_dir)
    stores.open("store")
    return stores


async def commit(store: Any) -> None:
    """One write as the engine runs it: persist inside the commit, which then ends."""
    stores = _stores_of(store)
    async with stores.transaction():
        await stores.index_done()


async def failed_commit(store: Any) -> None:
    """A write that fails after the store was persisted, before the commit completed."""
    stores = _stores_of(store)
    with pytest.raises(RuntimeError):
        async with stores.transaction():
            await stores.index_done()
            raise RuntimeError("the write failed before its commit")


# ---------------------------------------------------------------- KV


def test_kv_round_trip_batch_equals_single_and_persists(open_kv):
    async def main():
        store = open_kv()
        await store.index_start_callback()
        assert await store.all_keys() == [] and await store.count() == 0
        records = {"a": {"x": 1, "y": "one"}, "ünï-κλειδί 🗝": {"x": 2, "y": "two"}, "c": {"x": 3}}
        await store.upsert(records)
        ids = ["c", "missing", "a", "ünï-κλειδί 🗝"]
        singles = [await store.get_by_id(i) for i in ids]
        assert await store.get_by_ids(ids) == singles == [records["c"], None, records["a"], records["ünï-κλειδί 🗝"]]
        assert await store.get_by_ids(ids, fields={"x"}) == [{"x": 3}, None, {"x": 1}, {"x": 2}]
        assert await store.filter_keys(["a", "new", "c", "other"]) == {"new", "other"}
        assert await store.count() == 3
        await commit(store)

        again = open_kv()
        assert sorted(await again.all_keys()) == sorted(records)
        assert await again.get_by_ids(ids) == singles
        assert await again.count() == 3
    run(main())


def test_kv_overwrite_delete_drop_and_empty_inputs(open_kv):
    async def main():
        store = open_kv()
        await store.upsert({})
        await store.delete([])
        assert await store.get_by_ids([]) == [] and await store.filter_keys([]) == set()
        await store.upsert({"a": {"v": 1}, "b": {"v": 2}})
        await store.upsert({"a": {"w": 9}})  # whole records: "v" is gone
        assert await store.get_by_id("a") == {"w": 9}
        await store.delete(["b", "never-there"])
        assert await store.all_keys() == ["a"]
        await commit(store)
        assert await open_kv().all_keys() == ["a"]
        await store.drop()
        assert await store.all_keys() == [] and await store.count() == 0
        await commit(store)
        assert await open_kv().all_keys() == []
    run(main())


def test_kv_failed_transaction_leaves_previous_state(open_kv):
    async def main():
        store = open_kv()
        await store.upsert({"kept": {"v": 1}})
        await commit(store)

        doomed = open_kv()
        await doomed.index_start_callback()
        await doomed.upsert({"kept": {"v": 2}, "new": {"v": 3}})
        await doomed.delete(["kept"])
        await failed_commit(doomed)
        reopened = open_kv()
        if open_kv.durable_upserts:  # the upserts were kept as they happened; the delete was not
            assert sorted(await reopened.all_keys()) == ["kept", "new"] and await reopened.get_by_id("kept") == {"v": 2}
        else:
            assert await reopened.all_keys() == ["kept"] and await reopened.get_by_id("kept") == {"v": 1}
    run(main())


def test_kv_sees_another_writers_commit_at_index_start(open_kv):
    async def main():
        reader = open_kv()
        assert await reader.all_keys() == []
        writer = open_kv()
        await writer.upsert({"k": {"v": 1}})
        await commit(writer)
        await reader.index_start_callback()
        assert await reader.get_by_id("k") == {"v": 1}
    run(main())


# ---------------------------------------------------------------- vectors


async def _seed_vectors(store: BaseVectorStorage) -> dict[str, dict[str, Any]]:
    records = {f"id-{i}": {"content": text, "name": text.upper()}
               for i, text in enumerate(["red apple", "green pear", "fast red car", "slow boat", "blue sky"])}
    await store.upsert(records)
    return records


def test_vectors_query_orders_nearest_first_and_carries_meta_fields(open_vectors):
    async def main():
        store = open_vectors()
        assert await store.query("anything", top_k=3) == []
        records = await _seed_vectors(store)
        hits = await store.query("red apple", top_k=3)
        assert len(hits) == 3 and hits[0]["id"] == "id-0" and hits[0]["name"] == "RED APPLE"
        assert [h["distance"] for h in hits] == sorted((h["distance"] for h in hits), reverse=True)
        assert set(hits[0]) == {"id", "distance", "name"}  # meta fields only: no content, no vector
        assert await store.query("red apple", top_k=0) == []
        assert len(await store.query("red apple", top_k=50)) == len(records)
        assert await store.get_ids() == set(records) and await store.count() == len(records)
    run(main())


def test_vectors_overwrite_delete_and_persist(open_vectors):
    async def main():
        store = open_vectors()
        await store.upsert({})
        await store.delete([])
        await _seed_vectors(store)
        await store.upsert({"id-0": {"content": "slow boat", "name": "MOVED"}})  # same id, new text
        await store.delete(["id-3", "never-there"])
        assert await store.get_ids() == {"id-0", "id-1", "id-2", "id-4"}
        assert (await store.query("slow boat", top_k=1))[0] == {**(await store.query("slow boat", top_k=1))[0],
                                                                "id": "id-0", "name": "MOVED"}
        await commit(store)
        again = open_vectors()
        assert await again.get_ids() == {"id-0", "id-1", "id-2", "id-4"} and await again.count() == 4
        assert (await again.query("slow boat", top_k=1))[0]["id"] == "id-0"
        await again.drop()
        assert await again.get_ids() == set() and await again.query("blue sky", top_k=2) == []
    run(main())


def test_vectors_failed_transaction_leaves_previous_state(open_vectors):
    async def main():
        store = open_vectors()
        await _seed_vectors(store)
        await commit(store)
        doomed = open_vectors()
        await doomed.index_start_callback()
        await doomed.delete(["id-0", "id-1"])
        await failed_commit(doomed)
        assert await open_vectors().count() == 5
    run(main())


def test_vectors_describe_stored(open_vectors):
    async def main():
        store = open_vectors()
        cls, config = type(store), store.global_config
        assert cls.describe_stored(config, store.namespace) is None
        await _seed_vectors(store)
        await commit(store)
        described = cls.describe_stored(config, store.namespace)
        assert described in (None, {"vectors": 5, "dim": 32})  # None: the class cannot tell
        cls.check_compatible(config, store.namespace, 32)
    run(main())


# ---------------------------------------------------------------- graph


async def _seed_graph(graph: BaseGraphStorage) -> None:
    for name in ["A", "B", "C", "D", "É 🌍", "LONE"]:
        await graph.upsert_node(name, {"entity_type": "THING", "description": f"about {name}", "source_id": f"c-{name}"})
    for a, b, weight in [("A", "B", 2.0), ("B", "C", 1.0), ("C", "A", 1.0), ("C", "D", 1.0), ("D", "É 🌍", 3.0)]:
        await graph.upsert_edge(a, b, {"weight": weight, "description": f"{a}-{b}", "source_id": "c-x"})


def test_graph_nodes_edges_both_ways_and_degrees(open_graph):
    async def main():
        graph = open_graph()
        assert await graph.get_node("A") is None and await graph.get_node_edges("A") is None
        assert await graph.node_degree("A") == 0
        await _seed_graph(graph)
        assert await graph.has_node("É 🌍") and not await graph.has_node("Z")
        assert await graph.has_edge("A", "B") and await graph.has_edge("B", "A") and not await graph.has_edge("A", "D")
        assert await graph.get_edge("B", "A") == await graph.get_edge("A", "B")
        assert (await graph.get_edge("É 🌍", "D"))["weight"] == 3.0
        assert await graph.node_degree("C") == 3 and await graph.node_degree("LONE") == 0
        assert await graph.edge_degree("A", "B") == 4
        assert sorted(tuple(sorted(e)) for e in await graph.get_node_edges("C")) == [("A", "C"), ("B", "C"), ("C", "D")]
        assert await graph.get_node_edges("LONE") == []
        names, pairs = ["C", "Z", "A"], [("A", "B"), ("A", "D"), ("D", "C")]
        assert await graph.get_nodes_batch(names) == [await graph.get_node(n) for n in names]
        assert await graph.node_degrees_batch(names) == [3, 0, 2]
        assert await graph.get_edges_batch(pairs) == [await graph.get_edge(a, b) for a, b in pairs]
        assert await graph.edge_degrees_batch(pairs) == [await graph.edge_degree(a, b) for a, b in pairs]
        assert [sorted(map(sorted, e)) for e in await graph.get_nodes_edges_batch(["D", "Z"])] == \
            [sorted(map(sorted, await graph.get_node_edges("D"))), []]
        assert await graph.count_nodes() == 6 and await graph.count_edges() == 5
        assert {n for n, _ in await graph.get_all_nodes()} == {"A", "B", "C", "D", "É 🌍", "LONE"}
        assert sorted(tuple(sorted((a, b))) for a, b, _ in await graph.get_all_edges()) == \
            [("A", "B"), ("A", "C"), ("B", "C"), ("C", "D"), ("D", "É 🌍")]
        adjacency = await graph.get_adjacency()
        assert set(adjacency["C"]) == {"A", "B", "D"} and adjacency["D"]["É 🌍"]["weight"] == 3.0
        assert dict(adjacency["LONE"]) == {}
        # Projections: only the named attributes a node or edge has, nothing for the others.
        full = dict(await graph.get_all_nodes())
        assert dict(await graph.get_nodes_attributes(("description", "absent"))) == \
            {n: {"description": d["description"]} if "description" in d else {} for n, d in full.items()}
        assert dict(await graph.get_nodes_attributes(())) == {n: {} for n in full}
        edges = {tuple(sorted((a, b))): d for a, b, d in await graph.get_all_edges()}
        assert {tuple(sorted((a, b))): d for a, b, d in await graph.get_edges_attributes(("weight",))} == \
            {k: {"weight": d["weight"]} if "weight" in d else {} for k, d in edges.items()}
    run(main())


def test_graph_upserts_merge_and_deletes(open_graph):
    async def main():
        graph = open_graph()
        await _seed_graph(graph)
        await graph.upsert_node("A", {"description": "new"})  # merges: entity_type stays
        assert (await graph.get_node("A"))["entity_type"] == "THING"
        assert (await graph.get_node("A"))["description"] == "new"
        await graph.upsert_edge("B", "A", {"weight": 5.0})
        assert (await graph.get_edge("A", "B"))["weight"] == 5.0 and await graph.count_edges() == 5
        await graph.delete_edge("C", "B")
        await graph.delete_edge("A", "Z")  # unknown: ignored
        assert not await graph.has_edge("B", "C")
        await graph.delete_node("D")
        await graph.delete_node("Z")
        assert not await graph.has_node("D") and not await graph.has_edge("C", "D")
        assert await graph.node_degree("É 🌍") == 0
        await commit(graph)
        again = open_graph()
        assert await again.count_nodes() == 5 and await again.count_edges() == 2
        assert (await again.get_node("A"))["description"] == "new"
        assert (await again.get_edge("B", "A"))["weight"] == 5.0
    run(main())


def test_graph_failed_transaction_leaves_previous_state(open_graph):
    async def main():
        graph = open_graph()
        await _seed_graph(graph)
        await commit(graph)
        doomed = open_graph()
        await doomed.index_start_callback()
        await doomed.delete_node("C")
        await doomed.upsert_node("NEW", {"description": "x"})
        await failed_commit(doomed)
        reopened = open_graph()
        assert await reopened.has_node("C") and not await reopened.has_node("NEW") and await reopened.count_edges() == 5
    run(main())


def test_graph_change_token_moves_with_every_committed_change(open_graph):
    """What a cache built from the graph keys on: a store read live reports a new token after
    each committed change (by any instance), the same one while nothing changes; a store that
    only changes for this process on reload may report None throughout."""
    async def main():
        graph = open_graph()
        await _seed_graph(graph)
        await commit(graph)
        reader = open_graph()
        first = await reader.change_token()
        assert await reader.change_token() == first
        writer = open_graph()
        await writer.index_start_callback()
        await writer.upsert_node("NEW", {"description": "x"})
        await commit(writer)
        second = await reader.change_token()
        if first is None:
            assert second is None
        else:
            assert second != first
            await commit(open_graph())  # a write that changed nothing
            assert await reader.change_token() == second
    run(main())


def test_graph_walk_links_are_every_node_with_its_chunks_and_every_edge(open_graph):
    """What the hybrid walk reads: the same in the writer, and reopened after the commit."""
    def normalised(links: Any) -> tuple[list, list]:
        nodes, edges = links
        return sorted(nodes), sorted(tuple(sorted(e)) for e in edges)

    async def main():
        graph = open_graph()
        await _seed_graph(graph)
        await graph.upsert_node("A", {"source_id": "chunk-1<SEP>chunk-2"})
        expected = ([(n, str(d.get("source_id") or "")) for n, d in sorted(await graph.get_all_nodes())],
                    sorted(tuple(sorted((a, b))) for a, b, _ in await graph.get_all_edges()))
        assert ("A", "chunk-1<SEP>chunk-2") in expected[0]
        assert normalised(await walk_links(graph)) == expected
        await commit(graph)
        assert normalised(await walk_links(open_graph())) == expected
        again = open_graph()
        await again.index_start_callback()
        await again.delete_node("A")
        await commit(again)
        nodes, edges = normalised(await walk_links(open_graph()))
        assert "A" not in dict(nodes) and not [e for e in edges if "A" in e] and len(nodes) == 5
    run(main())


def test_graph_declares_its_capabilities(open_graph):
    assert capabilities(open_graph()) == GRAPH_CAPABILITIES[open_graph.backend]


def test_graph_attributes_and_node_clusters(open_clustered_graph):
    open_graph = open_clustered_graph

    async def main():
        graph = open_graph()
        await _seed_graph(graph)
        await graph.set_graph_attribute("note", '{"a": 1}')
        assert await graph.get_graph_attribute("note") == '{"a": 1}' and await graph.get_graph_attribute("none") is None
        await graph.set_node_clusters({"A": '[{"level": 0, "cluster": 0}]', "B": '[{"level": 0, "cluster": 0}]'})
        await graph.set_node_clusters({"B": '[{"level": 0, "cluster": 1}]'})
        assert not (await graph.get_node("A")).get("clusters")  # every other node loses its own
        assert (await graph.get_node("B"))["clusters"] == '[{"level": 0, "cluster": 1}]'
        assert (await graph.get_node("B"))["entity_type"] == "THING"
        await commit(graph)
        again = open_graph()
        assert await again.get_graph_attribute("note") == '{"a": 1}'
        assert (await again.get_node("B"))["clusters"] == '[{"level": 0, "cluster": 1}]'
    run(main())


def test_graph_reads_around_nodes_and_membership_updates(open_clustered_graph):
    """What an incremental clustering reads (the nodes and edges around some nodes, the members
    of some communities, the highest community id) and writes (some nodes' memberships)."""
    open_graph = open_clustered_graph

    async def main():
        graph = open_graph()
        await _seed_graph(graph)
        assert await graph.node_with_highest_cluster() in (None, [])
        assert sorted(await graph.get_nodes_attributes_of(["D", "Z", "A"], ("source_id", "weight"))) == [
            ("A", {"source_id": "c-A"}), ("D", {"source_id": "c-D"})]
        edges = await graph.get_edges_at(["C", "Z", "D"], ("weight",))
        assert sorted(tuple(sorted((a, b))) + (d["weight"],) for a, b, d in edges) == [
            ("A", "C", 1.0), ("B", "C", 1.0), ("C", "D", 1.0), ("D", "É 🌍", 3.0)]
        paths = {"A": [0, 2], "B": [0, 3], "C": [1, 4], "D": [1, 4]}
        await graph.update_node_clusters({n: json.dumps([{"level": i, "cluster": c} for i, c in enumerate(p)])
                                          for n, p in paths.items()})
        await graph.update_node_clusters({"B": "", "A": json.dumps([{"level": 0, "cluster": 0}])})
        stored = {n: d.get("clusters") or "" for n, d in await graph.get_nodes_attributes(("clusters",))}
        assert {n: [c["cluster"] for c in json.loads(v)] for n, v in stored.items() if v} == {
            "A": [0], "C": [1, 4], "D": [1, 4]}
        found = {n for n, _ in await graph.nodes_in_clusters([4])}
        assert {"C", "D"} <= found and "LONE" not in found  # a superset may come, never a non-member
        assert {n for n, _ in await graph.nodes_in_clusters([2, 3])} <= {"A", "C", "D"}
        top = await graph.node_with_highest_cluster()
        assert top is None or [n for n, _ in top] in (["C"], ["D"])
        await commit(graph)  # the same reads from what is stored
        stored_graph = open_graph()
        found = {n for n, _ in await stored_graph.nodes_in_clusters([4])}
        assert {"C", "D"} <= found and not found & {"LONE", "B"}
        assert "A" in {n for n, _ in await stored_graph.nodes_in_clusters([0])}

    run(main())


def test_clustering_through_the_operator(open_clustered_graph):
    open_graph = open_clustered_graph

    async def main():
        graph = open_graph()
        assert await community_schema(graph) == {}
        await _seed_graph(graph)
        await cluster_graph(graph, "leiden")
        schema = await community_schema(graph)
        members = {n for c in schema.values() if c["level"] == 0 for n in c["nodes"]}
        assert members == {"A", "B", "C", "D", "É 🌍"}  # LONE has no edge: no community
        assert all(c["nodes"] and c["chunk_ids"] for c in schema.values())
        for c in schema.values():
            assert all(a in c["nodes"] and b in c["nodes"] and a <= b for a, b in c["edges"])
        # Deterministic, and the store methods run the same operator.
        await graph.clustering("leiden")
        assert await graph.community_schema() == schema
        await commit(graph)
        assert await community_schema(open_graph()) == schema

        # A node that loses its edges loses its community.
        await graph.delete_edge("D", "É 🌍")
        await cluster_graph(graph, "leiden", full=True)
        assert "É 🌍" not in {n for c in (await community_schema(graph)).values() for n in c["nodes"]}
        with pytest.raises(ValueError, match="unknown graph clustering algorithm"):
            await cluster_graph(graph, "louvain-ish")
    run(main())


# ---------------------------------------------------------------- a commit interrupted


def test_a_database_write_interrupted_before_it_applied_is_finished_or_judged(open_database):
    """``prepare_commit`` then a crash before ``index_commit_callback``: a store with a redo
    record finishes the write from it in a new instance (twice gives the same state); a store
    with a transaction reports that its stamped commit never happened."""
    async def write(store: Any) -> None:
        if isinstance(store, BaseGraphStorage):
            await store.upsert_nodes({"NEW": {"entity_type": "THING"}, "OTHER": {"entity_type": "THING"}})
            await store.upsert_edges({("NEW", "OTHER"): {"weight": 2.0}})
            await store.delete_node("LONE")
        else:
            await store.upsert({"id-new": {"content": "a new red apple", "name": "NEW"}})
            await store.delete(["id-4"])

    async def written(store: Any) -> bool:
        if isinstance(store, BaseGraphStorage):
            return (await store.get_edge("OTHER", "NEW") == {"weight": 2.0}
                    and await store.get_node("LONE") is None)
        ids = await store.get_ids()
        return "id-new" in ids and "id-4" not in ids

    async def main():
        seeded = open_database()
        await (_seed_graph(seeded) if isinstance(seeded, BaseGraphStorage) else _seed_vectors(seeded))
        await commit(seeded)
        store = open_database()
        await store.index_start_callback()
        await write(store)
        await store.index_done_callback()
        prepared = await store.prepare_commit("commit-1")
        await store.index_abort_callback()  # the process died before the write applied
        assert prepared is not None
        recovered = open_database()
        assert not await written(recovered)
        if prepared.redo is None:
            assert recovered.finish_commit("commit-1", None) is False
        else:
            assert recovered.finish_commit("commit-1", prepared.redo) is True
            assert await written(recovered)
            assert recovered.finish_commit("commit-1", prepared.redo) is True
            assert await written(open_database())
    run(main())


# ---------------------------------------------------------------- the contract itself


def test_a_class_with_only_nano_graphrags_methods_gets_the_defaults(config):
    """nano-graphrag's base set is all a class must implement; the rest falls back on it."""
    @dataclass
    class DictKV(BaseKVStorage):
        def __post_init__(self) -> None:
            self.data: dict[str, Any] = {}

        async def all_keys(self):
            return list(self.data)

        async def get_by_id(self, id):
            return self.data.get(id)

        async def upsert(self, data):
            self.data.update(data)

    async def main():
        store = DictKV(namespace="x", global_config=config)
        await store.upsert({"a": {"v": 1, "w": 2}})
        assert await store.get_by_ids(["a", "b"], fields={"v"}) == [{"v": 1}, None]
        assert await store.filter_keys(["a", "b"]) == {"b"} and await store.count() == 1
        assert store.options_for(read_by_record=True) == {} and store.reload_if_changed() is False
        await store.write_ahead()
        with pytest.raises(NotImplementedError, match="cannot delete"):
            await store.delete(["a"])
    run(main())
    with pytest.raises(TypeError):  # an abstract method missing
        type("Partial", (BaseKVStorage,), {"all_keys": DictKV.all_keys})(namespace="x", global_config=config)


def test_a_graph_with_the_core_contract_only_gets_batches_walk_links_and_no_engine_clustering(config):
    """The core contract: nano-graphrag's methods and the whole-graph lists; batches and the walk's
    links come from them. The engine's clustering needs ``ClusterMemberships`` declared, and
    then graph attributes only: the rest of the capability has defaults."""
    @dataclass
    class DictGraph(BaseGraphStorage):
        def __post_init__(self) -> None:
            self.nodes: dict[str, dict] = {}
            self.edges: dict[frozenset, dict] = {}
            self.writes = 0

        async def has_node(self, node_id):
            return node_id in self.nodes

        async def has_edge(self, a, b):
            return frozenset((a, b)) in self.edges

        async def node_degree(self, node_id):
            return sum(node_id in pair for pair in self.edges)

        async def get_node(self, node_id):
            return self.nodes.get(node_id)

        async def get_edge(self, a, b):
            return self.edges.get(frozenset((a, b)))

        async def get_node_edges(self, node_id):
            if node_id not in self.nodes:
                return None
            return [(node_id, next(iter(pair - {node_id}))) for pair in self.edges if node_id in pair]

        async def upsert_node(self, node_id, data):
            self.writes += 1
            self.nodes.setdefault(node_id, {}).update(data)

        async def upsert_edge(self, a, b, data):
            self.writes += 1
            self.edges.setdefault(frozenset((a, b)), {}).update(data)

        async def get_all_nodes(self):
            return list(self.nodes.items())

        async def get_all_edges(self):
            return [(*sorted(pair), data) for pair, data in self.edges.items()]

    @dataclass
    class ClusteredDictGraph(DictGraph, ClusterMemberships):
        def __post_init__(self) -> None:
            super().__post_init__()
            self.attributes: dict[str, str] = {}

        async def get_graph_attribute(self, name):
            return self.attributes.get(name)

        async def set_graph_attribute(self, name, value):
            self.attributes[name] = value

    async def main():
        graph = DictGraph(namespace="g", global_config=config)
        await graph.upsert_nodes({"A": {"source_id": "c1"}, "B": {}, "C": {"source_id": "c2"}})
        await graph.upsert_edges({("A", "B"): {"weight": 2.0}, ("C", "B"): {}})
        assert graph.writes == 5 and await graph.get_nodes_batch(["A", "Z"]) == [{"source_id": "c1"}, None]
        assert await graph.edge_degrees_batch([("A", "B")]) == [3]
        assert capabilities(graph) == frozenset()
        nodes, edges = await walk_links(graph)
        assert sorted(nodes) == [("A", "c1"), ("B", ""), ("C", "c2")]
        assert sorted(tuple(sorted(e)) for e in edges) == [("A", "B"), ("B", "C")]
        with pytest.raises(NotImplementedError, match="ClusterMemberships"):
            await graph.clustering()

        clustered = ClusteredDictGraph(namespace="g", global_config=config)
        assert capabilities(clustered) == {"graph_attributes", "cluster_memberships"}
        await _seed_graph(clustered)
        await clustered.clustering()
        schema = await clustered.community_schema()
        assert {n for c in schema.values() if c["level"] == 0 for n in c["nodes"]} == {"A", "B", "C", "D", "É 🌍"}
    run(main())
