"""The three stores: round trips through their files, lifecycle callbacks, clustering."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import networkx as nx
import pytest

from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.storage import (
    EmbeddingDimensionError,
    NanoVectorDBStorage,
    NetworkXStorage,
)


from helpers_storage import graph, kv, run  # noqa: E402


def vdb(config, dim=16, namespace="entities", **kw) -> NanoVectorDBStorage:
    return NanoVectorDBStorage(
        namespace=namespace, global_config=config, embedding_func=hash_embedding(dim),
        meta_fields={"entity_name", "kind"}, **kw,
    )


def listing(path) -> list[str]:
    return sorted(os.listdir(path))


# ---------------------------------------------------------------- key-value


def test_kv_round_trip_through_a_fresh_instance(config, tmp_path):
    async def main():
        store = kv(config)
        await store.upsert({"a": {"content": "alpha", "n": 1}, "b": {"content": "beta", "n": 2}})
        await store.upsert({"c": {"content": "gamma", "n": 3}})
        await store.index_done_callback()

        again = kv(config)
        assert sorted(await again.all_keys()) == ["a", "b", "c"]
        assert await again.get_by_id("b") == {"content": "beta", "n": 2}
        assert await again.get_by_id("zzz") is None
        assert await again.get_by_ids(["c", "missing", "a"]) == [
            {"content": "gamma", "n": 3}, None, {"content": "alpha", "n": 1}]
        assert await again.get_by_ids(["a", "nope"], fields={"n"}) == [{"n": 1}, None]
        assert await again.filter_keys(["a", "x", "c", "y"]) == {"x", "y"}

        await again.upsert({"a": {"content": "ALPHA", "n": 10}})
        await again.delete(["b", "never-there"])
        await again.index_done_callback()

        third = kv(config)
        assert sorted(await third.all_keys()) == ["a", "c"]
        assert await third.get_by_id("a") == {"content": "ALPHA", "n": 10}
        assert len(third) == 2

        await third.drop()
        await third.index_done_callback()
        assert await kv(config).all_keys() == []
        with open(tmp_path / "kv_store_docs.json") as f:
            assert json.load(f) == {}

    run(main())


def test_kv_nothing_written_before_index_done(config, tmp_path):
    async def main():
        store = kv(config)
        await store.upsert({"a": {"x": 1}})
        await store.query_done_callback()
        assert listing(tmp_path) == []
        assert await kv(config).all_keys() == []
        await store.index_done_callback()
        assert listing(tmp_path) == ["kv_store_docs.json"]

    run(main())


def test_kv_index_start_reloads_what_another_instance_wrote(config):
    async def main():
        mine = kv(config)
        await mine.upsert({"k": {"v": "1111"}})
        await mine.index_done_callback()

        other = kv(config)  # "another process"
        # Same length on purpose: a reload must not depend on the file size changing.
        await other.upsert({"k": {"v": "2222"}})
        await other.index_done_callback()

        assert await mine.get_by_id("k") == {"v": "1111"}  # no magic reload mid-operation
        await mine.index_start_callback()
        assert await mine.get_by_id("k") == {"v": "2222"}
        await mine.query_done_callback()
        assert await mine.get_by_id("k") == {"v": "2222"}

    run(main())


def test_kv_query_done_is_harmless(config, tmp_path):
    async def main():
        store = kv(config)
        await store.upsert({"a": {"x": 1}})
        await store.index_done_callback()
        before = (tmp_path / "kv_store_docs.json").read_bytes()
        await store.query_done_callback()
        await store.query_done_callback()
        assert (tmp_path / "kv_store_docs.json").read_bytes() == before
        assert await store.get_by_id("a") == {"x": 1}

    run(main())


# ---------------------------------------------------------------- vectors


def test_vector_round_trip_query_threshold_delete(config, tmp_path):
    async def main():
        store = vdb(config)
        data = {
            "ent-apple": {"content": "apple fruit red sweet", "entity_name": "APPLE", "kind": "fruit", "extra": 1},
            "ent-car": {"content": "car engine wheels road", "entity_name": "CAR", "kind": "vehicle"},
            "ent-pear": {"content": "pear fruit green", "entity_name": "PEAR", "kind": "fruit"},
        }
        await store.upsert(data)
        assert listing(tmp_path) == []  # nothing before index_done
        await store.index_done_callback()
        assert listing(tmp_path) == ["vdb_entities.json"]

        again = vdb(config, cosine_better_than_threshold=-1.0)
        assert len(again) == 3
        assert await again.get_ids() == {"ent-apple", "ent-car", "ent-pear"}
        results = await again.query("apple fruit red sweet", top_k=3)
        assert results[0]["id"] == "ent-apple"
        assert results[0]["entity_name"] == "APPLE" and results[0]["kind"] == "fruit"
        assert "extra" not in results[0] and "content" not in results[0]  # only meta fields
        assert results[0]["distance"] == pytest.approx(1.0, abs=1e-5)
        assert all(isinstance(r["distance"], float) for r in results)
        distances = [r["distance"] for r in results]
        assert distances == sorted(distances, reverse=True)
        assert not any(k.startswith("__") for r in results for k in r)

        strict = vdb(config, cosine_better_than_threshold=0.99)
        strict_results = await strict.query("apple fruit red sweet", top_k=3)
        assert [r["id"] for r in strict_results] == ["ent-apple"]
        assert await strict.query("apple", top_k=0) == []

        await again.delete(["ent-apple"])
        await again.index_done_callback()
        third = vdb(config, cosine_better_than_threshold=-1.0)
        assert await third.get_ids() == {"ent-car", "ent-pear"}
        assert "ent-apple" not in [r["id"] for r in await third.query("apple fruit red sweet", top_k=5)]

    run(main())


_BLAS_DURING_SEARCH = """
import asyncio, json, sys
from nano_vectordb import NanoVectorDB
from threadpoolctl import threadpool_info
from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.storage import NanoVectorDBStorage

def blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

during = []
search = NanoVectorDB.query

def recording(self, *args, **kwargs):
    during.append(blas_threads())
    return search(self, *args, **kwargs)

NanoVectorDB.query = recording

async def main():
    store = NanoVectorDBStorage(namespace="entities", global_config=GraphRAGConfig(working_dir=sys.argv[1]),
                                embedding_func=hash_embedding(16), meta_fields={"entity_name"},
                                cosine_better_than_threshold=-1.0)
    await store.upsert({f"id-{i}": {"content": f"item {i} word{i % 7}", "entity_name": f"E{i}"} for i in range(50)})
    before = blas_threads()
    hits = await store.query("item 3 word3", top_k=5)
    print(json.dumps({"best": hits[0]["id"], "before": before, "during": during, "after": blas_threads()}))

asyncio.run(main())
"""


def test_vector_search_runs_blas_on_one_thread_and_restores_the_limit(tmp_path):
    """A search is one matrix-vector product: OpenBLAS's threads would cost more CPU than they save
    and make the scores depend on the core count; the process's own limit is back afterwards.
    (In a fresh interpreter: every BLAS loaded before the first search is limited, and other
    tests load more.)"""
    out = subprocess.run([sys.executable, "-c", _BLAS_DURING_SEARCH, str(tmp_path)], capture_output=True, text=True,
                         timeout=120, check=True)
    seen = json.loads(out.stdout)
    assert seen["best"] == "id-3"
    assert seen["during"] and seen["during"][-1] and all(n == 1 for n in seen["during"][-1])
    assert seen["after"] == seen["before"]


def test_vector_threshold_from_config_kwargs(tmp_path):
    config = GraphRAGConfig(working_dir=str(tmp_path),
                            vector_db_storage_cls_kwargs={"query_better_than_threshold": 0.7})
    assert vdb(config).cosine_better_than_threshold == 0.7
    assert vdb(GraphRAGConfig(working_dir=str(tmp_path / "x"), query_better_than_threshold=0.3)
               ).cosine_better_than_threshold == 0.3


def test_vector_upsert_does_not_mutate_callers_dicts(config):
    async def main():
        store = vdb(config)
        record = {"content": "hello there", "entity_name": "HELLO", "kind": "greeting"}
        data = {"id-1": record}
        snapshot = json.loads(json.dumps(data))
        await store.upsert(data)
        assert data == snapshot and data["id-1"] is record
        await store.upsert(data)  # an update goes through another path in nano-vectordb
        assert data == snapshot
        await store.index_done_callback()
        assert data == snapshot

    run(main())


def test_vector_index_start_reloads_other_writer(config):
    async def main():
        mine = vdb(config, cosine_better_than_threshold=-1.0)
        await mine.upsert({"a": {"content": "first thing", "entity_name": "A"}})
        await mine.index_done_callback()
        other = vdb(config)
        await other.upsert({"b": {"content": "second thing", "entity_name": "B"}})
        await other.index_done_callback()
        assert await mine.get_ids() == {"a"}
        await mine.index_start_callback()
        assert await mine.get_ids() == {"a", "b"}
        await mine.query_done_callback()
        assert len(mine) == 2

    run(main())


def test_vector_dimension_mismatch_names_file_and_dimensions(config, tmp_path):
    async def main():
        store = vdb(config, dim=16)
        await store.upsert({"a": {"content": "some words"}})
        await store.index_done_callback()

    run(main())
    path = tmp_path / "vdb_entities.json"
    before = path.read_bytes()
    with pytest.raises(EmbeddingDimensionError) as info:
        vdb(config, dim=32)
    message = str(info.value)
    assert str(path) in message
    assert "16" in message and "32" in message
    assert path.read_bytes() == before


def test_vector_store_leaves_root_logger_alone(tmp_path):
    script = textwrap.dedent(
        f"""
        import asyncio, logging
        from graphrag.config import GraphRAGConfig
        from graphrag.embedding import hash_embedding
        from graphrag.storage import NanoVectorDBStorage

        async def main():
            s = NanoVectorDBStorage(namespace="x", global_config=GraphRAGConfig(working_dir={str(tmp_path)!r}),
                                    embedding_func=hash_embedding(8))
            await s.upsert({{"a": {{"content": "hello world"}}}})
            await s.index_done_callback()
            s2 = NanoVectorDBStorage(namespace="x", global_config=GraphRAGConfig(working_dir={str(tmp_path)!r}),
                                     embedding_func=hash_embedding(8))
            await s2.query("hello", top_k=1)

        asyncio.run(main())
        root = logging.getLogger()
        print(repr((len(root.handlers), root.level)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == repr((0, 30))  # no handlers, WARNING as Python sets it
    assert "INFO" not in out.stderr


# ---------------------------------------------------------------- graph


def test_graph_round_trip_through_graphml(config, tmp_path):
    async def main():
        g = graph(config)
        await g.upsert_node("A", {"entity_type": "person", "description": "a", "source_id": "c1"})
        await g.upsert_node("B", {"entity_type": "org", "description": "b", "source_id": "c1<SEP>c2"})
        await g.upsert_node("C", {"entity_type": "geo", "description": "c", "source_id": "c2"})
        await g.upsert_node("D", {"entity_type": "geo", "description": "d", "source_id": "c3"})
        await g.upsert_edge("A", "B", {"weight": 2.5, "description": "ab", "source_id": "c1"})
        await g.upsert_edge("B", "C", {"weight": 1.0, "description": "bc", "source_id": "c2"})
        assert listing(tmp_path) == []
        await g.index_done_callback()
        assert listing(tmp_path) == ["graph_chunk_entity_relation.graphml",
                                     "graph_chunk_entity_relation.graphml.index",
                                     "graph_chunk_entity_relation.graphml.walk"]

        again = graph(config)
        assert await again.has_node("A") and not await again.has_node("Z")
        assert await again.has_edge("A", "B") and await again.has_edge("B", "A")
        assert not await again.has_edge("A", "C")
        assert await again.get_node("B") == {"entity_type": "org", "description": "b", "source_id": "c1<SEP>c2"}
        assert await again.get_node("Z") is None
        assert await again.get_edge("B", "A") == {"weight": 2.5, "description": "ab", "source_id": "c1"}
        assert await again.get_edge("A", "D") is None
        assert await again.node_degree("B") == 2
        assert await again.node_degree("D") == 0
        assert await again.node_degree("Z") == 0
        assert await again.edge_degree("A", "B") == 3
        assert sorted(await again.get_node_edges("B")) == [("B", "A"), ("B", "C")]
        assert await again.get_node_edges("D") == []
        assert await again.get_node_edges("Z") is None
        assert [n and n["description"] for n in await again.get_nodes_batch(["A", "Z", "C"])] == ["a", None, "c"]
        assert [e and e["description"] for e in await again.get_edges_batch([("A", "B"), ("A", "C")])] == ["ab", None]
        assert await again.node_degrees_batch(["A", "B", "Z"]) == [1, 2, 0]
        assert await again.edge_degrees_batch([("A", "B"), ("C", "D")]) == [3, 1]
        edges = await again.get_nodes_edges_batch(["A", "Z"])
        assert edges[0] == [("A", "B")] and edges[1] == []

        await again.delete_node("B")
        await again.delete_edge("C", "D")  # absent edge: no error
        await again.index_done_callback()
        third = graph(config)
        assert sorted(third.graph.nodes) == ["A", "C", "D"]
        assert third.graph.number_of_edges() == 0
        assert await third.node_degree("A") == 0

    run(main())


def _as_networkx_reads_it(path) -> nx.Graph:
    return nx.Graph(nx.read_graphml(path))


def _same_graph(ours: nx.Graph, reference: nx.Graph) -> None:
    """Same nodes, edges, attributes and neighbour order (the order clustering sees)."""
    assert list(ours.nodes(data=True)) == list(reference.nodes(data=True))
    assert list(ours.edges(data=True)) == list(reference.edges(data=True))
    assert [list(ours.adj[n]) for n in ours] == [list(reference.adj[n]) for n in reference]
    assert ours.graph == reference.graph


def test_fast_graphml_reader_reads_what_networkx_reads(tmp_path, monkeypatch):
    """Files from our writer and from networkx's (nano-graphrag's format) read exactly as
    networkx reads them; what the fast path does not handle goes to networkx."""
    from graphrag.storage.graphml import read_graphml, write_graphml

    g = nx.Graph()
    g.graph["note"] = "made by hand"
    for i in range(30):
        g.add_node(f"N{(i * 7) % 30}", entity_type="PERSON", description="" if i == 3 else f"d{i} é <&>",
                   rank=i, score=i / 3, core=i % 2 == 0)
    for i in range(60):  # edges in an order unrelated to the node order
        a, b = f"N{(i * 11) % 30}", f"N{(i * 13 + 5) % 30}"
        if a != b:
            g.add_edge(a, b, weight=float(i), description=f"e{i}", order=1)
    g.add_edge("N1", "LATE", weight=1.0)  # an endpoint declared after the others
    ours, theirs = tmp_path / "ours.graphml", tmp_path / "theirs.graphml"
    write_graphml(g, str(ours))
    nx.write_graphml(g, str(theirs))
    fallbacks: list[str] = []
    real_reader = nx.read_graphml
    monkeypatch.setattr(nx, "read_graphml", lambda path, **kw: fallbacks.append(path) or real_reader(path, **kw))
    for path in (ours, theirs):
        _same_graph(read_graphml(str(path)), _as_networkx_reads_it(path))

    # Edges written before their nodes, a key default, and an empty string attribute.
    body = ours.read_text(encoding="utf-8")  # one element per line
    head, rest = body.split("<graph ", 1)
    graph_open, rest = rest.split(">", 1)
    elements = [line for line in rest.splitlines() if line.strip().startswith(("<node", "<edge"))]
    shuffled = [e for e in elements if "<edge" in e] + [e for e in elements if "<node" in e]
    head = head.replace('attr.type="double" />', 'attr.type="double"><default>0.5</default></key>', 1)
    reordered = tmp_path / "reordered.graphml"
    assert "<default>" in head
    reordered.write_text(head + "<graph " + graph_open + ">\n" + "\n".join(shuffled) + "\n</graph></graphml>\n",
                         encoding="utf-8")
    _same_graph(read_graphml(str(reordered)), _as_networkx_reads_it(reordered))
    assert len(fallbacks) == 3  # only the reference reads: the fast path read all three itself

    # Directed graphs and parallel edges are networkx's to read.
    directed = tmp_path / "directed.graphml"
    nx.write_graphml(nx.DiGraph([("A", "B"), ("B", "A")]), str(directed))
    assert sorted(read_graphml(str(directed)).edges) == [("A", "B")]
    parallel = tmp_path / "parallel.graphml"
    multi = nx.MultiGraph()
    multi.add_edge("A", "B", weight=1.0)
    multi.add_edge("A", "B", weight=2.0)
    nx.write_graphml(multi, str(parallel))
    _same_graph(read_graphml(str(parallel)), _as_networkx_reads_it(parallel))
    assert [str(p) for p in fallbacks[3:]] == [str(directed), str(parallel), str(parallel)]


def test_graph_index_start_reloads_other_writer(config):
    async def main():
        mine = graph(config)
        await mine.upsert_node("A", {"description": "x"})
        await mine.index_done_callback()
        other = graph(config)
        await other.upsert_node("B", {"description": "y"})
        await other.index_done_callback()
        assert not await mine.has_node("B")
        await mine.index_start_callback()
        assert await mine.has_node("A") and await mine.has_node("B")
        await mine.query_done_callback()
        assert mine.graph.number_of_nodes() == 2

    run(main())


def test_graphml_with_control_characters_saves_and_loads(config):
    bad_id = "ACME\x00\x01 CORP\x0b\ufffe\uffff\x1f"
    async def main():
        g = graph(config)
        await g.upsert_node(bad_id, {"description": "line\x00one\x08\x0c two\ufffe", "source_id": "c\x01"})
        await g.upsert_node("OTHER\x02", {"description": "plain"})
        await g.upsert_edge(bad_id, "OTHER\x02", {"description": "rel\x03", "weight": 1.0})
        await g.index_done_callback()

        again = graph(config)
        assert await again.has_node(bad_id)  # lookups clean the id the same way
        assert await again.has_node("ACME CORP")
        node = await again.get_node(bad_id)
        assert node["description"] == "lineone two"
        assert node["source_id"] == "c"
        assert await again.has_edge("ACME CORP", "OTHER")
        assert (await again.get_edge(bad_id, "OTHER\x02"))["description"] == "rel"
        # Tabs, newlines and ordinary unicode survive untouched.
        await again.upsert_node("tab\tnew\nline é 中", {"description": "keep\r\n\ttabs"})
        await again.index_done_callback()
        assert (await graph(config).get_node("tab\tnew\nline é 中"))["description"] in ("keep\r\n\ttabs", "keep\n\ttabs")

    run(main())


# ---------------------------------------------------------------- clustering


def levels_of(schema: dict) -> dict[int, dict[str, dict]]:
    out: dict[int, dict[str, dict]] = {}
    for key, c in schema.items():
        out.setdefault(c["level"], {})[key] = c
    return out


async def build(config, g: nx.Graph, namespace="g") -> NetworkXStorage:
    store = graph(config, namespace)
    for n in g.nodes:
        await store.upsert_node(str(n), {"source_id": f"chunk-{n}"})
    for a, b in g.edges:
        await store.upsert_edge(str(a), str(b), {"weight": 1.0})
    return store


def components_graph() -> nx.Graph:
    g = nx.Graph()
    g.add_edges_from(nx.complete_graph(6).edges)  # nodes 0..5
    g.add_edges_from([(10, 11), (11, 12), (12, 10)])  # triangle
    g.add_edge(20, 21)  # a pair
    g.add_node(30)  # isolated
    g.add_node(31)  # isolated
    return nx.relabel_nodes(g, {n: f"n{n}" for n in g.nodes})


def test_every_component_with_two_nodes_gets_a_level0_community(config):
    async def main():
        store = await build(config, components_graph())
        await store.clustering("leiden")
        schema = await store.community_schema()
        level0 = levels_of(schema)[0]
        covered = {n for c in level0.values() for n in c["nodes"]}
        assert {"n20", "n21", "n10", "n11", "n12"} <= covered
        assert {f"n{i}" for i in range(6)} <= covered
        assert "n30" not in covered and "n31" not in covered
        assert all(n not in c["nodes"] for c in schema.values() for n in ("n30", "n31"))
        # Communities never span components.
        component_of = {n: i for i, comp in enumerate(nx.connected_components(components_graph())) for n in comp}
        for c in schema.values():
            assert len({component_of[n] for n in c["nodes"]}) == 1, c["nodes"]
        pair = [c for c in level0.values() if "n20" in c["nodes"]]
        assert len(pair) == 1 and pair[0]["nodes"] == ["n20", "n21"]
        assert pair[0]["edges"] == [["n20", "n21"]]
        assert pair[0]["chunk_ids"] == ["chunk-n20", "chunk-n21"]
        for c in schema.values():
            assert 0 < c["occurrence"] <= 1
            assert c["title"]
        # Persisted: a fresh instance sees the same communities.
        await store.index_done_callback()
        assert await graph(config, "g").community_schema() == schema

    run(main())


def test_clustering_empty_graph_and_unknown_algorithm(config):
    async def main():
        store = graph(config, "empty")
        await store.clustering("leiden")
        assert await store.community_schema() == {}
        with pytest.raises(ValueError):
            await store.clustering("louvain-ish")
        lonely = graph(config, "lonely")
        await lonely.upsert_node("only", {})
        await lonely.clustering("leiden")
        assert await lonely.community_schema() == {}

    run(main())


def layered_graph() -> nx.Graph:
    """36 nodes that Leiden splits over several levels at max cluster size 4.

    (Cliques are useless here: Leiden cannot split a clique, whatever its size.)
    """
    g = nx.grid_2d_graph(6, 6)
    return nx.relabel_nodes(g, {n: f"v{n[0]}{n[1]}" for n in g.nodes})


def test_clustering_is_deterministic(tmp_path):
    async def main():
        schemas = []
        for name in ("one", "two"):
            config = GraphRAGConfig(working_dir=str(tmp_path / name), max_graph_cluster_size=4)
            store = await build(config, layered_graph())
            await store.clustering("leiden")
            schemas.append(await store.community_schema())
        assert schemas[0] == schemas[1]
        assert schemas[0]

    run(main())


def test_hierarchy_is_consistent(tmp_path):
    async def main():
        config = GraphRAGConfig(working_dir=str(tmp_path), max_graph_cluster_size=4)
        store = await build(config, layered_graph())
        await store.clustering("leiden")
        schema = await store.community_schema()
        levels = levels_of(schema)
        assert len(levels) >= 2, "a 36-node graph with max cluster size 4 must have sub-levels"
        for level, communities in levels.items():
            # Communities of one level do not overlap.
            seen: set[str] = set()
            for c in communities.values():
                assert not seen & set(c["nodes"])
                seen |= set(c["nodes"])
            below = levels.get(level + 1, {})
            for key, c in communities.items():
                nodes = set(c["nodes"])
                expected = {k for k, sub in below.items() if set(sub["nodes"]) <= nodes}
                assert set(c["sub_communities"]) == expected, (key, level)
                for sub in c["sub_communities"]:
                    assert schema[sub]["level"] == level + 1
                    assert set(schema[sub]["nodes"]) <= nodes
            # Every community below a level has exactly one parent.
            for key, sub in below.items():
                parents = [k for k, c in communities.items() if set(sub["nodes"]) <= set(c["nodes"])]
                assert len(parents) == 1 and key in communities[parents[0]]["sub_communities"]
        # Level 0 covers every node of this connected graph.
        assert set().union(*(c["nodes"] for c in levels[0].values())) == set(layered_graph().nodes)

    run(main())


def test_community_ids_are_stable(tmp_path):
    async def main():
        config = GraphRAGConfig(working_dir=str(tmp_path), max_graph_cluster_size=4)
        store = await build(config, layered_graph())
        await store.clustering("leiden")
        first = await store.community_schema()
        await store.index_done_callback()

        # Unchanged graph, re-clustered (also after a reload): same ids, same members.
        reloaded = graph(config, "g")
        await reloaded.clustering("leiden")
        assert await reloaded.community_schema() == first

        # A separate new component leaves the old communities exactly as they were.
        extra = nx.relabel_nodes(nx.complete_graph(5), {i: f"new{i}" for i in range(5)})
        for n in extra.nodes:
            await reloaded.upsert_node(n, {"source_id": f"chunk-{n}"})
        for a, b in extra.edges:
            await reloaded.upsert_edge(a, b, {"weight": 1.0})
        await reloaded.clustering("leiden")
        after = await reloaded.community_schema()
        for key, c in first.items():
            assert key in after
            assert after[key]["nodes"] == c["nodes"] and after[key]["level"] == c["level"]
            assert after[key]["sub_communities"] == c["sub_communities"]
        new_keys = set(after) - set(first)
        assert new_keys
        assert all(set(after[k]["nodes"]) <= set(extra.nodes) for k in new_keys)
        assert min(int(k) for k in new_keys) > max(int(k) for k in first)

    run(main())


def test_reload_noticed_even_when_mtime_and_size_are_unchanged(config, tmp_path):
    """Coarse file-system clocks: another writer's same-size file may carry the same mtime."""
    async def main():
        mine = kv(config)
        await mine.upsert({"k": {"v": "1111"}})
        await mine.index_done_callback()
        path = tmp_path / "kv_store_docs.json"
        old = os.stat(path)

        other = kv(config)
        await other.upsert({"k": {"v": "2222"}})
        await other.index_done_callback()
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))  # same tick of a coarse clock
        assert os.stat(path).st_size == old.st_size

        await mine.index_start_callback()
        assert await mine.get_by_id("k") == {"v": "2222"}

    run(main())


