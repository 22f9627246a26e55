"""Structured retrieval and answers that cite their sources.

Each query mode's retriever (``QueryMode.retriever``, ``operators/modes.py``) returns a
:class:`~graphrag.records.Retrieval`: the records its context holds, and the context string
rendered from them by the same packing (what ``only_need_context`` returns).

A cited answer numbers what the context holds (chunks, or reports in global mode) from 1,
asks the model to cite those numbers as ``[n]``, and keeps only citations of numbers it
actually sent: an invented number is removed from the text, never shown as a reference.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Optional, Union

from graphrag.query_param import QueryParam
from graphrag.records import Answer, Chunk, CommunityReport, Document, Reference, Retrieval

from .modes import get_mode
from .query_context import answer_from_context, fail_response
from .query_global import map_reduce
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from graphrag.stores import Stores

    from .extraction import LLMCall

_CONTEXT_FIELD = {"local_rag_response_cited": "context_data", "naive_rag_response_cited": "content_data"}
EXCERPT_CHARS = 160
_DOCUMENT_FIELDS = {"source", "content", "chunk_ids", "title"}  # what Document.from_stored reads
# A citation, with the blanks before it (dropped with a citation that keeps no number).
_CITATION = re.compile(r"([ \t]*)\[(\d+(?:\s*,\s*\d+)*)\]")
# The end of a text that may yet become a citation once more text arrives: blanks, then an
# opened bracket with digits, commas and spaces only (nothing that would rule a citation out).
_OPEN_CITATION = re.compile(r"[ \t]*(?:\[[\d\s,]*)?\Z")


async def retrieve(question: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer) -> Optional[Retrieval]:
    """``param.mode``'s retrieval; numbered for citations when ``param.with_references``. It
    carries the mode asked for, whichever mode's retriever that one shares."""
    found = await get_mode(param.mode).retrieve()(question, stores, param, tokenizer, cited=param.with_references)
    return replace(found, mode=param.mode) if found is not None else None


class DocumentLookup:
    """Which document (id, ``source``, size, chunks) each chunk came from, remembered once read: graph
    calls ask about the same chunks again and again. Build a new one when the index changes."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores
        self._of_chunk: dict[str, Optional[Document]] = {}

    async def of_chunks(self, chunk_ids: Iterable[str]) -> dict[str, Document]:
        wanted = list(dict.fromkeys(c for c in chunk_ids if c not in self._of_chunk))
        if wanted:
            chunks = await self._stores.text_chunks.get_by_ids(wanted, fields={"full_doc_id"})
            doc_of = {c: r.get("full_doc_id") for c, r in zip(wanted, chunks) if r and r.get("full_doc_id")}
            doc_ids = list(dict.fromkeys(doc_of.values()))
            # The whole record's fields, so a reference shows the document's size and chunks;
            # each document is read once per lookup (one per index version).
            docs = await self._stores.full_docs.get_by_ids(doc_ids, fields=_DOCUMENT_FIELDS)
            by_id = {d: Document.from_stored(d, r) for d, r in zip(doc_ids, docs) if r is not None}
            for c in wanted:
                self._of_chunk[c] = by_id.get(doc_of.get(c, ""))
        return {c: d for c in chunk_ids if (d := self._of_chunk.get(c)) is not None}

    async def documents(self, chunk_ids: Iterable[str]) -> tuple[Document, ...]:
        """The distinct documents of ``chunk_ids``, in their order."""
        chunk_ids = list(chunk_ids)
        found = await self.of_chunks(chunk_ids)
        return tuple({found[c].id: found[c] for c in chunk_ids if c in found}.values())

    async def attach(self, retrieval: Retrieval) -> Retrieval:
        """``retrieval`` with every record's ``documents`` filled in."""
        async def docs(ids: Iterable[str]) -> tuple[Document, ...]:
            return await self.documents(ids)

        return replace(
            retrieval,
            chunks=tuple([replace(c, documents=await docs([c.id])) for c in retrieval.chunks]),
            entities=tuple([replace(e, documents=await docs(e.source_chunk_ids)) for e in retrieval.entities]),
            relations=tuple([replace(r, documents=await docs(r.source_chunk_ids)) for r in retrieval.relations]),
            reports=tuple([replace(r, documents=await docs(r.community.chunk_ids)) for r in retrieval.reports]),
        )


