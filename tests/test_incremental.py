"""Incremental maintenance, end to end: insert, update, delete and what each one costs.

LLM-mode tests talk to the local mock server over real HTTP so extraction and report
calls can be counted; the state invariants also run with ``extraction="nlp"``.
"""
from __future__ import annotations

import glob
import json
import os
from collections import Counter, defaultdict
from typing import Any

import networkx as nx
import pytest
from filelock import FileLock

from graphrag import GraphRAG, hash_embedding
from graphrag.errors import WorkingDirLockedError
from graphrag.schema import GRAPH_FIELD_SEP

# A small made-up corpus. Marin Okafor, Crestfield University, Port Halden and
# Priya Sandoval appear in several documents, so those entities have several sources;
# DOC_D bridges the harbour group (A, B) with the music group (C); DOC_E stands alone.
DOC_A = (
    "Marin Okafor founded Tidewater Labs in Port Halden. "
    "Tidewater Labs builds tidal turbines for the Halden Harbour Authority. "
    "In 2019, Marin Okafor studied engineering at Crestfield University."
)
DOC_B = (
    "Last spring, Crestfield University hired Jonas Velt to lead its marine program. "
    "Jonas Velt designed turbine blades with Marin Okafor. "
    "The city of Port Halden hosted the Velt Symposium, where Jonas Velt met Oriel Banks."
)
DOC_C = (
    "The Ashgrove Orchestra performed at Lumen Hall. "
    "On its northern tour, Priya Sandoval conducted the Ashgrove Orchestra. "
    "Lumen Hall stands in Brightwater beside the Ambry Canal."
)
DOC_D = (
    "Last year, Priya Sandoval recorded an album with Teo Marsh. "
    "Teo Marsh grew up in Brightwater and later taught music at Crestfield University."
)
DOC_E = (
    "Farrow Mining opened a quarry near Greystone Ridge. "
    "Greystone Ridge is home to the Kestrel Reserve, which Nadia Farrow manages."
)
CORPUS = [DOC_A, DOC_B, DOC_C, DOC_D]

GRAPH_FILE = "graph_chunk_entity_relation.graphml"
# "llm-summaries": a summary budget so small that entities with several sources get summarised.
MODES = ["llm", "nlp", "llm-summaries"]


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def make_rag(server, tmp_path):
    """``make_rag(name, mode)``: a GraphRAG on its own working dir under tmp_path."""

    def make(name: str = "wd", mode: str = "llm", **overrides: Any) -> GraphRAG:
        if mode == "llm-summaries":
            mode, overrides = "llm", {"entity_summary_to_max_tokens": 30, **overrides}
        settings: dict[str, Any] = dict(
            working_dir=str(tmp_path / name), embedding_func=hash_embedding(64), extraction=mode,
            show_progress=False, lock_timeout=5,
        )
        if mode == "llm":
            settings.update(llm_base_url=server.base_url, llm_api_key="k")
        settings.update(overrides)
        return GraphRAG(**settings)

    server.reset()
    return make


def doc_id(rag: GraphRAG, content: str) -> str:
    ids = [d["id"] for d in rag.list_documents()]
    from graphrag.operators.chunking import doc_id_for

    wanted = doc_id_for(content.strip())
    assert wanted in ids, f"{wanted} not indexed: {ids}"
    return wanted


def load_graph(rag: GraphRAG) -> nx.Graph:
    path = os.path.join(rag.config.working_dir, GRAPH_FILE)
    return nx.read_graphml(path) if os.path.exists(path) else nx.Graph()


