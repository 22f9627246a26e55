"""Models that ignore the extraction format, through the real openai client and the mock server.

A prose answer is a failed extraction, not an empty chunk: it gets one repair turn, is
counted and warned about, and the chunk is kept for a retry rather than marked indexed;
answers that carry the records in another shape (JSON lists, markdown tables, after a
<think> block) are read; the LLM-free fallback gives a weak model's index a graph.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.failed_chunks import FAILED_CHUNKS
from graphrag.operators.answer_formats import strip_reasoning
from graphrag.operators.extraction import EMPTY, EXTRACTED, FAILED, read_extraction_answer
from graphrag.operators.nlp_extraction import extract_chunk_nlp
from mock_llm_server import COMPLETE, MockLLMServer, _styled_extraction, weak_responder

sys.path.insert(0, os.path.dirname(__file__))
from helpers_integrity import assert_clean, load_state, snapshot  # noqa: E402

DOC_A = ("Alice Moreau founded Northwind Labs in Lisbon. Bruno Tanaka joined Northwind Labs as its first "
         "engineer. Alice Moreau and Bruno Tanaka later opened an office in Osaka. "
         "Chloe Varga runs Quartz Bank in Tallinn. Quartz Bank lent money to Northwind Labs. "
         "Chloe Varga met Alice Moreau in Tallinn. Daniel Okafor audits Quartz Bank for the Baltic Finance Board.")
DOC_B = ("Mara Voss founded the Voss Bakery in Tellin. Mara Voss later sold the Voss Bakery to Jonah Reed. "
         "Jonah Reed moved the Voss Bakery to Harbour Lane in Tellin. The Harbour Lane Guild welcomed Jonah Reed.")
STORY = {"input_text": "Marta Lindqvist left the Harbour Weaving Guild and opened a workshop in Norrvik. "
                       "Jonas Berg runs the Norrvik Market.", "entity_types": "person, organization, geo"}


def make_rag(wd: Any, server: MockLLMServer, **kw: Any) -> GraphRAG:
    options: dict[str, Any] = dict(chunk_token_size=30, chunk_overlap_token_size=5, show_progress=False,
                                   llm_max_retries=2, best_model_max_async=4, cheap_model_max_async=4)
    options.update(kw)
    return GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(64), llm_base_url=server.base_url,
                    llm_api_key="k", **options)


def failed_record(wd: Any) -> dict:
    path = Path(wd) / "kv_store_index_meta.json"
    return json.loads(path.read_text()).get(FAILED_CHUNKS, {}) if path.exists() else {}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """DOC_A and DOC_B indexed with a well-behaved model, each alone and together."""
    out: dict[str, Any] = {}
    with MockLLMServer() as server:
        for name, docs in (("a", [DOC_A]), ("b", [DOC_B]), ("ab", [DOC_A, DOC_B])):
            wd = tmp_path_factory.mktemp(f"reference-{name}")
            stats = make_rag(wd, server).insert(docs)
            out[name] = {"snapshot": snapshot(str(wd)), "chunks": stats["chunks_inserted"]}
    return out


# --------------------------------------------------------------------------- reading answers


@pytest.mark.parametrize("style", ["records", "json", "table", "think"])
def test_every_shape_that_carries_the_records_is_read_alike(style: str) -> None:
    expected, _, _, _ = read_extraction_answer(_styled_extraction("records", STORY))
    entities, relations, malformed, status = read_extraction_answer(_styled_extraction(style, STORY))
    assert status == EXTRACTED and malformed == 0
    assert [e["name"] for e in entities] == [e["name"] for e in expected]
    assert "THOUGHT" not in {e["name"] for e in entities}  # the record inside <think> is not one
    assert len(relations) == 4


@pytest.mark.parametrize("answer, status", [
    (_styled_extraction("prose", STORY), FAILED),
    ("", FAILED),
    ("I found no entities.##", FAILED),  # text, and no record in it
    ('("entity"<|>ONLY A NAME)', FAILED),  # a record, but none readable
    (COMPLETE, EMPTY),
    (f"```\n{COMPLETE}\n```", EMPTY),
    (f"<think>Nothing here.</think>\n{COMPLETE}", EMPTY),
    ("<think>The user wants records. Let me think about Marta", FAILED),  # all reasoning, no answer
])
def test_a_failed_answer_is_told_from_an_empty_chunk(answer: str, status: str) -> None:
    assert read_extraction_answer(answer)[3] == status


def test_reasoning_blocks_are_stripped() -> None:
    assert strip_reasoning("<think>a {b}</think>\n{\"x\": 1}") == "\n{\"x\": 1}"
    assert strip_reasoning("<THINKING>x</THINKING>done") == "done"
    assert strip_reasoning("answer <think>never closed") == "answer "
    assert strip_reasoning("opened by the template</think>the answer") == "the answer"


# --------------------------------------------------------------------------- the whole engine


def test_prose_answers_warn_and_leave_no_chunk_done_until_a_better_model_retries_them(
        tmp_path: Path, reference: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    with MockLLMServer() as good:
        make_rag(tmp_path, good).insert(DOC_A)
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        with caplog.at_level(logging.WARNING):
            stats = make_rag(tmp_path, weak).insert(DOC_B)
        repairs = weak.calls_by_kind["extraction_repair"]
    chunks = reference["b"]["chunks"]
    assert stats["chunks_inserted"] == stats["chunks_failed"] == stats["chunks_waiting"] == chunks > 1
    assert stats["chunks_extracted"] == stats["chunks_repaired"] == stats["chunks_fallback"] == 0
    assert repairs == stats["llm"]["extraction_repair"]["calls"] == chunks  # one repair turn each
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and stats["warnings"] == warnings
    assert f"{chunks} of {chunks} chunks" in warnings[0] and "great example of the creative process" in warnings[0]
    assert "stronger model" in warnings[0] and "--extraction-fallback nlp" in warnings[0]
    assert sorted(failed_record(tmp_path)) == sorted(load_state(str(tmp_path))["text_chunks"].keys()
                                                     - set(reference["a"]["snapshot"]["chunks"]))
    assert snapshot(str(tmp_path))["entities"] == reference["a"]["snapshot"]["entities"]
    assert_clean(tmp_path)

    # The same weak model again: its answers come from the cache, and nothing changes.
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        again = make_rag(tmp_path, weak).insert(DOC_B)
        assert weak.chat_requests == []
    assert again["documents_already_indexed"] == 1 and again["chunks_retried"] == chunks
    assert again["chunks_failed"] == again["chunks_waiting"] == chunks and again["entities_changed"] == 0

    # A better model: the same, already indexed document; only the failed chunks are extracted.
    with MockLLMServer() as good:
        retry = make_rag(tmp_path, good, best_model_name="a-better-model").insert(DOC_B)
        assert good.calls_by_kind["extraction"] == chunks
    assert retry["documents_inserted"] == 0 and retry["documents_already_indexed"] == 1
    assert retry["chunks_retried"] == retry["chunks_extracted"] == chunks
    assert retry["chunks_failed"] == retry["chunks_waiting"] == 0 and retry["warnings"] == []
    assert failed_record(tmp_path) == {}
    assert snapshot(str(tmp_path)) == reference["ab"]["snapshot"]
    assert_clean(tmp_path)


def test_without_an_llm_an_insert_leaves_the_failed_chunks_waiting_with_a_note(
        tmp_path: Path, reference: dict[str, Any], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        make_rag(tmp_path, weak).insert(DOC_B)
    failed = failed_record(tmp_path)
    chunks = reference["b"]["chunks"]
    assert len(failed) == chunks
    caplog.clear()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # Another model: the cached answers would not serve the retry, a call would be needed.
    rag = GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(64), chunk_token_size=30,
                   chunk_overlap_token_size=5, show_progress=False, best_model_name="a-better-model")
    with caplog.at_level(logging.WARNING):
        stats = rag.insert(DOC_B)
    assert stats["documents_already_indexed"] == 1 and stats["chunks_retried"] == 0
    assert stats["chunks_waiting"] == chunks
    notes = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(notes) == 1 and f"{chunks} chunk(s)" in notes[0] and "none is configured" in notes[0]
    assert failed_record(tmp_path) == failed  # still there for the next insert with a model
    assert_clean(tmp_path)


def test_the_nlp_fallback_gives_a_weak_model_a_graph_that_a_better_model_replaces(
        tmp_path: Path, reference: dict[str, Any]) -> None:
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        stats = make_rag(tmp_path, weak, extraction_fallback="nlp").insert(DOC_B)
    chunks = reference["b"]["chunks"]
    assert stats["chunks_failed"] == stats["chunks_fallback"] == stats["chunks_waiting"] == chunks
    assert "LLM-free extractor stood in" in stats["warnings"][0]
    chunk_texts = [c["content"] for c in load_state(str(tmp_path))["text_chunks"].values()]
    nlp_names = {e["name"] for text in chunk_texts for e in extract_chunk_nlp(text)["entities"]}
    assert set(snapshot(str(tmp_path))["entities"]) == nlp_names and "MARA VOSS" in nlp_names
    assert all(entry["fallback"] for entry in failed_record(tmp_path).values())
    assert_clean(tmp_path)

    # The same weak model again: the cached answers fail alike, the fallback's records are
    # the same, so the graph is not touched.
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        again = make_rag(tmp_path, weak, extraction_fallback="nlp").insert(DOC_B)
        assert weak.chat_requests == []
    assert again["chunks_retried"] == again["chunks_fallback"] == chunks and again["entities_changed"] == 0

    with MockLLMServer() as good:
        retry = make_rag(tmp_path, good, best_model_name="a-better-model", extraction_fallback="nlp").insert(DOC_B)
    assert retry["chunks_extracted"] == chunks and retry["chunks_waiting"] == 0
    # What only the fallback's records named is gone: the graph is the better model's alone.
    assert snapshot(str(tmp_path)) == reference["b"]["snapshot"]
    assert_clean(tmp_path)


def test_the_repair_turn_turns_a_json_list_answer_into_records(tmp_path: Path, reference: dict[str, Any]) -> None:
    with MockLLMServer(responder=weak_responder("prose", extraction_repair="json")) as server:
        stats = make_rag(tmp_path, server).insert(DOC_B)
        repairs = [r for r in server.chat_requests if r["messages"][-1]["content"].startswith("Your answer did not")]
    chunks = reference["b"]["chunks"]
    assert stats["chunks_repaired"] == stats["chunks_extracted"] == len(repairs) == chunks
    assert stats["chunks_failed"] == stats["chunks_waiting"] == 0 and stats["warnings"] == []
    assert all([m["role"] for m in r["messages"]] == ["user", "assistant", "user"] for r in repairs)
    assert snapshot(str(tmp_path))["entities"] == reference["b"]["snapshot"]["entities"]


@pytest.mark.parametrize("style", ["json", "table", "think"])
def test_answers_in_another_shape_need_no_repair(tmp_path: Path, reference: dict[str, Any], style: str) -> None:
    with MockLLMServer(responder=weak_responder(style)) as server:
        stats = make_rag(tmp_path, server).insert(DOC_B)
        assert server.calls_by_kind["extraction_repair"] == 0
    assert stats["chunks_extracted"] == reference["b"]["chunks"] and stats["chunks_failed"] == 0
    assert snapshot(str(tmp_path))["entities"] == reference["b"]["snapshot"]["entities"]


def test_an_empty_chunk_is_done_and_an_empty_answer_is_a_failure(tmp_path: Path, reference: dict[str, Any]) -> None:
    chunks = reference["b"]["chunks"]
    with MockLLMServer(responder=weak_responder("nothing")) as server:
        stats = make_rag(tmp_path / "nothing", server).insert(DOC_B)
        assert server.calls_by_kind["extraction_repair"] == 0
    assert stats["chunks_empty"] == chunks and stats["chunks_failed"] == stats["chunks_waiting"] == 0
    assert stats["warnings"] == [] and failed_record(tmp_path / "nothing") == {}

    with MockLLMServer(responder=weak_responder("empty")) as server:
        stats = make_rag(tmp_path / "empty", server, best_model_max_async=8).insert(DOC_B)
    assert stats["chunks_failed"] == stats["chunks_waiting"] == chunks
    assert "(an empty answer)" in stats["warnings"][0]


def test_deleting_a_document_with_failed_chunks_returns_the_previous_state(
        tmp_path: Path, reference: dict[str, Any]) -> None:
    with MockLLMServer() as good:
        make_rag(tmp_path, good).insert(DOC_A)
    before = snapshot(str(tmp_path))
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        rag = make_rag(tmp_path, weak, extraction_fallback="nlp")
        rag.insert(DOC_B)
        assert failed_record(tmp_path)
        doc_b = next(d["id"] for d in rag.list_documents() if "Voss" not in d["id"] and d["chunks"] == reference["b"]["chunks"]
                     and d["id"] not in before["documents"])
        deleted = rag.delete_documents(doc_b)
    assert deleted["documents_removed"] == 1
    assert failed_record(tmp_path) == {}
    assert snapshot(str(tmp_path)) == before
    assert_clean(tmp_path)


def test_reports_and_global_map_answers_that_are_not_json_get_a_repair_turn(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with MockLLMServer(responder=weak_responder("records", reports="prose", reports_repair="records")) as server:
        stats = make_rag(tmp_path / "repaired", server).insert(DOC_A)
        assert server.calls_by_kind["report_repair"] == server.calls_by_kind["report"] == stats["reports_generated"]
    assert stats["reports_failed"] == 0 and stats["llm"]["report_repair"]["calls"] == stats["reports_generated"]
    reports = load_state(str(tmp_path / "repaired"))["community_reports"].values()
    assert reports and all(r["report_source"] == "llm" for r in reports)

    with MockLLMServer(responder=weak_responder("records", reports="prose")) as server:
        with caplog.at_level(logging.WARNING):
            rag = make_rag(tmp_path / "failed", server)
            stats = rag.insert(DOC_A)
            caplog.clear()
            answer = rag.query("Who runs Quartz Bank?", QueryParam(mode="global"))
            map_calls = server.calls_by_kind["global_map"]
            assert server.calls_by_kind["global_map_repair"] == map_calls >= 1
    assert stats["reports_failed"] == stats["reports_generated"] >= 1
    assert any("community reports got no answer in the expected format" in w for w in stats["warnings"])
    assert "Sorry" in answer  # the polite "can't answer"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"{map_calls} of {map_calls} global map answers" in warnings[0]


# --------------------------------------------------------------------------- the command line


def run_cli(*args: str, server: MockLLMServer) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(GRAPHRAG_EMBEDDING="hash", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k")
    return subprocess.run([sys.executable, "-m", "graphrag.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_exits_4_when_every_chunk_failed_and_a_rerun_retries(tmp_path: Path) -> None:
    doc = tmp_path / "bakery.txt"
    doc.write_text(DOC_B, encoding="utf-8")
    wd = str(tmp_path / "wd")
    index = ("index", str(doc), "--working-dir", wd, "--chunk-size", "30")
    with MockLLMServer(responder=weak_responder("prose")) as weak:
        failed = run_cli(*index, "--model", "smollm2", server=weak)
        fallback = run_cli(*index, "--model", "smollm2", "--extraction-fallback", "nlp", server=weak)
    assert failed.returncode == 4, (failed.stdout, failed.stderr)
    assert "Traceback" not in failed.stderr and "WARNING" in failed.stderr
    assert "0 entities" in failed.stdout and "failed" in failed.stdout and "warning:" in failed.stdout
    assert fallback.returncode == 0, fallback.stderr  # the fallback gave them records
    assert "LLM-free extractor stood in" in fallback.stdout

    with MockLLMServer(responder=weak_responder("prose")) as weak:
        stats = json.loads(run_cli("stats", "--working-dir", wd, "--json", server=weak).stdout)
        docs = json.loads(run_cli("docs", "--working-dir", wd, "--json", server=weak).stdout)
        text = run_cli("docs", "--working-dir", wd, server=weak).stdout
    assert stats["chunks_failed_extraction"] == stats["chunks_failed_with_fallback"] == stats["chunks"] > 1
    assert stats["entities"] > 0 and docs[0]["failed_chunks"] == stats["chunks"]
    assert "wait for a retry" in text

    with MockLLMServer() as good:
        retried = run_cli(*index, "--model", "a-better-model", server=good)
        stats = json.loads(run_cli("stats", "--working-dir", wd, "--json", server=good).stdout)
    assert retried.returncode == 0, retried.stderr
    assert "0 new, 0 updated, 1 unchanged" in retried.stdout and "0 failed" in retried.stdout
    assert stats["chunks_failed_extraction"] == 0 and stats["llm_usage_by_stage"]["extraction_repair"]["calls"] > 0


def test_cli_help_names_exit_code_4_and_the_fallback_flag() -> None:
    with MockLLMServer() as server:
        top = run_cli("--help", server=server).stdout
        index = run_cli("index", "--help", server=server).stdout
    assert "  4  index: extraction failed for every chunk" in top
    assert "--extraction-fallback" in index


def test_a_dir_written_before_failed_chunks_were_recorded_opens_and_reports_none(tmp_path: Path) -> None:
    with MockLLMServer() as server:
        rag = make_rag(tmp_path, server)
        rag.insert(DOC_A)
        meta = asyncio.run(rag.stores.index_meta.get_by_id(FAILED_CHUNKS))
        assert meta is None  # nothing failed: no record at all, as in an older dir
        again = make_rag(tmp_path, server).insert(DOC_A)
    assert again["chunks_retried"] == 0 and again["chunks_waiting"] == 0