async def answer_with_references(retrieval: Optional[Retrieval], param: QueryParam, llm: LLMCall,
                                 tokenizer: Tokenizer) -> Answer:
    """Ask the model for an answer citing ``retrieval``'s numbered sources (documents already
    attached); keep the citations that name a source sent."""
    if retrieval is None:
        return Answer(text=fail_response())
    templates = get_mode(param.mode).cited_prompts
    if len(templates) == 2:  # map over the context's groups, then reduce
        text = await map_reduce(retrieval.question, retrieval.context_groups, param, llm, tokenizer, *templates)
    else:
        template, = templates
        text = await answer_from_context(retrieval.question, retrieval.context, param, llm, template,
                                         _CONTEXT_FIELD[template])
    return keep_valid_citations(text, retrieval)


def references_of(retrieval: Retrieval, numbers: Iterable[int]) -> tuple[Reference, ...]:
    sources = retrieval.citable()
    return tuple(_reference(n, sources[n - 1]) for n in sorted(set(numbers)) if 1 <= n <= len(sources))


def all_references(retrieval: Optional[Retrieval]) -> tuple[Reference, ...]:
    """Every source the context numbers (an answer without a model cites them all)."""
    return references_of(retrieval, range(1, len(retrieval.citable()) + 1)) if retrieval is not None else ()


def keep_valid_citations(text: str, retrieval: Retrieval) -> Answer:
    """``text`` with citations of numbers the context does not hold removed, and the
    references of the ones it keeps."""
    cited: list[int] = []
    kept = _strip_invalid_citations(text, len(retrieval.citable()), cited)
    return Answer(text=kept, references=references_of(retrieval, cited), retrieval=retrieval)


def _strip_invalid_citations(text: str, sources: int, cited: list[int]) -> str:
    """``text`` keeping the citations of numbers 1..``sources`` (added to ``cited``)."""
    def keep(match: re.Match) -> str:
        numbers = [int(n) for n in re.split(r"\s*,\s*", match.group(2))]
        kept = [n for n in numbers if 1 <= n <= sources]
        cited.extend(kept)
        return match.group(1) + "".join(f"[{n}]" for n in kept) if kept else ""

    return _CITATION.sub(keep, text)


class CitationStream:
    """:func:`keep_valid_citations`'s text for an answer arriving in pieces: what cannot be
    part of a citation goes out at once, a possible citation waits until it closes (or turns
    out not to be one). The pieces given out join to the same text as the whole answer's."""

    def __init__(self, retrieval: Retrieval) -> None:
        self._sources = len(retrieval.citable())
        self._held = ""

    def feed(self, piece: str) -> str:
        """The text ``piece`` lets out (maybe empty)."""
        text = self._held + piece
        cut = _OPEN_CITATION.search(text).start()  # type: ignore[union-attr]  # matches "" at the end
        self._held = text[cut:]
        return _strip_invalid_citations(text[:cut], self._sources, [])

    def end(self) -> str:
        """What was held back, once the answer is complete."""
        text, self._held = self._held, ""
        return _strip_invalid_citations(text, self._sources, [])


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rsplit(" ", 1)[0] + "..."


def _reference(number: int, source: Union[Chunk, CommunityReport]) -> Reference:
    if isinstance(source, Chunk):
        return Reference(number=number, documents=source.documents, excerpt=_excerpt(source.content),
                         chunk_id=source.id)
    report: CommunityReport = source
    return Reference(number=number, documents=report.documents,
                     excerpt=_excerpt(report.title or report.summary or report.text), report_id=report.community.id)