def load_kv(rag: GraphRAG, namespace: str) -> dict[str, Any]:
    path = os.path.join(rag.config.working_dir, f"kv_store_{namespace}.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def mentions(graph: nx.Graph, word: str) -> bool:
    """Whether some entity's name holds ``word`` (the NLP extractor may shorten names)."""
    return any(word in str(n) for n in graph.nodes)


def membership(graph: nx.Graph) -> dict[int, set[frozenset[str]]]:
    """Per level, the set of communities as node sets (ids ignored)."""
    groups: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for node, data in graph.nodes(data=True):
        for c in json.loads(data.get("clusters") or "[]"):
            groups[c["level"]][c["cluster"]].add(node)
    return {level: {frozenset(m) for m in by_id.values()} for level, by_id in groups.items()}


def snapshot(rag: GraphRAG) -> dict[str, Any]:
    """Everything a fresh index of the same documents must reproduce, read from disk."""
    graph = load_graph(rag)
    nodes = {
        n: (d.get("entity_type"), d.get("description"), tuple(sorted(str(d.get("source_id")).split(GRAPH_FIELD_SEP))))
        for n, d in graph.nodes(data=True)
    }
    edges = {
        tuple(sorted((a, b))): (float(d.get("weight")), d.get("description"),
                                tuple(sorted(str(d.get("source_id")).split(GRAPH_FIELD_SEP))))
        for a, b, d in graph.edges(data=True)
    }
    reports = load_kv(rag, "community_reports")
    return {
        "docs": sorted(load_kv(rag, "full_docs")),
        "chunks": sorted(load_kv(rag, "text_chunks")),
        "extractions": sorted(load_kv(rag, "chunk_extractions")),
        "nodes": nodes,
        "edges": edges,
        "membership": membership(graph),
        # Which report each community has (a model's, or one from its records) is the graph's too.
        "report_fingerprints": Counter((r["fingerprint"], r["report_source"]) for r in reports.values()),
    }


def fingerprints_by_id(rag: GraphRAG) -> dict[str, str]:
    return {k: v["fingerprint"] for k, v in load_kv(rag, "community_reports").items()}


def dir_bytes(rag: GraphRAG) -> dict[str, bytes]:
    """Every committed store file (the lock file and cache journal are not state)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(rag.config.working_dir, "*"))):
        name = os.path.basename(path)
        if os.path.isfile(path) and not name.startswith(".") and "llm_response_cache" not in name:
            with open(path, "rb") as fh:
                out[name] = fh.read()
    return out


# --------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("mode", MODES)
def test_insert_then_delete_equals_never_inserted(make_rag, server, mode):
    fresh = make_rag("fresh", mode)
    fresh.insert(DOC_A)

    rag = make_rag("churn", mode)
    rag.insert(DOC_A)
    rag.insert(DOC_B)
    sources = [len(str(d["source_id"]).split(GRAPH_FIELD_SEP)) for _, d in load_graph(rag).nodes(data=True)]
    assert max(sources) == 2, "the corpus must give some entities two sources"
    server.reset()
    stats = rag.delete_documents(doc_id(rag, DOC_B))
    assert stats["documents_removed"] == 1 and stats["chunks_removed"] == 1
    # Deleting re-reads recorded extractions; summaries and reports of what is left were
    # paid for when A was indexed alone, so the cache serves them.
    assert sum(server.calls_by_kind.values()) == 0, dict(server.calls_by_kind)

    got, want = snapshot(rag), snapshot(fresh)
    assert set(got["nodes"]) == set(want["nodes"])
    assert got == want


@pytest.mark.parametrize("mode", MODES)
def test_delete_then_reinsert_restores_state_without_extraction(make_rag, server, mode):
    rag = make_rag("wd", mode)
    rag.insert(CORPUS)
    before = snapshot(rag)
    b = doc_id(rag, DOC_B)

    rag.delete_documents(b)
    assert snapshot(rag) != before
    server.reset()
    rag.insert(DOC_B)
    assert snapshot(rag) == before
    # Extraction answers, and reports for communities that came back as they were,
    # are served from the LLM response cache.
    assert server.calls_by_kind["extraction"] == 0
    assert server.calls_by_kind["gleaning_continue"] == 0
    assert sum(server.calls_by_kind.values()) == 0, dict(server.calls_by_kind)


@pytest.mark.parametrize("mode", MODES)
def test_delete_is_order_independent(make_rag, mode):
    """Deleting B from {A, B, C, D} gives what indexing {A, C, D} gives."""
    fresh = make_rag("fresh", mode)
    fresh.insert([DOC_A, DOC_C, DOC_D])
    rag = make_rag("churn", mode)
    rag.insert(DOC_D)
    rag.insert([DOC_B, DOC_C])
    rag.insert(DOC_A)
    rag.delete_documents(doc_id(rag, DOC_B))
    assert snapshot(rag) == snapshot(fresh)


# --------------------------------------------------------------------------- cost of a change


def test_one_document_add_reports_only_changed_communities(make_rag, server):
    rag = make_rag("wd", "llm")
    rag.insert(CORPUS)
    before = fingerprints_by_id(rag)
    assert len(before) >= 4

    server.reset()
    new_doc = "Oriel Banks sailed from Port Halden to Saltmere aboard the Wren."
    stats = rag.insert(new_doc)
    after = fingerprints_by_id(rag)

    chunks = stats["chunks_inserted"]
    assert chunks == 1
    assert server.calls_by_kind["extraction"] == chunks
    gleaning = rag.config.entity_extract_max_gleaning
    assert server.calls_by_kind["gleaning_continue"] == chunks * gleaning
    assert server.calls_by_kind["gleaning_check"] == chunks * max(gleaning - 1, 0)

    changed = [cid for cid, fp in after.items() if fp not in set(before.values())]
    assert 0 < len(changed) < len(after)
    assert server.calls_by_kind["report"] == len(changed) == stats["reports_generated"]
    # Everything else kept its id and report.
    for cid, fp in after.items():
        if cid not in changed:
            assert before.get(cid) == fp
    assert server.calls_by_kind["summary"] == 0


def test_unrelated_document_keeps_existing_community_ids_and_reports(make_rag, server):
    rag = make_rag("wd", "llm")
    rag.insert(CORPUS)
    before = load_kv(rag, "community_reports")

    server.reset()
    rag.insert(DOC_E)
    after = load_kv(rag, "community_reports")
    for cid, record in before.items():
        assert cid in after, f"community {cid} lost its id"
        assert after[cid]["fingerprint"] == record["fingerprint"]
        assert after[cid]["report_json"] == record["report_json"]
        assert sorted(after[cid]["nodes"]) == sorted(record["nodes"])
    added = set(after) - set(before)
    assert added, "the new component must get communities of its own"
    e_nodes = {"FARROW MINING", "GREYSTONE RIDGE"}
    for cid in added:
        assert set(after[cid]["nodes"]) & e_nodes
    # A community that is its whole component, of at most small_component_max_entities
    # entities, is reported from its records; the others by the model.
    graph = load_graph(rag)
    small = {cid for cid in added
             if len(after[cid]["nodes"]) <= rag.config.small_component_max_entities
             and nx.node_connected_component(graph, after[cid]["nodes"][0]) == set(after[cid]["nodes"])}
    assert small and {cid for cid in added if after[cid]["report_source"] == "small_component"} == small
    assert server.calls_by_kind["report"] == len(added) - len(small)

    # With the rule off, every new community goes to the model.
    server.reset()
    off = make_rag("off", "llm", small_component_max_entities=0)
    off.insert([*CORPUS, DOC_E])
    assert {r["report_source"] for r in load_kv(off, "community_reports").values()} == {"llm"}
    assert server.calls_by_kind["report"] == len(after)


@pytest.mark.parametrize("mode", MODES)
def test_same_source_new_content_is_an_update(make_rag, tmp_path, mode):
    rag = make_rag("wd", mode)
    rag.insert(DOC_A)
    path = str(tmp_path / "notes.txt")
    old = "Quentin Rook opened the Bellmoor Bakery in Port Halden. Quentin Rook sold rye to Hanna Voss."
    new = "Hanna Voss took over the Bellmoor Bakery. Hanna Voss moved it to Saltmere."
    rag.insert(old, sources=[path])
    old_chunks = set(load_kv(rag, "text_chunks"))
    assert mentions(load_graph(rag), "ROOK")

    stats = rag.insert(new, sources=[path])
    assert stats["documents_removed"] == 1 and stats["documents_inserted"] == 1
    docs = rag.list_documents()
    assert [d["source"] for d in docs].count(path) == 1
    assert {d["id"] for d in docs if d["source"] == path} == {doc_id(rag, new)}
    chunks = set(load_kv(rag, "text_chunks"))
    gone = old_chunks - chunks
    assert gone and not gone & set(load_kv(rag, "chunk_extractions"))
    graph = load_graph(rag)
    assert not mentions(graph, "ROOK")  # only the old version mentioned him
    assert mentions(graph, "VOSS") and mentions(graph, "SALTMERE") and mentions(graph, "TIDEWATER")
    assert not any(set(str(d["source_id"]).split(GRAPH_FIELD_SEP)) & gone for _, d in graph.nodes(data=True))

    fresh = make_rag("fresh", mode)
    fresh.insert([DOC_A, new], sources=[None, path])
    assert snapshot(rag) == snapshot(fresh)


# --------------------------------------------------------------------------- listing and deleting


@pytest.mark.parametrize("mode", MODES)
def test_list_and_delete_unknown_and_delete_everything(make_rag, mode):
    rag = make_rag("wd", mode)
    rag.insert([DOC_A, DOC_C], sources=["a.txt", "c.txt"])
    listed = rag.list_documents()
    assert sorted(d["source"] for d in listed) == ["a.txt", "c.txt"]
    assert {d["id"] for d in listed} == {doc_id(rag, DOC_A), doc_id(rag, DOC_C)}
    assert all(d["chunks"] >= 1 and d["chars"] > 0 for d in listed)

    files = dir_bytes(rag)
    with pytest.raises(KeyError, match="unknown document id.*doc-nope"):
        rag.delete_documents(["doc-nope", doc_id(rag, DOC_A)])
    assert dir_bytes(rag) == files
    assert len(rag.list_documents()) == 2

    rag.delete_documents([d["id"] for d in listed])
    assert rag.list_documents() == []
    for path in glob.glob(os.path.join(rag.config.working_dir, "*.json")):
        with open(path, encoding="utf-8") as fh:
            json.load(fh)
    assert load_graph(rag).number_of_nodes() == 0
    assert load_kv(rag, "community_reports") == {}
    assert load_kv(rag, "text_chunks") == {} and load_kv(rag, "chunk_extractions") == {}

    reopened = make_rag("wd", mode)
    assert reopened.list_documents() == []
    reopened.insert(DOC_E)
    assert mentions(load_graph(reopened), "GREYSTONE")
    assert load_kv(reopened, "community_reports")


# --------------------------------------------------------------------------- locking and crashes


def test_delete_waits_for_the_writer_lock(make_rag):
    rag = make_rag("wd", "nlp", lock_timeout=0.3)
    rag.insert(DOC_A)
    files = dir_bytes(rag)
    lock = FileLock(os.path.join(rag.config.working_dir, ".graphrag.lock"))
    with lock:
        with pytest.raises(WorkingDirLockedError):
            rag.delete_documents(doc_id(rag, DOC_A))
    assert dir_bytes(rag) == files
    rag.delete_documents(doc_id(rag, DOC_A))
    assert rag.list_documents() == []


@pytest.mark.parametrize("mode", MODES)
def test_failed_delete_leaves_previous_state(make_rag, monkeypatch, mode):
    rag = make_rag("wd", mode)
    rag.insert(CORPUS)
    files = dir_bytes(rag)
    before = snapshot(rag)

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("clustering exploded")

    monkeypatch.setattr(rag.stores.graph, "clustering", boom)
    with pytest.raises(RuntimeError, match="exploded"):
        rag.delete_documents(doc_id(rag, DOC_B))
    assert dir_bytes(rag) == files
    assert snapshot(make_rag("wd", mode)) == before
    assert len(rag.list_documents()) == len(CORPUS)

    # The same instance recovers (its stores were reloaded) and the delete then works.
    rag.delete_documents(doc_id(rag, DOC_B))
    assert len(rag.list_documents()) == len(CORPUS) - 1


def test_a_name_left_only_as_a_relations_end_keeps_its_node_and_edge_after_a_delete(make_rag, server):
    """A name whose only entity record was in a deleted document, still the end of a relation
    a kept document states (a model gave it no entity line there), keeps a node built from
    that relation and the relation's edge: the graph of an index never given the document."""
    from mock_llm_server import records_responder

    kept = "Ilse Varga restored the organ of Saint Oda; the organ is a Hessler instrument."
    deleted = "The Hessler workshop in Linz built organs until 1911."
    passages = {
        "Ilse Varga": ['("entity"<|>"ILSE VARGA"<|>"PERSON"<|>"Ilse Varga is an organ restorer.")',
                       '("relationship"<|>"HESSLER"<|>"ORGAN OF SAINT ODA"<|>"Hessler built the organ."<|>6)',
                       '("relationship"<|>"ILSE VARGA"<|>"ORGAN OF SAINT ODA"<|>"She restored the organ."<|>7)'],
        "Hessler workshop": ['("entity"<|>"HESSLER"<|>"ORGANIZATION"<|>"Hessler is an organ workshop in Linz.")',
                             '("entity"<|>"LINZ"<|>"GEO"<|>"Linz is a city.")',
                             '("relationship"<|>"HESSLER"<|>"LINZ"<|>"The workshop stood in Linz."<|>5)'],
    }
    responder = server.responder
    server.responder = records_responder(passages)
    try:
        fresh = make_rag("fresh", entity_resolution=False)
        fresh.insert(kept)
        rag = make_rag("churn", entity_resolution=False)
        rag.insert([kept, deleted])
        assert load_graph(rag).nodes["HESSLER"]["entity_type"] == "ORGANIZATION"
        rag.delete_documents(doc_id(rag, deleted))
        graph = load_graph(rag)
        assert graph.has_edge("HESSLER", "ORGAN OF SAINT ODA") and "LINZ" not in graph
        got, want = snapshot(rag), snapshot(fresh)
        assert got["nodes"] == want["nodes"] and got["edges"] == want["edges"]
    finally:
        server.responder = responder