def test_a_storage_class_written_for_nano_graphrag_works_unchanged(tmp_path):
    """nano-graphrag hands storages their config as a dict: a KV class that reads
    ``global_config["working_dir"]`` and ``global_config["addon_params"]`` serves every KV
    namespace, through an insert, a reopen and every query mode."""
    from dataclasses import dataclass

    from graphrag import GraphRAG, QueryParam
    from graphrag.storage import BaseKVStorage

    @dataclass
    class DictFileKV(BaseKVStorage):
        def __post_init__(self) -> None:
            self._file = os.path.join(self.global_config["working_dir"], f"dictkv_{self.namespace}.json")
            self._data = json.load(open(self._file)) if os.path.exists(self._file) else {}
            self.prefix = self.global_config["addon_params"].get("prefix", "")
            assert "working_dir" in self.global_config and self.global_config.get("no_such_key", 7) == 7

        async def all_keys(self):
            return list(self._data)

        async def get_by_id(self, id):
            return self._data.get(id)

        async def get_by_ids(self, ids, fields=None):
            rows = [self._data.get(i) for i in ids]
            return [{k: v for k, v in r.items() if k in fields} if r and fields else r for r in rows]

        async def filter_keys(self, data):
            return {k for k in data if k not in self._data}

        async def upsert(self, data):
            self._data.update(data)

        async def delete(self, ids):
            for i in ids:
                self._data.pop(i, None)

        async def index_done_callback(self):
            with open(self._file, "w") as f:
                json.dump(self._data, f)

    story = ("Mara Quill founded the Lantern Guild in the harbour town of Vessel Bay. "
             "Mara Quill later married Tobias Fern, a shipwright from Vessel Bay.")

    def open_rag() -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=hash_embedding(64),
                        enable_naive_rag=True, key_string_value_json_storage_cls=DictFileKV,
                        addon_params={"prefix": "x"})

    stats = open_rag().insert([story])
    assert stats["documents_inserted"] == 1 and stats["communities"] >= 1
    assert (tmp_path / "dictkv_full_docs.json").exists() and not (tmp_path / "kv_store_full_docs.json").exists()
    reopened = open_rag()
    for mode in ("local", "global", "naive"):
        assert "MARA QUILL" in reopened.query("Who founded the guild?", QueryParam(mode=mode)).upper(), mode
    with pytest.raises(KeyError):
        reopened.config["no_such_key"]


