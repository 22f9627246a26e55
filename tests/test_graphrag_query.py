"""Queries through the GraphRAG facade: lifecycle, LLM-free answers, zero-call context."""
from __future__ import annotations

import asyncio

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.querying import NO_LLM_NOTE
from graphrag.storage import JsonKVStorage
from graphrag.storage.files import StorageFileError

STORY = (
    "Mara Quill founded the Lantern Guild in the harbour town of Vessel Bay. "
    "The Lantern Guild trained lighthouse keepers for the whole coast. "
    "Mara Quill later married Tobias Fern, a shipwright from Vessel Bay. "
    "Tobias Fern built the ferry Grey Heron for the Lantern Guild."
)


@pytest.fixture
def offline_index(tmp_path):
    rag = GraphRAG(working_dir=str(tmp_path / "wd"), extraction="nlp", embedding_func=hash_embedding(64))
    rag.insert([STORY])
    return tmp_path / "wd"


def test_empty_working_dir_gives_clear_message(tmp_path):
    rag = GraphRAG(working_dir=str(tmp_path / "empty"), embedding_func=hash_embedding(64))
    for mode in ("local", "global", "naive"):
        answer = rag.query("Who founded the guild?", QueryParam(mode=mode))
        assert "No documents are indexed" in answer and str(tmp_path / "empty") in answer


def test_no_llm_configured_returns_context_under_note(offline_index):
    rag = GraphRAG(working_dir=str(offline_index), extraction="nlp", embedding_func=hash_embedding(64))
    for mode in ("local", "global", "naive"):
        answer = rag.query("Who is Mara Quill?", QueryParam(mode=mode))
        assert answer.startswith(NO_LLM_NOTE)
        assert "MARA QUILL" in answer.upper()


def test_only_need_context_makes_no_llm_call_even_with_llm(offline_index, llm_server):
    rag = GraphRAG(working_dir=str(offline_index), embedding_func=hash_embedding(64),
                   llm_base_url=llm_server.base_url, llm_api_key="k")
    for mode in ("local", "global", "naive"):
        context = rag.query("Who is Mara Quill?", QueryParam(mode=mode, only_need_context=True))
        assert "MARA QUILL" in context.upper()
        assert not context.startswith(NO_LLM_NOTE)
    assert len(llm_server.chat_requests) == 0


def test_context_queries_do_not_read_what_only_writers_need(offline_index, llm_server):
    """Opening a working dir to query skips the chunk extractions and the LLM cache (they
    grow with everything ever indexed); a writer still reads them, and still refuses a
    corrupt one by name."""
    for name in ("kv_store_chunk_extractions.json", "kv_store_llm_response_cache.json"):
        (offline_index / name).write_text("{ not json")
    rag = GraphRAG(working_dir=str(offline_index), embedding_func=hash_embedding(64),
                   llm_base_url=llm_server.base_url, llm_api_key="k")
    for mode in ("local", "global", "naive"):
        assert "MARA QUILL" in rag.query("Who is Mara Quill?", QueryParam(mode=mode, only_need_context=True)).upper()
    with pytest.raises(StorageFileError, match="chunk_extractions|llm_response_cache"):
        rag.insert(["Tobias Fern also repaired the Lantern Guild's old signal tower."])


def _opened(rag: GraphRAG) -> set[str]:
    return {store.namespace for store in rag.stores.all()}


def test_each_query_reads_only_the_stores_it_uses(offline_index):
    """Stores are read on first use: a naive query never parses the graph, so a corrupt
    graph file only stops the modes that need it, and names the file when it does."""
    graph_file = offline_index / "graph_chunk_entity_relation.graphml"
    graph_file.write_text("<graphml><broken")
    rag = GraphRAG(working_dir=str(offline_index), embedding_func=hash_embedding(64))
    assert _opened(rag) == set()
    assert "Mara Quill" in rag.query("Mara Quill", QueryParam(mode="naive", only_need_context=True))
    assert _opened(rag) == {"index_meta", "chunks", "text_chunks"}  # not even the documents
    assert "MARA QUILL" in rag.query("Mara Quill", QueryParam(mode="global", only_need_context=True)).upper()
    assert _opened(rag) == {"index_meta", "chunks", "text_chunks", "community_reports"}
    with pytest.raises(StorageFileError, match="graph_chunk_entity_relation.graphml"):
        rag.query("Mara Quill", QueryParam(mode="local", only_need_context=True))
    # Looked up on the class (help(), introspection), a store attribute is its descriptor.
    from graphrag.stores import Stores

    assert Stores.community_reports.name == "community_reports"


def test_a_store_read_late_brings_earlier_ones_up_to_its_commit(offline_index):
    """A reader that read some stores before another process's insert, and others after,
    answers from one state: the later one, not a mix of both."""
    reader = GraphRAG(working_dir=str(offline_index), embedding_func=hash_embedding(64))
    reader.query("Mara Quill", QueryParam(mode="naive", only_need_context=True))
    chunks_before = len(reader.stores.text_chunks)
    writer = GraphRAG(working_dir=str(offline_index), extraction="nlp", embedding_func=hash_embedding(64))
    writer.insert(["Odile Brisk captains the ferry Grey Heron between Vessel Bay and Skerry Point."])
    assert len(reader.stores.text_chunks) == chunks_before  # nothing re-read behind its back
    context = reader.query("Who is Odile Brisk?", QueryParam(mode="local", only_need_context=True))
    assert "ODILE BRISK" in context.upper()
    assert len(reader.stores.text_chunks) == chunks_before + 1
    assert "Odile Brisk" in reader.query("Odile Brisk", QueryParam(mode="naive", only_need_context=True))


