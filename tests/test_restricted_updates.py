"""An insert or delete reads again only what it touched, and ends exactly where reading everything does.

Two indexes take the same random sequence of inserts and deletes: one as the pipeline runs
(the report stage told which nodes the write touched), the other with that knowledge withheld,
so every community is read and fingerprinted. After each step their memberships and reports
must be identical, on files and on PostgreSQL (which writes only the memberships that changed).
"""
from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.operators import clustering, clustering_nearby, community_reports
from graphrag.operators.chunking import doc_id_for
from graphrag.operators.community_index import largest_community, with_occurrence
from graphrag.operators.graph_update import GraphRebuild

fingerprint = community_reports.community_fingerprint
paths_near = clustering_nearby.paths_near
community_schema = clustering.community_schema

PEOPLE = ["Marin Okafor", "Jonas Velt", "Oriel Banks", "Priya Sandoval", "Teo Marsh", "Nadia Farrow",
          "Ilse Brandt", "Kofi Mensah", "Lena Duarte", "Ravi Kumar", "Sofia Lind", "Abel Quint"]
PLACES = ["Port Halden", "Brightwater", "Greystone Ridge", "Lumen Hall", "Crestfield University",
          "Tidewater Labs", "Ashgrove Orchestra", "Kestrel Reserve"]
ALL_POSTGRES = {"kv_storage": "postgres", "vector_storage": "pgvector", "graph_storage": "postgres"}