def test_hash_embedding_of_a_short_text_stays_on_the_callers_thread(monkeypatch):
    """A question is embedded at once (a thread hand-off costs more); a long batch goes to a
    worker thread. The vectors are the same either way."""
    import asyncio

    import numpy as np

    import graphrag.embedding as embedding

    handed_off = []
    to_thread = asyncio.to_thread

    async def counting(fn, *args):
        handed_off.append(len(args[0]))
        return await to_thread(fn, *args)

    monkeypatch.setattr(embedding.asyncio, "to_thread", counting)
    embed = hash_embedding(32)
    short = run(embed.func(["Who wrote the novel?"]))
    long_batch = ["Who wrote the novel?"] + ["word " * 100] * 10
    many = run(embed.func(long_batch))
    assert handed_off == [len(long_batch)]
    assert np.array_equal(short[0], many[0]) and short.shape == (1, 32)


def test_a_text_the_embedder_gives_no_direction_matches_nothing(config):
    """A hashing embedder gives a text without words (punctuation only) a zero vector, whose
    cosine similarity is undefined: nano-vectordb scores it NaN and ranks it first for every
    question. It is left out of every answer, and a question without words matches nothing."""
    async def main():
        store = vdb(config)
        await store.upsert({"id-a": {"content": "Brightwater Instruments makes compasses"},
                            "id-z": {"content": "!!! ... ???"}, "id-b": {"content": "Pellham hosts a fair"}})
        found = await store.query("Brightwater compasses", top_k=5)
        assert [r["id"] for r in found][:1] == ["id-a"] and "id-z" not in [r["id"] for r in found]
        assert all(r["distance"] == r["distance"] for r in found)  # no NaN
        assert await store.query("?", top_k=5) == []
    run(main())