def test_inserting_what_is_indexed_reads_only_the_documents_and_writes_nothing(offline_index):
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in offline_index.iterdir()}
    rag = GraphRAG(working_dir=str(offline_index), extraction="nlp", embedding_func=hash_embedding(64))
    stats = rag.insert([STORY])
    assert stats["documents_inserted"] == 0 and stats["documents_already_indexed"] == 1
    assert _opened(rag) == {"full_docs", "index_meta"}
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in offline_index.iterdir()} == before
    # With work to do, an insert reads every store before any extraction.
    (offline_index / "kv_store_chunk_extractions.json").write_text("{ not json")
    with pytest.raises(StorageFileError, match="chunk_extractions"):
        rag.insert(["Odile Brisk captains the ferry Grey Heron."])
    assert stats == rag.insert([STORY]) | {"seconds": stats["seconds"]}


def test_deleting_every_document_empties_the_index_for_queries(offline_index):
    rag = GraphRAG(working_dir=str(offline_index), extraction="nlp", embedding_func=hash_embedding(64))
    rag.delete_documents([d["id"] for d in rag.list_documents()])
    reopened = GraphRAG(working_dir=str(offline_index), embedding_func=hash_embedding(64))
    assert "No documents are indexed" in reopened.query("Mara Quill", QueryParam(mode="local"))
    assert "full_docs" not in _opened(reopened)


def test_offline_index_answered_by_configured_llm(offline_index, llm_server):
    rag = GraphRAG(working_dir=str(offline_index), embedding_func=hash_embedding(64),
                   llm_base_url=llm_server.base_url, llm_api_key="k")
    answer = rag.query("Who is Mara Quill?", QueryParam(mode="local"))
    assert not answer.startswith(NO_LLM_NOTE)
    assert len(llm_server.chat_requests) == 1
    assert "Data tables" in str(llm_server.chat_requests[0])


def test_every_query_ends_with_query_done_callback(offline_index, monkeypatch):
    calls = []
    original = JsonKVStorage.query_done_callback

    async def spy(self):
        calls.append(self.namespace)
        await original(self)

    monkeypatch.setattr(JsonKVStorage, "query_done_callback", spy)
    rag = GraphRAG(working_dir=str(offline_index), extraction="nlp", embedding_func=hash_embedding(64))
    rag.query("Mara Quill", QueryParam(mode="naive", only_need_context=True))
    assert sorted(calls) == ["index_meta", "text_chunks"]  # every store the query opened
    calls.clear()
    asyncio.run(rag.aquery("Who?", QueryParam(mode="global")))
    assert sorted(calls) == ["community_reports", "index_meta", "text_chunks"]


def test_sync_wrapper_inside_running_loop_explains(offline_index):
    rag = GraphRAG(working_dir=str(offline_index), extraction="nlp", embedding_func=hash_embedding(64))

    async def inside():
        with pytest.raises(RuntimeError, match="aquery"):
            rag.query("Who?")

    asyncio.run(inside())


def test_invalid_query_param_raises():
    with pytest.raises(ValueError, match="mode"):
        QueryParam(mode="fuzzy")
    with pytest.raises(ValueError, match="top_k"):
        QueryParam(top_k=-1)


def test_sync_calls_close_their_http_connections(tmp_path, llm_server):
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import gc
        from graphrag import GraphRAG, QueryParam, hash_embedding
        rag = GraphRAG(working_dir={str(tmp_path / 'wd')!r}, embedding_func=hash_embedding(32),
                       llm_base_url={llm_server.base_url!r}, llm_api_key="k")
        rag.insert({STORY!r})
        rag.query("Who is Mara Quill?", QueryParam(mode="local"))
        del rag
        gc.collect()
    """)
    result = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "unclosed" not in result.stderr and "Event loop is closed" not in result.stderr


def test_shared_chunk_survives_deleting_one_of_its_documents(tmp_path):
    header = ("Preface. Mara Quill founded the Lantern Guild in the harbour town of Vessel Bay, "
              "and the Guild trained keepers for every light on the coast. ") * 3
    first = header + "Tobias Fern built the ferry Grey Heron."
    second = header + "Ivo Brand repaired the Vessel Bay light."
    rag = GraphRAG(working_dir=str(tmp_path / "wd"), extraction="nlp", embedding_func=hash_embedding(32),
                   chunk_token_size=40, chunk_overlap_token_size=0)
    rag.insert([first, second])
    docs = {d["id"]: d for d in rag.list_documents()}
    records = rag.stores.full_docs._data
    first_id = next(k for k, r in records.items() if "Grey Heron" in r["content"])
    second_id = next(k for k in docs if k != first_id)
    shared = set(records[first_id]["chunk_ids"]) & set(records[second_id]["chunk_ids"])
    assert shared, "the common header gives both documents the same first chunk"

    rag.delete_documents(first_id)
    chunks = rag.stores.text_chunks._data
    assert shared <= set(chunks)
    assert all(chunks[c]["full_doc_id"] == second_id for c in shared)
    assert rag.stores.graph.graph.has_node("MARA QUILL")
    assert not rag.stores.graph.graph.has_node("GREY HERON")

