"""Facts as seeds: relation vectors kept beside entity vectors, and the hybrid walk seeded
from the facts nearest the question."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import hash_embedding
from graphrag.operators import query_hybrid
from graphrag.operators.chunking import doc_id_for
from graphrag.operators.fact_seeds import fact_seed
from graphrag.operators.graph_update import relation_vector_id
from graphrag.operators.walk_graph import graph_index
from graphrag.storage.base import walk_links

FIRST = "Elspeth Marrowind was born in Quarvale and wrote poems about its harbour."
SECOND = "Tessaly, a slow green stream crossing meadows, curls around Quarvale."
THIRD = "Odrin Vask sailed from Quarvale to Bellmere with a cargo of salt."


def _rag(tmp_path: Path, **options: Any) -> GraphRAG:
    return GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(256), extraction="nlp",
                    show_progress=False, enable_relation_vectors=True, **options)


async def _edges(rag: GraphRAG) -> set[tuple[str, str]]:
    nodes, edges = await walk_links(rag.stores.graph)
    return {tuple(sorted(e)) for e in edges}


async def _relation_ids(rag: GraphRAG) -> set[str]:
    return await rag.stores.relations_vdb.get_ids()


def test_every_relation_has_one_vector_under_insert_and_delete(tmp_path: Path) -> None:
    rag = _rag(tmp_path)
    rag.insert([FIRST, SECOND])
    edges = asyncio.run(_edges(rag))
    assert edges, "the extractor found no relation to test with"
    assert asyncio.run(_relation_ids(rag)) == {relation_vector_id(e) for e in edges}

    rag.insert([THIRD])
    grown = asyncio.run(_edges(rag))
    assert grown > edges
    assert asyncio.run(_relation_ids(rag)) == {relation_vector_id(e) for e in grown}

    rag.delete_documents(doc_id_for(THIRD))
    assert asyncio.run(_edges(rag)) == edges
    assert asyncio.run(_relation_ids(rag)) == {relation_vector_id(e) for e in edges}
    # A fresh process reads the same store, and `graphrag stats` counts it.
    assert asyncio.run(_relation_ids(_rag(tmp_path))) == {relation_vector_id(e) for e in edges}
    assert GraphRAG.inspect(str(tmp_path)).stats()["relation_vectors"] == {"vectors": len(edges), "dim": 256}


def test_relation_vectors_are_off_by_default_and_filled_in_when_turned_on(tmp_path: Path) -> None:
    rag = GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(256), extraction="nlp",
                   show_progress=False)
    rag.insert([FIRST, SECOND])
    assert rag.stores.relations_vdb is None and not (tmp_path / "vdb_relations.json").exists()
    turned_on = _rag(tmp_path)
    turned_on.insert([THIRD])  # the next write embeds every relation, the earlier ones too
    assert asyncio.run(_relation_ids(turned_on)) == {relation_vector_id(e) for e in asyncio.run(_edges(turned_on))}


def test_relation_vectors_catch_up_with_what_was_written_and_deleted_while_off(tmp_path: Path) -> None:
    on = _rag(tmp_path)
    on.insert([FIRST])
    first = asyncio.run(_relation_ids(on))
    assert first, "the extractor found no relation to test with"
    off = GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(256), extraction="nlp",
                   show_progress=False)
    off.insert([THIRD])
    off.delete_documents(doc_id_for(FIRST))
    while_off = {relation_vector_id(e) for e in asyncio.run(_edges(off))}
    assert while_off and not while_off & first  # relations written, and every one of FIRST's gone
    again = _rag(tmp_path)
    again.insert([SECOND])  # a write that adds no relation of its own still catches the store up
    now = {relation_vector_id(e) for e in asyncio.run(_edges(again))}
    assert now == while_off
    assert asyncio.run(_relation_ids(again)) == now
    assert asyncio.run(_relation_ids(_rag(tmp_path))) == now


def test_the_catch_up_runs_only_after_a_write_without_relation_vectors(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from graphrag.operators import graph_update

    checks: list[int] = []
    check = graph_update.relation_vectors_to_catch_up

    async def counted(*args: Any) -> Any:
        checks.append(1)
        return await check(*args)

    monkeypatch.setattr(graph_update, "relation_vectors_to_catch_up", counted)

    def exact(rag: GraphRAG) -> bool:
        return asyncio.run(_relation_ids(rag)) == {relation_vector_id(e) for e in asyncio.run(_edges(rag))}

    def off() -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(256), extraction="nlp",
                        show_progress=False)

    off().insert([FIRST])  # written without them
    on = _rag(tmp_path)
    on.insert([SECOND])  # the first write with them compares the id lists (and fills the store)
    assert len(checks) == 1 and exact(on)
    on.insert([THIRD])
    on.delete_documents(doc_id_for(SECOND))
    _rag(tmp_path).insert([SECOND])  # another process: the record is in the index
    assert len(checks) == 1 and exact(_rag(tmp_path))  # kept current by each write, never compared again
    writer = off()
    writer.delete_documents(doc_id_for(FIRST))  # the graph changes without them
    again = _rag(tmp_path)
    again.insert([FIRST])
    assert len(checks) == 2 and exact(again)  # compared once more, and current again
    again.delete_documents(doc_id_for(THIRD))
    assert len(checks) == 2 and exact(again)


def test_the_nearest_facts_seed_both_their_ends(tmp_path: Path) -> None:
    rag = _rag(tmp_path)
    rag.insert([FIRST, SECOND, THIRD])

    async def seeds() -> dict[str, float]:
        index = await graph_index(rag.stores)
        hits = await rag.stores.relations_vdb.query(THIRD, top_k=1)
        found = await fact_seed(THIRD, rag.stores.relations_vdb, index, top_k=1)
        ends = {hits[0]["src_id"], hits[0]["tgt_id"]}
        return {index.entities[i]: w for i, w in found.items()}, ends

    found, ends = asyncio.run(seeds())
    assert set(found) == ends
    assert all(w > 0 for w in found.values())


def test_fact_seeds_enter_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rag = _rag(tmp_path)
    rag.insert([FIRST, SECOND, THIRD])
    question = "Who sailed salt to Bellmere?"
    param = QueryParam(mode="hybrid", only_need_context=True)
    monkeypatch.setattr(query_hybrid, "FACT_SEED_SHARE", 0.0)
    without = asyncio.run(query_hybrid.rank(question, rag.stores, param))
    monkeypatch.setattr(query_hybrid, "FACT_SEED_SHARE", 0.9)
    with_facts = asyncio.run(query_hybrid.rank(question, rag.stores, param))
    assert without is not None and with_facts is not None
    assert with_facts.entity_scores != without.entity_scores
    assert "ODRIN VASK" in list(with_facts.entity_scores)[:3]
