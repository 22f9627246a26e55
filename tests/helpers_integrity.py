"""Cross-store consistency check for a working dir, reading the files directly.

``check_integrity(working_dir)`` returns a list of human-readable problems; an empty
list means every store file parses and the stores agree with each other. It opens a
``GraphRAG`` on the dir first (unless ``recover=False``), which rolls forward a commit
a killed writer left, exactly as a user's next open would.
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional

import networkx as nx

from graphrag.schema import GRAPH_FIELD_SEP
from graphrag.storage.files import MANIFEST_NAME, TMP_MARKER

KV_FILES = {
    "full_docs": "kv_store_full_docs.json",
    "text_chunks": "kv_store_text_chunks.json",
    "chunk_extractions": "kv_store_chunk_extractions.json",
    "community_reports": "kv_store_community_reports.json",
    "llm_response_cache": "kv_store_llm_response_cache.json",
    "lexical_index": "kv_store_lexical_index.json",
}
VDB_FILES = {"entities": "vdb_entities.json", "chunks": "vdb_chunks.json", "relations": "vdb_relations.json"}
GRAPH_FILE = "graph_chunk_entity_relation.graphml"
JOURNAL_FILE = "kv_store_llm_response_cache.journal.jsonl"


def entity_vector_id(name: str) -> str:
    from graphrag.operators.chunking import compute_id

    return compute_id(name, "ent-")


def _ids(value: Any) -> list[str]:
    return [v for v in str(value or "").split(GRAPH_FIELD_SEP) if v]


def _load_json(path: str, problems: list[str]) -> Optional[Any]:
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError) as exc:
        problems.append(f"{os.path.basename(path)} does not parse: {exc}")
        return None


def load_state(working_dir: str) -> dict[str, Any]:
    """Every store file, parsed (missing files as empty); raises on an unparsable file."""
    problems: list[str] = []
    state: dict[str, Any] = {}
    for key, name in KV_FILES.items():
        state[key] = _load_json(os.path.join(working_dir, name), problems) or {}
    for key, name in VDB_FILES.items():
        data = _load_json(os.path.join(working_dir, name), problems) or {}
        state[f"vdb_{key}"] = data
    graph_path = os.path.join(working_dir, GRAPH_FILE)
    state["graph"] = nx.Graph()
    if os.path.exists(graph_path):
        try:
            state["graph"] = nx.read_graphml(graph_path)
        except Exception as exc:  # noqa: BLE001 - any parse failure is a finding
            problems.append(f"{GRAPH_FILE} does not parse: {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return state


def _lookup_index_problems(graph_path: str, graph: nx.Graph) -> list[str]:
    """Every committed graph has a lookup index that answers as the graph does."""
    from graphrag.storage.graph_lookup import GraphLookup

    with open(graph_path, "rb") as f:
        lookup = GraphLookup.open(f, graph_path + ".index")
    if lookup is None:
        return [f"{GRAPH_FILE} has no lookup index describing it"]
    wrong = [n for n in graph if lookup.degree(n) != graph.degree(n) or lookup.node(n) != graph.nodes[n]]
    wrong += [f"{a}~{b}" for a, b, data in graph.edges(data=True) if lookup.edge(a, b) != data]
    if len(lookup) != graph.number_of_nodes() or wrong:
        return [f"the graph lookup index disagrees with {GRAPH_FILE} on {wrong[:5]}"]
    return []


def _record_index_problems(path: str, records: dict) -> list[str]:
    """A KV file committed with a lookup index has one that answers as the file does."""
    from graphrag.storage.kv_json import RecordLookup

    if not os.path.exists(path + ".index"):
        return []
    with open(path, "rb") as f:
        lookup = RecordLookup.open(f, path + ".index")
    if lookup is None:
        return [f"{os.path.basename(path)}.index does not describe {os.path.basename(path)}"]
    wrong = [key for key, value in records.items() if lookup.get(key) != value]
    return [f"{os.path.basename(path)}.index disagrees on {wrong[:5]}"] if wrong else []


def _glued_entry(line: bytes) -> bool:
    start = line.find(b"{", 1)
    while start != -1:
        try:
            if isinstance(json.loads(line[start:]), dict):
                return True
        except ValueError:
            pass
        start = line.find(b"{", start + 1)
    return False


def check_integrity(working_dir: str, recover: bool = True) -> list[str]:
    problems: list[str] = []
    if recover:
        from graphrag import GraphRAG, hash_embedding

        try:
            GraphRAG(working_dir=working_dir, extraction="nlp", embedding_func=hash_embedding(64),
                     always_create_working_dir=False)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"opening the working dir failed: {type(exc).__name__}: {exc}")

    # Nothing of an unfinished commit may be left behind.
    for name in sorted(os.listdir(working_dir)):
        if name == MANIFEST_NAME:
            problems.append(f"commit manifest {name} left after recovery")
        elif TMP_MARKER in name:
            problems.append(f"temporary file {name} left after recovery")

    # Every file parses.
    kv: dict[str, dict] = {}
    for key, name in KV_FILES.items():
        data = _load_json(os.path.join(working_dir, name), problems)
        if data is not None and not isinstance(data, dict):
            problems.append(f"{name} does not hold a JSON object")
            data = None
        kv[key] = data or {}
        if data:
            problems += _record_index_problems(os.path.join(working_dir, name), data)
    vdb: dict[str, dict] = {}
    for key, name in VDB_FILES.items():
        data = _load_json(os.path.join(working_dir, name), problems)
        if data is not None and not isinstance(data.get("data"), list):
            problems.append(f"{name} has no 'data' list")
            data = None
        vdb[key] = data or {"data": []}
    journal = os.path.join(working_dir, JOURNAL_FILE)
    if os.path.exists(journal):
        with open(journal, "rb") as f:
            lines = f.read().split(b"\n")
        # A kill mid-append tears a line; the reader skips it. A torn line must hold no whole
        # entry after its start: that would be a later entry glued to it, lost at replay.
        for i, line in enumerate(lines[:-1]):
            try:
                json.loads(line)
            except ValueError:
                if _glued_entry(line):
                    problems.append(f"{JOURNAL_FILE} line {i + 1} has an entry glued to a torn one")
    graph = nx.Graph()
    graph_path = os.path.join(working_dir, GRAPH_FILE)
    if os.path.exists(graph_path):
        try:
            graph = nx.read_graphml(graph_path)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{GRAPH_FILE} does not parse: {exc}")
        problems += _lookup_index_problems(graph_path, graph)

    chunks = kv["text_chunks"]
    docs = kv["full_docs"]

    def need_chunk(cid: str, where: str) -> None:
        if cid not in chunks:
            problems.append(f"{where} references missing chunk {cid}")

    # Documents and chunks.
    for doc_id, record in docs.items():
        if not isinstance(record, dict) or "content" not in record:
            problems.append(f"document {doc_id} has no content")
            continue
        for cid in record.get("chunk_ids", []):
            need_chunk(cid, f"document {doc_id}")
    for cid in kv["chunk_extractions"]:
        need_chunk(cid, "chunk_extractions")
    chunk_vector_ids = [d.get("__id__") for d in vdb["chunks"]["data"]]
    for cid in chunk_vector_ids:
        need_chunk(cid, "chunk vector")

    # The lexical index holds exactly the stored chunks (when it holds anything).
    lexical = kv["lexical_index"]
    if lexical:
        indexed = {k[len("chunk:"):] for k in lexical if k.startswith("chunk:")}
        if indexed != set(chunks) or (lexical.get("stats") or {}).get("chunks") != len(chunks):
            problems.append(f"the lexical index holds {len(indexed)} chunks, text_chunks {len(chunks)}")
        for key, postings in lexical.items():
            if key.startswith("term:") and not set(postings) <= indexed:
                problems.append(f"lexical {key} names chunks the index does not hold")

    # Graph <-> chunks.
    for node, data in graph.nodes(data=True):
        for cid in _ids(data.get("source_id")):
            need_chunk(cid, f"node {node!r}")
    for a, b, data in graph.edges(data=True):
        for cid in _ids(data.get("source_id")):
            need_chunk(cid, f"edge {a!r}-{b!r}")

    # Entity vectors <-> graph nodes.
    vector_ids = {d.get("__id__") for d in vdb["entities"]["data"]}
    node_ids = {entity_vector_id(n): n for n in graph.nodes}
    for vid in sorted(vector_ids - set(node_ids), key=str):
        problems.append(f"entity vector {vid} has no graph node")
    for vid in sorted(set(node_ids) - vector_ids):
        problems.append(f"graph node {node_ids[vid]!r} has no entity vector")

    # Relation vectors <-> graph edges (a working dir from before relation vectors has none).
    if os.path.exists(os.path.join(working_dir, VDB_FILES["relations"])):
        from graphrag.operators.graph_update import relation_vector_id

        relation_ids = {d.get("__id__") for d in vdb["relations"]["data"]}
        edge_ids = {relation_vector_id((a, b)): (a, b) for a, b in graph.edges if a != b}
        for vid in sorted(relation_ids - set(edge_ids), key=str):
            problems.append(f"relation vector {vid} has no graph edge")
        for vid in sorted(set(edge_ids) - relation_ids):
            problems.append(f"graph edge {edge_ids[vid]!r} has no relation vector")

    # Community reports <-> cluster memberships.
    clusters: set[str] = set()
    for node, data in graph.nodes(data=True):
        raw = data.get("clusters")
        if not raw:
            continue
        try:
            for c in json.loads(raw):
                clusters.add(str(c["cluster"]))
        except (ValueError, KeyError, TypeError):
            problems.append(f"node {node!r} has unreadable clusters {raw!r}")
    reports = set(kv["community_reports"])
    for rid in sorted(reports - clusters):
        problems.append(f"community report {rid} has no cluster in the graph")
    for cid in sorted(clusters - reports):
        problems.append(f"cluster {cid} has no community report")
    return problems


def snapshot(working_dir: str) -> dict[str, Any]:
    """What an index *means*: documents, entity names, relation keys, community memberships.

    Community ids are replaced by their member sets so two runs that number clusters
    differently but group the same way compare equal.
    """
    state = load_state(working_dir)
    graph: nx.Graph = state["graph"]
    groups: dict[tuple[int, str], set[str]] = {}
    for node, data in graph.nodes(data=True):
        for c in json.loads(data.get("clusters") or "[]"):
            groups.setdefault((c["level"], str(c["cluster"])), set()).add(node)
    return {
        "documents": sorted(state["full_docs"]),
        "chunks": sorted(state["text_chunks"]),
        "entities": sorted(graph.nodes),
        "relations": sorted(tuple(sorted((a, b))) for a, b in graph.edges),
        "communities": sorted((level, sorted(members)) for (level, _), members in groups.items()),
        "reports": len(state["community_reports"]),
    }


def assert_clean(wd: Any) -> None:
    """Fail with the problems ``check_integrity`` finds in ``wd``, if any."""
    problems = check_integrity(str(wd))
    assert problems == [], problems
