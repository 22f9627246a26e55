"""A query's answer streamed as the model writes it (``GraphRAG.aquery_stream``).

The query runs as usual; only its final answer call is streamed: the mode hands it to the
llm's ``final_answer`` (``operators/query_context.answer_from_context``), which here forwards
each piece to the caller while the query waits for the whole text.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable

_DONE = object()


class _StreamedAnswer:
    """The best model's client for one query: every call as usual, the final answer streamed."""

    def __init__(self, llm: Any, pieces: "asyncio.Queue[Any]") -> None:
        self._llm = llm
        self._pieces = pieces
        self.streamed = False

    async def __call__(self, *args: Any, **kwargs: Any) -> str:
        return await self._llm(*args, **kwargs)

    async def final_answer(self, prompt: str, **kwargs: Any) -> str:
        parts: list[str] = []
        async for piece in self._llm.stream(prompt, **kwargs):
            parts.append(piece)
            self.streamed = True
            self._pieces.put_nowait(piece)
        return "".join(parts)


async def stream_answer(run_query: Callable[..., Awaitable[str]], query: str, param: Any) -> AsyncIterator[str]:
    """Pieces of ``run_query(query, param, wrap_llm)``'s answer as they come; an answer that
    was not streamed (a context, a canned reply, no LLM) as one piece at the end."""
    pieces: asyncio.Queue[Any] = asyncio.Queue()
    wrappers: list[_StreamedAnswer] = []

    def wrap(llm: Any) -> _StreamedAnswer:
        wrappers.append(_StreamedAnswer(llm, pieces))
        return wrappers[-1]

    task = asyncio.ensure_future(run_query(query, param, wrap))
    task.add_done_callback(lambda _: pieces.put_nowait(_DONE))
    try:
        while (piece := await pieces.get()) is not _DONE:
            yield piece
        answer = task.result()
        if not any(w.streamed for w in wrappers):
            yield answer
    finally:
        if not task.done():  # the consumer stopped reading: stop the query too
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
