"""The answer policy: which checks run before a mode, what stands in for a missing model, and
how an answer with references is built (see the package docstring)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Optional

from graphrag.errors import InvalidInputError
from graphrag.operators.query_context import fail_response
from graphrag.operators.retrieval import all_references, answer_with_references, retrieve
from graphrag.query_param import QueryParam, check_unicode
from graphrag.querying import degraded
from graphrag.querying.streaming import AnswerStream, WrapLLM
from graphrag.records import Answer, Retrieval

if TYPE_CHECKING:
    from graphrag.config import GraphRAGConfig
    from graphrag.graph_api import KnowledgeGraph
    from graphrag.operators.tokenizer import Tokenizer
    from graphrag.stores import Stores
    from graphrag.windows import ModelWindows

NO_LLM_NOTE = (
    "[No LLM is configured (set OPENAI_API_KEY / OPENAI_BASE_URL or pass best_model_func); "
    "below is the retrieved context instead of an answer.]"
)

EMPTY_INDEX_MESSAGE = "No documents are indexed in {working_dir} yet: insert some before asking questions."


@dataclass
class QueryEngine:
    """Everything one query reads, handed over explicitly by ``GraphRAG`` (built per call, so
    stores reopened after a failed write are the ones read).

    ``best_llm`` builds (or returns) the best model's client on first call; None when no LLM
    is configured, and the context is returned under :data:`NO_LLM_NOTE` instead of an answer.
    ``has_documents`` reads the recorded document count, without reading the documents.
    """

    config: "GraphRAGConfig"
    stores: "Stores"
    tokenizer: "Tokenizer"
    windows: "ModelWindows"
    graph: "KnowledgeGraph"  # the graph API: document lookups, entities by name
    has_documents: Callable[[], Awaitable[bool]]
    best_llm: Optional[Callable[[], Any]] = None

    def _empty_index(self) -> str:
        return EMPTY_INDEX_MESSAGE.format(working_dir=self.config.working_dir)

    async def retrieve(self, query: str, param: QueryParam) -> Retrieval:
        """What ``param.mode`` retrieves for ``query`` as records (each with its documents);
        nothing found (or nothing indexed): a Retrieval with no records and no context."""
        _check_question(query)
        return await self._retrieve_fitted(query, self.windows.fit_query(query, param))

    async def _retrieve_fitted(self, query: str, param: QueryParam) -> Retrieval:
        """:meth:`retrieve` with ``param`` already fitted to the model's window."""
        try:
            if not await self.has_documents():
                return Retrieval(question=query, mode=param.mode)
            found = await retrieve(query, self.stores, param, self.tokenizer)
            if found is None:
                return Retrieval(question=query, mode=param.mode)
            return await self.graph.documents.attach(found)
        finally:
            await self.stores.query_done()

    async def answer_result(self, query: str, param: QueryParam, wrap_llm: Optional[WrapLLM] = None) -> Answer:
        """The answer citing its sources; without an LLM (or with ``only_need_context``) the
        numbered context, every source listed. ``wrap_llm`` wraps the best model's client
        for this query (streaming does), handed the retrieval the answer cites."""
        _check_question(query)
        # Fitted before retrieving: the answer call carries the chat turns the window keeps.
        param = self.windows.fit_query(query, replace(param, with_references=True))
        retrieval = await self._retrieve_fitted(query, param)
        if not retrieval.context:
            empty = not await self.has_documents()
            return Answer(text=self._empty_index() if empty else fail_response(), retrieval=retrieval)
        if param.only_need_context or self.best_llm is None:
            note = "" if param.only_need_context else f"{NO_LLM_NOTE}\n\n"
            return Answer(text=note + retrieval.context, references=all_references(retrieval), retrieval=retrieval)
        llm = self.best_llm()
        try:
            return await answer_with_references(retrieval, param, wrap_llm(llm, retrieval) if wrap_llm else llm,
                                                self.tokenizer)
        finally:
            await self.stores.query_done()  # persists the answer in the LLM cache

    async def answer(self, query: str, param: QueryParam, wrap_llm: Optional[WrapLLM] = None) -> str:
        """``param.mode``'s answer (with its reference list when ``param.with_references``);
        ``wrap_llm`` wraps the best model's client for this query (streaming does)."""
        _check_question(query)
        if param.with_references:
            return str(await self.answer_result(query, param))
        if not await self.has_documents():
            await self.stores.query_done()
            return self._empty_index()
        no_llm = not param.only_need_context and self.best_llm is None
        if no_llm:
            param = replace(param, only_need_context=True)
        try:
            param = self.windows.fit_query(query, param)
            llm = None if param.only_need_context or self.best_llm is None else self.best_llm()
            if llm is not None and wrap_llm is not None:
                llm = wrap_llm(llm, None)
            # A graph or vector store that is down: answered from the others, with a warning.
            text = await degraded.answer(query, self.stores, self.graph, param, llm=llm, tokenizer=self.tokenizer)
        finally:
            await self.stores.query_done()
        return f"{NO_LLM_NOTE}\n\n{text}" if no_llm else text

    def stream_result(self, query: str, param: QueryParam) -> AnswerStream:
        """The answer's text in pieces as the model writes them, then the whole answer
        (``.answer``): with ``param.with_references``, the cited one and its references."""
        async def run(wrap_llm: WrapLLM) -> Answer:
            if param.with_references:
                return await self.answer_result(query, param, wrap_llm)
            return Answer(text=await self.answer(query, param, wrap_llm))

        return AnswerStream(run)

    async def stream(self, query: str, param: QueryParam) -> AsyncIterator[str]:
        """:meth:`stream_result`'s pieces, then a cited answer's reference list as one last
        piece (what :meth:`answer` ends with)."""
        async with contextlib.aclosing(self.stream_result(query, param)) as pieces:
            async for piece in pieces:
                yield piece
        assert pieces.answer is not None  # set once the pieces end
        if tail := pieces.answer.reference_list():
            yield tail


def _check_question(query: object) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    check_unicode(query, "query")