def _documents(seed: int, count: int) -> list[str]:
    """Short documents over shared names, so components grow, merge and split as they come and go."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        sentences = []
        for _ in range(rng.randint(2, 4)):
            a, b = rng.sample(PEOPLE, 2)
            sentences.append(f"{a} met {b} at {rng.choice(PLACES)}.")
        sentences.append(f"Document {i} was written by {rng.choice(PEOPLE)}.")
        docs.append(" ".join(sentences))
    return docs


def _state(rag: GraphRAG, normalised: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    async def read():
        stores = rag.stores
        nodes = await stores.graph.get_nodes_attributes(("clusters",))
        keys = await stores.community_reports.all_keys()
        largest = await largest_community(stores.index_meta) if normalised else None
        # A stored occurrence is as of its report's write; readers divide by the largest community.
        reports = {k: with_occurrence(r, largest) for k, r in zip(keys, await stores.community_reports.get_by_ids(keys))}
        return {n: d.get("clusters") or "" for n, d in nodes}, reports

    return asyncio.run(read())


@pytest.mark.parametrize("mode,backend", [("nlp", "files"), ("llm", "files"), ("nlp", "postgres")])
@pytest.mark.parametrize("seed", [1, 2])
def test_touched_only_equals_everything_read(mode, backend, seed, tmp_path, server, request, monkeypatch):
    def make(name: str) -> GraphRAG:
        settings: dict[str, Any] = dict(working_dir=str(tmp_path / name), embedding_func=hash_embedding(64),
                                        extraction=mode, show_progress=False, exact_clustering_below=6,
                                        max_graph_cluster_size=4)
        if mode == "llm":
            settings.update(llm_base_url=server.base_url, llm_api_key="k")
        if backend == "postgres":
            options = request.getfixturevalue("postgres_options")
            settings.update(ALL_POSTGRES, storage_options={**options, "workspace": f"{options['workspace']}_{name}"})
        return GraphRAG(**settings)

    restricted, everything = make("restricted"), make("everything")
    fingerprinted = {False: 0, True: 0}
    outcomes: list[bool] = []  # per restricted clustering: did it settle without the whole graph?
    # Per restricted clustering of a write that deleted nodes while communities were split: did it settle?
    deleting_split: list[bool] = []
    schemas: list[bool] = []  # per restricted community schema: were only the changed communities read?

    def apply(step) -> None:
        for rag, withheld in ((restricted, False), (everything, True)):
            with monkeypatch.context() as patch:
                if withheld:
                    patch.setattr(GraphRebuild, "touched", property(lambda self: None))

                def counted(*args, **kwargs):
                    fingerprinted[withheld] += 1
                    return fingerprint(*args, **kwargs)

                async def near(graph, touched, split_parents, **kwargs):
                    found = await graph.get_nodes_attributes_of(sorted(touched), ())
                    deleting = bool(split_parents) and len(found) < len(touched)
                    changes = await paths_near(graph, touched, split_parents, **kwargs)
                    outcomes.append(changes is not None)
                    if deleting:
                        deleting_split.append(changes is not None)
                    return changes

                async def schema(graph, only=None):
                    if not withheld:
                        schemas.append(only is not None)
                    return await community_schema(graph, only)

                patch.setattr(community_reports, "community_fingerprint", counted)
                patch.setattr(clustering, "paths_near", near)
                patch.setattr(clustering, "community_schema", schema)
                step(rag)

    rng = random.Random(seed)
    docs = _documents(seed, 14)
    present: list[str] = []
    apply(lambda rag: rag.insert(docs[:4]))
    present += docs[:4]
    waiting = docs[4:]
    for _ in range(7):
        if waiting and (not present or rng.random() < 0.6):
            new = [waiting.pop(0) for _ in range(min(len(waiting), rng.randint(1, 2)))]
            apply(lambda rag: rag.insert(new))
            present += new
        else:
            gone = rng.choice(present)
            present.remove(gone)
            apply(lambda rag: rag.delete_documents([doc_id_for(gone.strip())]))
        memberships, reports = _state(restricted)
        assert any(memberships.values()) and reports
        assert (memberships, reports) == _state(everything)
    # The restricted run did skip communities and the whole graph (else this test would
    # compare a path with itself).
    assert 0 < fingerprinted[False] < fingerprinted[True]
    assert sum(outcomes) >= len(outcomes) // 2, outcomes
    # Every write after the first (which has no community index yet) reads only the changed
    # communities' schema, also one whose clustering had to read the whole graph.
    assert schemas[1:] and all(schemas[1:]), schemas
    if seed == 1:  # this sequence deletes nodes while communities are split (twice in each mode)
        # Settled around the touched nodes where no split community falls back to its size
        # before the split; with NLP extraction one does (it merges back): the whole graph is read.
        assert any(deleting_split), deleting_split
        if mode == "nlp":
            assert not all(deleting_split), deleting_split


# ---------------------------------------------------------------- the graph stores alone


def _graph_stores(kind: str, tmp_path, request) -> list:
    """Two graph stores of one config (on PostgreSQL, one workspace and one write)."""
    from graphrag.config import GraphRAGConfig
    from graphrag.storage import NetworkXStorage
    from graphrag.storage.graph_postgres import PostgresGraphStorage

    settings: dict[str, Any] = dict(working_dir=str(tmp_path), exact_clustering_below=8, max_graph_cluster_size=4)
    if kind == "postgres":
        config = GraphRAGConfig(**settings, storage_options=request.getfixturevalue("postgres_options"))
        return [PostgresGraphStorage(namespace=ns, global_config=config) for ns in ("near", "whole")]
    config = GraphRAGConfig(**settings)
    return [NetworkXStorage(ns, config) for ns in ("near", "whole")]


@pytest.mark.parametrize("kind", ["networkx", "postgres"])
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_clustering_near_touched_nodes_equals_whole_graph(kind, seed, tmp_path, request):
    """Random edits (new nodes hanging off a large component, edges joining components, nodes
    and edges deleted); after each, clustering told the touched nodes and clustering that reads
    everything give the same memberships and split communities."""
    from graphrag.operators.clustering import SPLIT_ATTRIBUTE, cluster_graph, community_ids

    rng = random.Random(seed)
    near, whole = _graph_stores(kind, tmp_path, request)
    settled = settled_deleting_split = 0

    async def both(method: str, *args) -> None:
        for store in (near, whole):
            await getattr(store, method)(*args)

    async def edge(a: str, b: str) -> None:
        for node in (a, b):
            await both("upsert_node", node, {"entity_type": "thing"})
        await both("upsert_edge", a, b, {"weight": float(rng.choice([1, 1, 2, 3])), "description": "x"})

    async def state(store) -> tuple:
        nodes = await store.get_nodes_attributes(("clusters",))
        return {n: d.get("clusters") or "" for n, d in nodes}, await store.get_graph_attribute(SPLIT_ATTRIBUTE)

    async def go() -> None:
        nonlocal settled, settled_deleting_split
        # A large component (caves joined in a ring) and a few small ones.
        for cave in range(8):
            members = [f"c{cave}_{i}" for i in range(5)]
            for i, a in enumerate(members):
                for b in members[i + 1:]:
                    await edge(a, b)
            await edge(members[0], f"c{(cave + 1) % 8}_1")
        for small in range(4):
            await edge(f"s{small}_a", f"s{small}_b")
            await edge(f"s{small}_b", f"s{small}_c")
        await both("clustering", "leiden")
        for step in range(30):
            names = sorted(n for n, _ in await whole.get_nodes_attributes(()))
            before = await near.get_nodes_attributes(("clusters",))
            touched: set[str] = set()
            for _ in range(rng.randint(1, 3)):
                roll = rng.random()
                if roll < 0.45:  # a new node (or a few, linked) joins an existing one
                    new = [f"n{step}_{i}" for i in range(rng.choice([1, 1, 2, 3]))]
                    anchor = rng.choice(names)
                    for node in new:
                        await edge(node, anchor if rng.random() < 0.7 else new[0])
                        touched |= {node, anchor, new[0]}
                    for a, b in zip(new, new[1:]):
                        await edge(a, b)
                elif roll < 0.65:
                    a, b = rng.sample(names, 2)
                    await edge(a, b)
                    touched |= {a, b}
                elif roll < 0.85:
                    node = rng.choice(names)
                    touched |= {node} | {b for _, b in await whole.get_node_edges(node) or []}
                    await both("delete_node", node)
                else:
                    a = rng.choice(names)
                    ends = await whole.get_node_edges(a) or []
                    if ends:
                        b = rng.choice(ends)[1]
                        await both("delete_edge", a, b)
                        touched |= {a, b}
            await cluster_graph(whole, "leiden")
            were_in = community_ids((n, d) for n, d in before if n in touched)
            splits = {int(k): v for k, v in json.loads(await near.get_graph_attribute(SPLIT_ATTRIBUTE) or "{}").items()}
            changes = await clustering_nearby.paths_near(
                near, set(touched), dict(splits), max_cluster_size=4, seed=near.global_config.graph_cluster_seed,
                exact_below=8, were_in=were_in)
            settled += changes is not None
            deleted = len(await near.get_nodes_attributes_of(sorted(touched), ())) < len(touched)
            settled_deleting_split += changes is not None and deleted and bool(splits)
            await cluster_graph(near, "leiden", touched=touched, were_in=were_in)
            assert await state(near) == await state(whole), f"step {step}"
        await near.index_abort_callback()
        await near.close()

    asyncio.run(go())
    assert settled >= 15  # most edits were settled around the touched nodes
    if seed == 3:  # some deleted nodes while communities were split, and still settled nearby
        assert settled_deleting_split > 0


# Names no other document has: its insert leaves every other community untouched.
ELSEWHERE = "Wren Halloway met Quill Ostrander at Vesper Moor. Quill Ostrander painted Vesper Moor."


def test_fingerprints_of_another_version_are_all_redone(tmp_path, monkeypatch):
    """After a fingerprint version bump every stored fingerprint is stale: an insert redoes
    every community, with the touched nodes known or not."""
    docs = _documents(7, 5)
    rags = {}
    for name in ("restricted", "everything"):
        rags[name] = GraphRAG(working_dir=str(tmp_path / name), embedding_func=hash_embedding(64), extraction="nlp",
                              show_progress=False)
        rags[name].insert(docs)
    before = {r["fingerprint"] for r in _state(rags["restricted"])[1].values()}
    monkeypatch.setattr(community_reports, "_FINGERPRINT_VERSION", community_reports._FINGERPRINT_VERSION + 1)
    with monkeypatch.context() as patch:
        patch.setattr(GraphRebuild, "touched", property(lambda self: None))
        rags["everything"].insert(ELSEWHERE)
    rags["restricted"].insert(ELSEWHERE)
    memberships, reports = _state(rags["restricted"])
    assert (memberships, reports) == _state(rags["everything"])
    assert not before & {r["fingerprint"] for r in reports.values()}  # none of the old version is left


def test_a_dir_without_the_community_index_reads_every_community_once(tmp_path):
    """A working dir written before community sizes were recorded: readers take the occurrence
    stored in each report, and the next write reads every community once and records them."""
    import json

    from graphrag.operators.community_index import RECORD

    rag = GraphRAG(working_dir=str(tmp_path / "wd"), embedding_func=hash_embedding(64), extraction="nlp",
                   show_progress=False)
    rag.insert(_documents(5, 6))
    meta_file = tmp_path / "wd" / "kv_store_index_meta.json"
    meta = json.loads(meta_file.read_text())
    sizes = meta.pop(RECORD)["sizes"]
    meta_file.write_text(json.dumps(meta))
    reopened = GraphRAG(working_dir=str(tmp_path / "wd"), embedding_func=hash_embedding(64), extraction="nlp",
                        show_progress=False)
    retrieval = reopened.retrieve("Who met Kofi Mensah?", QueryParam(mode="global"))
    stored = {k: r["occurrence"] for k, r in _state(reopened, normalised=False)[1].items()}
    assert retrieval.reports and all(r.community.occurrence == stored[r.community.id] for r in retrieval.reports)

    read: list = []

    async def schema(graph, only=None):
        read.append(only)
        return await community_schema(graph, only)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(clustering, "community_schema", schema)
        reopened.insert(ELSEWHERE)
    assert None in read  # every community read
    recorded = json.loads(meta_file.read_text())[RECORD]["sizes"]
    assert set(recorded) == set(_state(reopened)[1]) and set(sizes) <= set(recorded)


def test_an_llm_write_tries_again_every_report_no_llm_wrote(tmp_path):
    """Reports an LLM did not write (fallbacks after unreadable answers) are tried again by the
    next LLM write, in communities it did not change too, without reading every community."""
    from mock_llm_server import MockLLMServer, detect_kind, realistic_responder

    def no_json(req: dict) -> str:
        if detect_kind(req) in ("report", "report_repair"):
            return "Sorry, no JSON today {maybe"
        return realistic_responder(req)

    def open_index(server: MockLLMServer) -> GraphRAG:
        # Uncached: the cache would answer the same prompts with the same unreadable answers.
        return GraphRAG(working_dir=str(tmp_path / "wd"), embedding_func=hash_embedding(64), show_progress=False,
                        llm_base_url=server.base_url, llm_api_key="k", enable_llm_cache=False)

    with MockLLMServer(responder=no_json) as server:
        open_index(server).insert(_documents(11, 5))
    sources = {r["report_source"] for r in _state(open_index(MockLLMServer()), normalised=False)[1].values()}
    assert sources == {"fallback"}
    read: list = []

    async def schema(graph, only=None):
        read.append(only)
        return await community_schema(graph, only)

    with MockLLMServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setattr(clustering, "community_schema", schema)
        open_index(server).insert(ELSEWHERE)
    reports = _state(open_index(MockLLMServer()), normalised=False)[1]
    # The new write's own community is a whole component of 3 entities: reported from its records.
    assert {k: r["report_source"] for k, r in reports.items() if r["report_source"] != "llm"} == {
        k: "small_component" for k, r in reports.items() if "WREN HALLOWAY" in r["nodes"]}
    assert read and None not in read  # found through the index, not by reading every community


def test_changed_clustering_settings_recluster_what_was_not_touched(tmp_path, monkeypatch):
    """Memberships made under other settings are not kept because a write did not touch them:
    the first write under new settings gives what reading the whole graph gives."""
    docs = _documents(3, 8)

    def open_index(name: str, **settings: Any) -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path / name), embedding_func=hash_embedding(64), extraction="nlp",
                        show_progress=False, **settings)

    for name in ("restricted", "everything"):
        open_index(name, exact_clustering_below=6, max_graph_cluster_size=4).insert(docs)
    before = _state(open_index("restricted"))[0]
    changed = dict(exact_clustering_below=100, graph_cluster_seed=12345)
    with monkeypatch.context() as patch:
        patch.setattr(GraphRebuild, "touched", property(lambda self: None))
        open_index("everything", **changed).insert(ELSEWHERE)
    open_index("restricted", **changed).insert(ELSEWHERE)
    memberships, reports = _state(open_index("restricted"))
    assert (memberships, reports) == _state(open_index("everything"))
    untouched = {n for n in before if n in memberships and before[n] and memberships[n] != before[n]}
    assert untouched  # the new settings did move nodes the write left alone
