"""Working dirs written before the architecture rework open and answer unchanged.

``tests/data/compat`` holds two small dirs built by the engine as it was then (see
``build_v0_1_dirs.py`` there): one LLM-free, one extracted, summarised and reported by the
mock LLM server. Today's code must read them, give the same query contexts, and keep
maintaining them (re-insert for free, insert, delete) without a rebuild.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers_integrity import check_integrity

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import hash_embedding
from graphrag.records import CommunityReport, Document, Entity, Relation
from mock_llm_server import MockLLMServer, realistic_responder

DATA = Path(__file__).parent / "data"
EXPECTED = json.loads((DATA / "compat" / "expected.json").read_text())
SETTINGS = dict(embedding_func=hash_embedding(32), chunk_token_size=120, chunk_overlap_token_size=12,
                show_progress=False)


def copy_of(kind: str, tmp_path: Path) -> str:
    target = tmp_path / kind
    shutil.copytree(DATA / "compat" / kind, target)
    return str(target)


def corpus() -> tuple[list[str], list[str]]:
    paths = sorted((DATA / "pipeline").glob("*.txt"))
    return [p.read_text() for p in paths], [p.name for p in paths]


@pytest.mark.parametrize("kind", ["nlp", "llm"])
def test_an_old_dir_opens_and_answers_unchanged(kind: str, tmp_path: Path) -> None:
    rag = GraphRAG(working_dir=copy_of(kind, tmp_path), **SETTINGS)
    assert sorted(rag.list_documents(), key=lambda d: d["id"]) == EXPECTED[kind]["documents"]
    for mode, question in EXPECTED["questions"].items():
        context = rag.query(question, QueryParam(mode=mode, only_need_context=True))
        assert context == EXPECTED[kind]["contexts"][mode], mode


def test_an_old_dir_keeps_being_maintained(tmp_path: Path) -> None:
    """Re-inserting costs no LLM call; a new document and a delete work on the old files."""
    working_dir = copy_of("llm", tmp_path)
    texts, sources = corpus()
    with MockLLMServer(responder=realistic_responder) as server:
        rag = GraphRAG(working_dir=working_dir, llm_base_url=server.base_url, llm_api_key="k",
                       entity_summary_to_max_tokens=40, **SETTINGS)
        again = rag.insert(texts, sources)
        assert again["documents_inserted"] == 0 and server.calls_by_kind == {}
        rag.insert("Captain Orla Vance commands the harbour pilots of Saltmere and trains them on the "
                   "night tides beside the Guild of Lamplighters.", ["pilots.txt"])
        assert sum(server.calls_by_kind.values()) > 0
        first = EXPECTED["llm"]["documents"][0]
        removed = rag.delete_documents(first["id"])
    assert removed["documents_removed"] == 1
    assert check_integrity(working_dir, recover=False) == []
    assert {d["source"] for d in rag.list_documents()} == {*sources, "pilots.txt"} - {first["source"]}


def test_typed_records_read_an_old_dir(tmp_path: Path) -> None:
    """The public records are built from the stored dicts as earlier versions wrote them."""
    import asyncio

    rag = GraphRAG(working_dir=copy_of("llm", tmp_path), **SETTINGS)
    stores = rag.stores

    async def read() -> tuple[Any, ...]:
        keys = await stores.full_docs.all_keys()
        docs = [Document.from_stored(k, r) for k, r in zip(keys, await stores.full_docs.get_by_ids(keys))]
        graph = stores.graph
        name = next(n for n, _ in graph.graph.nodes(data=True))
        entity = Entity.from_stored(name, await graph.get_node(name))
        a, b = next(iter(graph.graph.edges()))
        relation = Relation.from_stored(a, b, await graph.get_edge(a, b))
        report_keys = await stores.community_reports.all_keys()
        reports = [CommunityReport.from_stored(k, r)
                   for k, r in zip(report_keys, await stores.community_reports.get_by_ids(report_keys))]
        return docs, entity, relation, reports

    docs, entity, relation, reports = asyncio.run(read())
    assert {d.source for d in docs} == set(corpus()[1])
    assert all(d.chunk_ids and d.chars > 0 for d in docs)
    chunk_ids = {c for d in docs for c in d.chunk_ids}
    assert entity.source_chunk_ids and set(entity.source_chunk_ids) <= chunk_ids
    assert entity.description and entity.type
    assert relation.weight > 0 and set(relation.source_chunk_ids) <= chunk_ids
    assert reports and all(r.title and r.text and r.community.nodes for r in reports)
    assert all(isinstance(r.rating, float) for r in reports)
