"""rag.aquery_stream: the answer in pieces as the model writes them (openai's streamed chat
completions against the mock server's SSE), the final answer only, a cached answer whole."""
from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Any

import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.errors import LLMError
from graphrag.operators.modes import mode_names
from helpers_server import build_index, index_config
from mock_llm_server import Fault, MockLLMServer

QUESTION = "Who founded Brightwater Instruments?"


async def pieces_of(rag: GraphRAG, param: QueryParam, question: str = QUESTION) -> list[tuple[float, str]]:
    return [(time.monotonic(), piece) async for piece in rag.aquery_stream(question, param)]


@pytest.fixture
def streaming(tmp_path: Path) -> Any:
    wd = tmp_path / "wd"
    build_index(wd)
    with MockLLMServer(stream_chunk_delay=0.03) as llm:
        yield GraphRAG(index_config(wd, llm_base_url=llm.base_url, llm_api_key="k")), llm


@pytest.mark.parametrize("mode", ["local", "global", "naive"])
def test_the_final_answer_streams_as_written_then_comes_cached_in_one_piece(streaming: Any, mode: str) -> None:
    rag, llm = streaming
    param = QueryParam(mode=mode, response_type=f"streamed for {mode}")
    got = asyncio.run(pieces_of(rag, param))
    assert len(got) > 2 and got[-1][0] - got[0][0] > 0.03  # pieces arrived apart
    streamed = [r for r in llm.chat_requests if r.get("stream")]
    assert len(streamed) == 1  # the answer only: a global query's map calls are not streamed
    text = "".join(p for _, p in got)
    assert asyncio.run(rag.aquery(QUESTION, param)) == text  # cached whole by the stream
    assert [p for _, p in asyncio.run(pieces_of(rag, param))] == [text]
    assert len([r for r in llm.chat_requests if r.get("stream")]) == 1
    assert rag.usage.snapshot()["query"]["cached"] >= 1


def test_what_no_model_writes_comes_in_one_piece(streaming: Any, tmp_path: Path) -> None:
    rag, llm = streaming
    context = asyncio.run(pieces_of(rag, QueryParam(mode="local", only_need_context=True)))
    assert len(context) == 1 and "-----Entities-----" in context[0][1]
    empty = GraphRAG(index_config(tmp_path / "empty", llm_base_url=llm.base_url, llm_api_key="k"))
    assert [p for _, p in asyncio.run(pieces_of(empty, QueryParam()))][0].startswith("No documents are indexed")
    assert not llm.chat_requests


def test_a_model_func_that_cannot_stream_answers_in_one_piece(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)

    async def plain_model(prompt: str, system_prompt: Any = None, history_messages: Any = None, **kw: Any) -> str:
        return "Marguerite Olvane founded it [1]."

    rag = GraphRAG(index_config(wd, best_model_func=plain_model, cheap_model_func=plain_model))
    assert [p for _, p in asyncio.run(pieces_of(rag, QueryParam(mode="local")))] == [
        "Marguerite Olvane founded it [1]."]


def test_a_stream_failing_before_its_first_piece_is_retried(streaming: Any) -> None:
    rag, llm = streaming
    llm.inject(Fault.status(503))
    text = "".join(p for _, p in asyncio.run(pieces_of(rag, QueryParam(mode="naive"))))
    assert text.strip() and rag.usage.snapshot()["query"]["failures"] == 1
    llm.inject(*[Fault.status(400, message="bad request")])
    with pytest.raises(LLMError):
        asyncio.run(pieces_of(rag, QueryParam(mode="naive", response_type="another")))


def test_a_consumer_that_stops_reading_cancels_the_query(streaming: Any) -> None:
    rag, _ = streaming

    async def first_piece_only() -> str:
        stream = rag.aquery_stream(QUESTION, QueryParam(mode="local", response_type="stopped early"))
        piece = await stream.__anext__()
        await stream.aclose()
        return piece

    assert asyncio.run(first_piece_only())


