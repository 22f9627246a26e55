"""The walk's graph kept beside the GraphML at each commit: a query process builds the walk
from it without parsing the graph, and gets exactly what the whole graph gives, after
inserts and deletes; a dir without it, or with one from another version, still works."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import hash_embedding
from graphrag.operators.chunking import doc_id_for
from graphrag.operators.walk_graph import GraphIndex, build_graph_index, graph_index
from graphrag.storage.base import walk_links_from_graph

DOCS = ["Elspeth Marrowind was born in Quarvale and wrote poems about its harbour.",
        "Tessaly, a slow green stream crossing meadows, curls around Quarvale.",
        "Orrin Vast sailed from Quarvale to Dunmere with Elspeth Marrowind."]
LATER = "Dunmere lies on the Brennor estuary, where Orrin Vast built ships."
WALK_FILE = "graph_chunk_entity_relation.graphml.walk"


def _rag(path: Path) -> GraphRAG:
    return GraphRAG(working_dir=str(path), embedding_func=hash_embedding(64), extraction="nlp", show_progress=False)


def _from_parsed_graph(path: Path) -> GraphIndex:
    """The walk built from the whole parsed GraphML (the storage contract's default)."""
    graph = _rag(path).stores.graph
    return build_graph_index(*asyncio.run(walk_links_from_graph(graph)))


def _in_a_query_process(path: Path, parses: bool = False) -> GraphIndex:
    rag = _rag(path)
    index = asyncio.run(graph_index(rag.stores))
    assert (rag.stores.graph._parsed is not None) == parses  # the GraphML read whole or not
    return index


def _assert_same(a: GraphIndex, b: GraphIndex) -> None:
    assert a.entities == b.entities and a.chunks == b.chunks
    assert (a.transition_t != b.transition_t).nnz == 0
    np.testing.assert_array_equal(a.specificity, b.specificity)
    assert (a.exact, a.loose, a.loose_names, a.by_word) == (b.exact, b.loose, b.loose_names, b.by_word)


def test_the_kept_walk_equals_the_parsed_graph_after_inserts_and_deletes(tmp_path: Path) -> None:
    writer = _rag(tmp_path)
    writer.insert(DOCS)
    first = _in_a_query_process(tmp_path)
    _assert_same(first, _from_parsed_graph(tmp_path))
    assert len(first.entities) > 3 and first.transition_t.nnz > 0

    writer.insert(LATER)
    _assert_same(_in_a_query_process(tmp_path), _from_parsed_graph(tmp_path))
    assert "BRENNOR" in " ".join(_in_a_query_process(tmp_path).entities)
    _assert_same(asyncio.run(graph_index(writer.stores)), _from_parsed_graph(tmp_path))  # the writer's own

    writer.delete_documents(doc_id_for(LATER))
    _assert_same(_in_a_query_process(tmp_path), first)  # insert-then-delete: the same walk
    writer.delete_documents(doc_id_for(DOCS[0]))
    after_delete = _in_a_query_process(tmp_path)
    _assert_same(after_delete, _from_parsed_graph(tmp_path))
    assert len(after_delete.chunks) == 2


def test_a_dir_without_the_walk_file_or_with_a_stale_one_parses_the_graph(tmp_path: Path) -> None:
    writer = _rag(tmp_path)
    writer.insert(DOCS[:2])
    shutil.copy(tmp_path / WALK_FILE, tmp_path / "old-walk")
    writer.insert(DOCS[2])
    expected = _from_parsed_graph(tmp_path)
    question = QueryParam(mode="hybrid", only_need_context=True)
    answer = _rag(tmp_path).query("Where was Elspeth Marrowind born?", question)

    shutil.copy(tmp_path / "old-walk", tmp_path / WALK_FILE)  # describes the GraphML before the last insert
    _assert_same(_in_a_query_process(tmp_path, parses=True), expected)
    (tmp_path / WALK_FILE).unlink()  # as written before the file existed
    _assert_same(_in_a_query_process(tmp_path, parses=True), expected)
    assert _rag(tmp_path).query("Where was Elspeth Marrowind born?", question) == answer


def test_synonym_links_join_close_names_and_depend_on_the_pair_only(monkeypatch) -> None:
    from graphrag.operators import walk_graph

    nodes = [("IAIN BANKS", "c1"), ("IAIN M. BANKS", "c2"), ("BANKS OF THE RIVER", "c3"), ("OTTO", "c4")]
    monkeypatch.setattr(walk_graph, "SYNONYM_MIN_COSINE", None)
    plain = build_graph_index(nodes, [])
    monkeypatch.setattr(walk_graph, "SYNONYM_MIN_COSINE", 0.6)
    linked = build_graph_index(nodes, [])
    banks, m_banks = linked.entities.index("IAIN BANKS"), linked.entities.index("IAIN M. BANKS")
    river = linked.entities.index("BANKS OF THE RIVER")
    assert plain.transition_t[m_banks, banks] == 0 and linked.transition_t[m_banks, banks] > 0
    assert linked.transition_t[river, banks] == 0  # shares a word, not the spelling
    # The same pair is linked whatever else the graph holds.
    smaller = build_graph_index(nodes[:2], [])
    assert smaller.transition_t[smaller.entities.index("IAIN M. BANKS"), smaller.entities.index("IAIN BANKS")] > 0
