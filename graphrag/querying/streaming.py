"""A query's answer streamed as the model writes it (``GraphRAG.aquery_stream`` and
``aquery_result_stream``).

The query runs as usual; only its final answer call is streamed: the mode hands it to the
llm's ``final_answer`` (``operators/query_context.answer_from_context``), which here forwards
each piece to the caller while the query waits for the whole text. A cited answer's pieces
pass through ``CitationStream`` first, so what is streamed is the answer's kept text: a
citation of a number the context does not hold never goes out.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, AsyncGenerator, Awaitable, Callable, Optional

from graphrag.operators.retrieval import CitationStream
from graphrag.records import Answer, Retrieval

if TYPE_CHECKING:
    from graphrag.llm.client import LLMClient

_DONE = object()

# Wraps the best model's client for one query; handed the retrieval a cited answer numbers.
WrapLLM = Callable[[Any, Optional[Retrieval]], Any]


class _StreamedAnswer:
    """The best model's client for one query: every call as usual, the final answer streamed."""

    def __init__(self, llm: LLMClient, pieces: "asyncio.Queue[Any]", citations: Optional[CitationStream]) -> None:
        self._llm = llm
        self._pieces = pieces
        self._citations = citations

    async def __call__(self, *args: Any, **kwargs: Any) -> str:
        return await self._llm(*args, **kwargs)

    async def final_answer(self, prompt: str, **kwargs: Any) -> str:
        parts: list[str] = []
        async for piece in self._llm.stream(prompt, **kwargs):
            parts.append(piece)
            self._send(self._citations.feed(piece) if self._citations is not None else piece)
        if self._citations is not None:
            self._send(self._citations.end())
        return "".join(parts)

    def preface(self, text: str) -> None:
        """Text the answer opens with, sent before the model writes (a degraded answer's note)."""
        self._send(text)

    def _send(self, text: str) -> None:
        if text:
            self._pieces.put_nowait(text)


class AnswerStream:
    """An answer's text in pieces as the model writes them (``async for``); once they have
    all come, :attr:`answer` is the whole :class:`~graphrag.records.Answer`: its text is the
    pieces joined, its references the sources a cited answer kept. What no model wrote (a
    cached answer, a context, a canned reply, no LLM) comes as one piece, at the end."""

    def __init__(self, run_query: Callable[[WrapLLM], Awaitable[Answer]]) -> None:
        self._run_query = run_query
        self._pieces: Optional[AsyncGenerator[str, None]] = None
        self.answer: Optional[Answer] = None

    def __aiter__(self) -> "AnswerStream":
        return self

    async def __anext__(self) -> str:
        if self._pieces is None:  # the query starts with the first piece asked for
            self._pieces = self._stream()
        return await self._pieces.__anext__()

    async def aclose(self) -> None:
        """Stop reading before the end: the query stops too (``contextlib.aclosing``)."""
        if self._pieces is not None:
            await self._pieces.aclose()

    async def _stream(self) -> AsyncGenerator[str, None]:
        pieces: asyncio.Queue[Any] = asyncio.Queue()

        def wrap(llm: LLMClient, retrieval: Optional[Retrieval]) -> _StreamedAnswer:
            return _StreamedAnswer(llm, pieces, CitationStream(retrieval) if retrieval is not None else None)

        task = asyncio.ensure_future(self._run_query(wrap))
        task.add_done_callback(lambda _: pieces.put_nowait(_DONE))
        sent: list[str] = []
        try:
            while (piece := await pieces.get()) is not _DONE:
                sent.append(piece)
                yield piece
            self.answer = task.result()
            # The text beyond what the model streamed (all of it when nothing was) comes last.
            streamed = "".join(sent)
            if self.answer.text.startswith(streamed) and len(self.answer.text) > len(streamed):
                yield self.answer.text[len(streamed):]
        finally:
            if not task.done():  # the consumer stopped reading: stop the query too
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
