"""Large components are updated in place: untouched communities stay exactly as they were."""
from __future__ import annotations

import asyncio
import json

import networkx as nx

from graphrag import GraphRAG, hash_embedding
from graphrag.config import GraphRAGConfig
from graphrag.storage import NetworkXStorage


def _store(tmp_path, **config) -> NetworkXStorage:
    return NetworkXStorage("g", GraphRAGConfig(working_dir=str(tmp_path), **config))


def _fill(store: NetworkXStorage, graph: nx.Graph) -> None:
    async def go():
        for a, b in graph.edges():
            await store.upsert_edge(str(a), str(b), {"weight": 1.0, "description": f"{a}-{b}", "source_id": "c"})
    asyncio.run(go())


def _paths(store: NetworkXStorage) -> dict[str, list[int]]:
    return {n: [c["cluster"] for c in json.loads(d["clusters"])]
            for n, d in store.graph.nodes(data=True) if d.get("clusters")}


def _membership(store: NetworkXStorage) -> set[tuple[int, frozenset]]:
    schema = asyncio.run(store.community_schema())
    return {(c["level"], frozenset(c["nodes"])) for c in schema.values()}


def _big_graph() -> nx.Graph:
    # 12 caves of 8 nodes joined in a ring: one component, several levels with max size 6.
    return nx.relabel_nodes(nx.connected_caveman_graph(12, 8), lambda n: f"N{n:03d}")


def test_new_leaf_changes_only_the_communities_it_joins_and_delete_restores(tmp_path):
    store = _store(tmp_path, exact_clustering_below=10, max_graph_cluster_size=10)
    _fill(store, _big_graph())
    asyncio.run(store.clustering("leiden"))
    before = _paths(store)
    before_schema = asyncio.run(store.community_schema())

    asyncio.run(store.upsert_edge("NEW", "N005", {"weight": 1.0, "description": "x", "source_id": "d"}))
    asyncio.run(store.clustering("leiden"))
    after = _paths(store)
    assert after["NEW"] == before["N005"]  # a lone new node joins its neighbour's communities
    assert {n: p for n, p in after.items() if n != "NEW"} == before  # nobody else moved
    after_schema = asyncio.run(store.community_schema())
    changed = {k for k in after_schema if after_schema[k]["nodes"] != before_schema.get(k, {}).get("nodes")}
    assert changed == {str(c) for c in before["N005"]}  # exactly its path, one community per level

    asyncio.run(store.delete_node("NEW"))
    asyncio.run(store.clustering("leiden"))
    assert _paths(store) == before


def test_overflowing_community_is_split_then_merged_back(tmp_path):
    store = _store(tmp_path, exact_clustering_below=10, max_graph_cluster_size=6)
    _fill(store, _big_graph())
    asyncio.run(store.clustering("leiden"))
    before = _paths(store)
    leaf = before["N005"]
    leaf_members = [n for n, p in before.items() if p == leaf]
    newcomers = [f"NEW{i}" for i in range(8)]
    for name in newcomers:  # each new node hangs off the same leaf community
        asyncio.run(store.upsert_edge(name, leaf_members[0], {"weight": 5.0, "description": "x", "source_id": "d"}))
    asyncio.run(store.clustering("leiden"))
    grown = _paths(store)
    group = [n for n, p in grown.items() if p[: len(leaf)] == leaf]
    assert len(group) > 6
    assert any(len(grown[n]) > len(leaf) for n in group), "an oversized community gets a deeper level"
    # The split must survive a save and reload (it is remembered in the GraphML file).
    asyncio.run(store.index_done_callback())
    store = _store(tmp_path, exact_clustering_below=10, max_graph_cluster_size=6)
    for name in newcomers:
        asyncio.run(store.delete_node(name))
    asyncio.run(store.clustering("leiden"))
    assert _paths(store) == before