@pytest.mark.parametrize("mode", mode_names())
def test_a_cited_answer_streams_then_its_references(streaming: Any, mode: str) -> None:
    rag, llm = streaming
    param = QueryParam(mode=mode, with_references=True, response_type="cited and streamed")

    async def result_stream() -> tuple[list[str], Any]:
        stream = rag.aquery_result_stream(QUESTION, param)
        return [piece async for piece in stream], stream.answer

    pieces, answer = asyncio.run(result_stream())
    assert len(pieces) > 2 and "".join(pieces) == answer.text and "[1]" in answer.text
    assert len([r for r in llm.chat_requests if r.get("stream")]) == 1
    # Cached now: the same answer and references as aquery_result, and the text stream ends with
    # the reference list (joined, the pieces are aquery's cited answer); the sync twin likewise.
    assert asyncio.run(rag.aquery_result(QUESTION, param)) == answer
    text_pieces = [p for _, p in asyncio.run(pieces_of(rag, param))]
    assert text_pieces == [answer.text, answer.reference_list()] and answer.references
    assert list(rag.query_stream(QUESTION, param)) == text_pieces
    assert "".join(text_pieces) == rag.query(QUESTION, param)


def test_a_streamed_cited_answer_drops_citations_of_sources_not_sent() -> None:
    from graphrag.operators.retrieval import CitationStream, keep_valid_citations
    from graphrag.records import Chunk, Retrieval

    retrieval = Retrieval(question="q", mode="naive", chunks=(Chunk(id="a", content="x", doc_id="d"),
                                                              Chunk(id="b", content="y", doc_id="d")))
    text = "Founded in 1921 [1]. Built compasses [7]. Both [2, 9]. A [list] of [ 3 things ]. End [2]"
    kept = keep_valid_citations(text, retrieval).text
    for size in (1, 2, 3, 5, 8):  # every way the model's pieces may split a citation
        stream = CitationStream(retrieval)
        out = [stream.feed(text[i:i + size]) for i in range(0, len(text), size)] + [stream.end()]
        assert "".join(out) == kept
    assert kept == "Founded in 1921 [1]. Built compasses. Both [2]. A [list] of [ 3 things ]. End [2]"


def test_a_sync_stream_stopped_early_stops_its_query(streaming: Any, caplog: pytest.LogCaptureFixture) -> None:
    from graphrag.aio import thread_loop

    rag, _ = streaming
    stream = rag.query_stream(QUESTION, QueryParam(mode="naive", response_type="sync, stopped early"))
    assert next(stream)
    assert [t for t in asyncio.all_tasks(thread_loop()) if not t.done()]  # the query, paused between pieces
    stream.close()
    assert not [t for t in asyncio.all_tasks(thread_loop()) if not t.done()]
    assert rag.query(QUESTION, QueryParam(mode="naive", only_need_context=True))
    gc.collect()  # a query left running would end in an error once its connection closed
    assert not [r for r in caplog.records if r.name == "asyncio"]


def _unfinished(loop: asyncio.AbstractEventLoop) -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks(loop) if not t.done()]


def test_a_sync_stream_dropped_inside_a_running_loop_stops_its_query_at_the_next_sync_call(
        streaming: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its end cannot run on the thread's loop while another loop runs: it is left to that loop's
    next turn, rather than raised into the collector with the query left paused for good."""
    import sys

    from graphrag.aio import thread_loop

    rag, _ = streaming
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    streams = [rag.query_stream(QUESTION, QueryParam(mode="naive", response_type="sync, dropped in a loop"))]
    assert next(streams[0]) and _unfinished(thread_loop())

    async def drop() -> None:
        streams.clear()

    asyncio.run(drop())
    assert not unraisable
    assert rag.query(QUESTION, QueryParam(mode="naive", only_need_context=True))
    assert not _unfinished(thread_loop())


def test_a_sync_stream_outliving_its_thread_ends_quietly(streaming: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread's end closed the loop its query ran on (and the query with it); dropping the
    stream later, on another thread, has nothing left to end and runs nothing on this thread's loop."""
    import sys
    import threading

    from graphrag.aio import thread_loop

    rag, _ = streaming
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    kept: list[Any] = []

    def start() -> None:
        stream = rag.query_stream(QUESTION, QueryParam(mode="naive", response_type="sync, on a thread"))
        assert next(stream)
        kept.extend([stream, thread_loop()])

    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
    stream, loop = kept
    assert loop.is_closed()
    kept.clear()
    del stream
    gc.collect()
    assert not unraisable and not _unfinished(thread_loop())
