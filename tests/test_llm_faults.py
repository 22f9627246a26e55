"""LLM misbehaviour seen through the whole engine, over real HTTP to the mock server.

Transient faults (timeouts, 429 with Retry-After, 500, connection resets, empty answers)
are retried and give the same index as a clean run; bad answers (a report that is not
JSON, a truncated extraction) degrade gracefully; a permanent failure raises an error
naming the stage and leaves what was committed before intact and queryable.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterator

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.llm import LLMError
from graphrag.operators.chunking import doc_id_for
from mock_llm_server import TUPLE, Fault, MockLLMServer, detect_kind, realistic_responder

sys.path.insert(0, os.path.dirname(__file__))
from helpers_integrity import assert_clean, load_state, snapshot  # noqa: E402

DOC_A = ("Alice Moreau founded Northwind Labs in Lisbon. Bruno Tanaka joined Northwind Labs as its first "
         "engineer. Alice Moreau and Bruno Tanaka later opened an office in Osaka.")
DOC_B = ("Chloe Varga runs Quartz Bank in Tallinn. Quartz Bank lent money to Northwind Labs. "
         "Chloe Varga met Alice Moreau in Tallinn.")


def make_rag(wd: Any, server: MockLLMServer, **kw: Any) -> GraphRAG:
    options: dict[str, Any] = dict(chunk_token_size=120, chunk_overlap_token_size=20, show_progress=False,
                                   llm_max_retries=3, best_model_max_async=2, cheap_model_max_async=2)
    options.update(kw)
    return GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(64), llm_base_url=server.base_url,
                    llm_api_key="k", **options)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """DOC_A indexed with a well-behaved server."""
    wd = tmp_path_factory.mktemp("reference")
    with MockLLMServer() as server:
        make_rag(wd, server).insert(DOC_A)
        calls = len(server.chat_requests)
    return {"snapshot": snapshot(str(wd)), "calls": calls}


@pytest.fixture
def server() -> Iterator[MockLLMServer]:
    with MockLLMServer() as s:
        yield s


# --------------------------------------------------------------------------- transient faults


@pytest.mark.parametrize("faults, options", [
    pytest.param([Fault.delay(3.0)], {"llm_timeout": 0.5}, id="timeout"),
    pytest.param([Fault.status(429, retry_after=0.2), Fault.status(429, retry_after="0")], {}, id="429-retry-after"),
    pytest.param([Fault.status(500), Fault.status(503)], {}, id="500"),
    pytest.param([Fault.reset(), Fault.reset()], {}, id="connection-reset"),
    pytest.param([Fault.empty(), Fault.empty()], {}, id="empty-completion"),
])
def test_transient_faults_are_retried(server: MockLLMServer, reference: dict[str, Any], tmp_path: Any,
                                      faults: list[Fault], options: dict[str, Any]) -> None:
    rag = make_rag(tmp_path, server, **options)
    server.inject(*faults)
    stats = rag.insert(DOC_A)
    assert stats["documents_inserted"] == 1
    retries = sum(stage["retries"] for stage in stats["llm"].values())
    assert retries >= len(faults), stats["llm"]
    assert sum(stage["failures"] for stage in stats["llm"].values()) == 0
    assert_clean(tmp_path)
    assert snapshot(str(tmp_path)) == reference["snapshot"]
    assert len(server.chat_requests) == reference["calls"] + len(faults)


def test_retry_after_is_honoured(server: MockLLMServer, tmp_path: Any) -> None:
    rag = make_rag(tmp_path, server)
    server.inject(Fault.status(429, retry_after=1.0))
    started = time.monotonic()
    rag.insert(DOC_A)
    assert time.monotonic() - started >= 1.0
    assert_clean(tmp_path)


# --------------------------------------------------------------------------- bad answers


def test_report_that_is_not_json_gets_a_fallback(tmp_path: Any, reference: dict[str, Any]) -> None:
    def responder(req: dict) -> str:
        if detect_kind(req) in ("report", "report_repair"):
            return "Sorry, I can't write JSON today. The community is about Lisbon {maybe"
        return realistic_responder(req)

    with MockLLMServer(responder=responder) as server:
        rag = make_rag(tmp_path, server)
        stats = rag.insert(DOC_A)
        report_calls, server_repairs = server.calls_by_kind["report"], server.calls_by_kind["report_repair"]
    assert stats["communities"] >= 1 and stats["reports_generated"] == stats["communities"]
    assert report_calls == server_repairs == stats["communities"]  # one repair turn each
    assert stats["reports_failed"] == stats["communities"] and stats["llm"]["report_repair"]["calls"] == report_calls
    assert_clean(tmp_path)
    reports = load_state(str(tmp_path))["community_reports"]
    assert reports and all(r["report_source"] == "fallback" for r in reports.values())
    assert all(r["report_string"].strip() and r["report_json"].get("title") for r in reports.values())
    assert snapshot(str(tmp_path))["entities"] == reference["snapshot"]["entities"]
    assert rag.query("What is Northwind Labs?", QueryParam(mode="global", only_need_context=True))


def test_truncated_extraction_is_parsed_partially(tmp_path: Any) -> None:
    truncated = (f'("entity"{TUPLE}ALICE MOREAU{TUPLE}person{TUPLE}Alice Moreau founded Northwind Labs.)##\n'
                 f'("entity"{TUPLE}NORTHWIND LABS{TUPLE}organization{TUPLE}A lab in Lisbon.)##\n'
                 f'("relationship"{TUPLE}ALICE MOREAU{TUPLE}NORTHWIND LABS{TUPLE}Alice founded it.{TUPLE}9)##\n'
                 f'("entity"{TUPLE}BRUNO TAN')  # cut off mid-record, no completion marker

    def responder(req: dict) -> str:
        kind = detect_kind(req)
        if kind == "extraction":
            return truncated
        if kind.startswith("gleaning"):
            return "<|COMPLETE|>"
        return realistic_responder(req)

    with MockLLMServer(responder=responder) as server:
        stats = make_rag(tmp_path, server).insert(DOC_A)
    assert stats["documents_inserted"] == 1
    assert stats["malformed_records_skipped"] >= 1
    state = snapshot(str(tmp_path))
    assert state["entities"] == ["ALICE MOREAU", "NORTHWIND LABS"]
    assert state["relations"] == [("ALICE MOREAU", "NORTHWIND LABS")]
    assert_clean(tmp_path)


# --------------------------------------------------------------------------- permanent failures


def _failing_responder(stage_kind: str) -> Any:
    def responder(req: dict) -> str:
        if detect_kind(req) == stage_kind:
            raise RuntimeError(f"{stage_kind} is down")  # the mock answers 500
        return realistic_responder(req)
    return responder


@pytest.mark.parametrize("kind, stage", [("extraction", "extraction"), ("report", "report")])
def test_permanent_failure_names_the_stage_and_keeps_the_previous_commit(
        tmp_path: Any, kind: str, stage: str) -> None:
    with MockLLMServer() as good:
        make_rag(tmp_path, good).insert(DOC_A)
    before = snapshot(str(tmp_path))
    files_before = {n: os.stat(os.path.join(str(tmp_path), n)).st_mtime_ns
                    for n in os.listdir(str(tmp_path)) if not n.startswith(".") and "journal" not in n}

    with MockLLMServer(responder=_failing_responder(kind)) as bad:
        rag = make_rag(tmp_path, bad, llm_max_retries=1)
        with pytest.raises(LLMError) as info:
            rag.insert(DOC_B)
        assert info.value.stage == stage
        assert f"during {stage}" in str(info.value)
        assert bad.calls_by_kind[kind] >= 2  # retried before giving up

    # The failed insert changed nothing that was committed.
    files_after = {n: os.stat(os.path.join(str(tmp_path), n)).st_mtime_ns
                   for n in os.listdir(str(tmp_path)) if not n.startswith(".") and "journal" not in n}
    assert files_after == files_before
    assert_clean(tmp_path)
    assert snapshot(str(tmp_path)) == before
    assert [d["id"] for d in rag.list_documents()] == [doc_id_for(DOC_A)]
    context = rag.query("Who founded Northwind Labs?", QueryParam(mode="local", only_need_context=True))
    assert "NORTHWIND LABS" in context.upper()

    # Once the model is back the insert goes through; answers already paid for are reused.
    with MockLLMServer() as good:
        stats = make_rag(tmp_path, good).insert(DOC_B)
        assert stats["documents_inserted"] == 1
        if kind == "report":  # extraction of DOC_B was answered before the failure
            assert good.calls_by_kind["extraction"] == 0
    assert_clean(tmp_path)
    assert set(snapshot(str(tmp_path))["documents"]) == {doc_id_for(DOC_A), doc_id_for(DOC_B)}


def test_permanent_status_errors_stop_the_insert(server: MockLLMServer, tmp_path: Any) -> None:
    rag = make_rag(tmp_path, server, llm_max_retries=1)
    rag.insert(DOC_A)
    before = snapshot(str(tmp_path))
    server.inject(*[Fault.status(401)] * 50)  # not retryable
    with pytest.raises(LLMError) as info:
        rag.insert(DOC_B)
    assert info.value.stage == "extraction" and info.value.attempts == 1
    assert "401" in str(info.value) or "Authentication" in str(info.value)
    assert snapshot(str(tmp_path)) == before
    assert_clean(tmp_path)