def test_small_components_and_full_recluster_are_from_scratch(tmp_path):
    graph = _big_graph()
    graph.add_edge("NEW", "N005")
    fresh = _store(tmp_path / "fresh", max_graph_cluster_size=6)
    _fill(fresh, graph)
    asyncio.run(fresh.clustering("leiden"))

    grown = _store(tmp_path / "grown", exact_clustering_below=10, max_graph_cluster_size=6)
    _fill(grown, _big_graph())
    asyncio.run(grown.clustering("leiden"))
    asyncio.run(grown.upsert_edge("NEW", "N005", {"weight": 1.0, "description": "x", "source_id": "d"}))
    asyncio.run(grown.clustering("leiden", full=True))
    assert _membership(grown) == _membership(fresh)

    # Below the threshold, an update is clustered from scratch too.
    exact = _store(tmp_path / "exact", exact_clustering_below=10_000, max_graph_cluster_size=6)
    _fill(exact, _big_graph())
    asyncio.run(exact.clustering("leiden"))
    asyncio.run(exact.upsert_edge("NEW", "N005", {"weight": 1.0, "description": "x", "source_id": "d"}))
    asyncio.run(exact.clustering("leiden"))
    assert _membership(exact) == _membership(fresh)


DOCS = {
    "a": "Ada Lorne runs the Kestrel Mill in Farrow Vale. Ada Lorne hired Ben Ortiz at the Kestrel Mill. "
         "Ben Ortiz repairs looms for the Kestrel Mill. Cora Tamsin sells cloth from the Kestrel Mill in Farrow Vale.",
    "b": "Ben Ortiz met Dov Hale at the Farrow Vale market. Dov Hale owns the Hale Tannery. "
         "Eli Varga supplies the Hale Tannery with bark.",
    "c": "Fen Okoro leads the Vale Choir. Cora Tamsin sings in the Vale Choir with Fen Okoro.",
}


def _state(rag: GraphRAG):
    graph = rag.stores.graph.graph
    schema = asyncio.run(rag.stores.graph.community_schema())
    return (
        {n: (d["entity_type"], d["description"], d["source_id"]) for n, d in graph.nodes(data=True)},
        {tuple(sorted(e)): (d["weight"], d["description"]) for *e, d in graph.edges(data=True)},
        {(c["level"], frozenset(c["nodes"])) for c in schema.values()},
    )


def test_insert_then_delete_restores_state_with_in_place_clustering(tmp_path):
    options = dict(extraction="nlp", embedding_func=hash_embedding(32), exact_clustering_below=2,
                   max_graph_cluster_size=4, chunk_token_size=60, chunk_overlap_token_size=10)
    alone = GraphRAG(working_dir=str(tmp_path / "alone"), **options)
    alone.insert([DOCS["a"], DOCS["c"]])

    rag = GraphRAG(working_dir=str(tmp_path / "grown"), **options)
    rag.insert([DOCS["a"], DOCS["c"]])
    stats = rag.insert(DOCS["b"])
    assert 0 < stats["reports_generated"] < stats["communities"]  # only the communities B changed
    b_id = next(d["id"] for d in rag.list_documents() if "Hale Tannery" in rag.stores.full_docs._data[d["id"]]["content"])
    rag.delete_documents(b_id)
    assert _state(rag) == _state(alone)

    rag.insert(DOCS["b"])
    grown_again = _state(rag)
    rag.delete_documents(b_id)
    rag.insert(DOCS["b"])
    assert _state(rag) == grown_again


def test_recluster_rebuilds_from_scratch(tmp_path):
    options = dict(extraction="nlp", embedding_func=hash_embedding(32), exact_clustering_below=2,
                   max_graph_cluster_size=4, chunk_token_size=60, chunk_overlap_token_size=10)
    joint = GraphRAG(working_dir=str(tmp_path / "joint"), **{**options, "exact_clustering_below": 10**6})
    joint.insert(list(DOCS.values()))
    rag = GraphRAG(working_dir=str(tmp_path / "grown"), **options)
    for doc in DOCS.values():
        rag.insert(doc)
    result = rag.recluster()
    assert result["communities"] == len(rag.stores.community_reports._data)
    assert _state(rag)[2] == _state(joint)[2]
