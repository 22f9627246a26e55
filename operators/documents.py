"""Prepare stage and chunk plan: what an insert or delete adds and removes, before any LLM call.

Pure functions over records; the pipeline reads what they need from the stores and writes
what they return.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Union

from graphrag.errors import InvalidInputError
from graphrag.schema import ChunkRecord, strip_control_chars

from .chunking import doc_id_for

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

logger = logging.getLogger(__name__)


def prepare_documents(docs: Union[str, Iterable[str]], sources: Optional[Iterable[Optional[str]]] = None,
                      details: Optional[Iterable[Mapping[str, Any]]] = None
                      ) -> tuple[dict[str, dict[str, Any]], int]:
    """Validate and normalise input before anything is touched: ``({doc_id: record}, skipped)``.

    ``details`` (one per document) come from a file reader: its ``title`` and ``marks``
    (``[offset, page, heading]`` lists into the text, see ``operators/positions.py``)."""
    if isinstance(docs, (str, bytes)):
        docs = [docs]  # type: ignore[list-item]
    if docs is None:
        raise TypeError("insert() needs a string or a list of strings, got None")
    items = list(docs)
    source_list = list(sources) if sources is not None else [None] * len(items)
    if len(source_list) != len(items):
        raise InvalidInputError(f"got {len(items)} documents but {len(source_list)} sources")
    for i, doc in enumerate(items):
        if isinstance(doc, bytes):
            raise TypeError(f"document {i} is bytes; decode it to str first (e.g. data.decode('utf-8'))")
        if not isinstance(doc, str):
            raise TypeError(f"document {i} is {type(doc).__name__}, expected str")
    detail_list = list(details) if details is not None else [{}] * len(items)
    out: dict[str, dict[str, Any]] = {}
    skipped = 0
    for doc, source, detail in zip(items, source_list, detail_list):
        # Lone surrogates (which UTF-8 cannot store) become "?", control characters go.
        content = strip_control_chars(doc.encode("utf-8", "replace").decode("utf-8")).strip()
        if not content:
            skipped += 1
            continue
        record: dict[str, Any] = {"content": content}
        if source:
            record["source"] = str(source)
        record.update(detail)
        if content != doc:  # the marks' offsets were into the text before cleaning
            record.pop("marks", None)
        out.setdefault(doc_id_for(content), record)
    if skipped:
        logger.warning("Skipped %d empty or whitespace-only document(s)", skipped)
    return out, skipped


def superseded_documents(new_docs: Mapping[str, Mapping[str, Any]],
                         indexed_sources: Mapping[str, Optional[str]], keep: Iterable[str] = ()) -> list[str]:
    """Indexed documents that an incoming one with the same ``source`` replaces (an update);
    never one in ``keep`` (the whole incoming batch: its content is still there)."""
    sources = {d["source"] for d in new_docs.values() if d.get("source")}
    kept = set(keep) | set(new_docs)
    return [k for k, source in indexed_sources.items() if source in sources and k not in kept]


def moved_documents(incoming: Mapping[str, Mapping[str, Any]], indexed_sources: Mapping[str, Optional[str]],
                    may_move: Callable[[str, str], bool]) -> dict[str, str]:
    """``{doc_id: new source}`` for indexed documents arriving under another source, when
    ``may_move(doc_id, old_source)`` says the old one no longer holds them (a moved or
    renamed file): only their source changes, no extraction runs again. A copy (the old
    source still holds the content) keeps the first source."""
    moved: dict[str, str] = {}
    for doc_id, record in incoming.items():
        old, new = indexed_sources.get(doc_id), record.get("source")
        if doc_id in indexed_sources and new and old != new and (not old or may_move(doc_id, old)):
            moved[doc_id] = new
    return moved


ChunkFunc = Callable[..., dict[str, ChunkRecord]]


def chunk_documents(docs: Mapping[str, str], chunk_func: ChunkFunc, *, size: int, overlap: int,
                    tokenizer: Tokenizer) -> tuple[dict[str, ChunkRecord], dict[str, list[str]]]:
    """All chunks, and each document's own chunk ids (documents can share a chunk, e.g. a
    common header, and each must keep it until the last of them is deleted)."""
    chunks: dict[str, ChunkRecord] = {}
    by_doc: dict[str, list[str]] = {}
    for doc_id, text in docs.items():
        own = chunk_func({doc_id: text}, size=size, overlap=overlap, tokenizer=tokenizer)
        by_doc[doc_id] = list(own)
        for chunk_id, record in own.items():
            chunks.setdefault(chunk_id, record)
    return chunks, by_doc


@dataclass
class ChunkPlan:
    """What a write does to the chunks: new ones to extract, ones to drop with their recorded
    extractions, and shared ones whose recorded document must change because it is leaving."""

    new_chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    removed_chunks: set[str] = field(default_factory=set)
    reassigned: dict[str, str] = field(default_factory=dict)  # chunk id -> the document that keeps it
    # Leaving chunks an incoming document has too (an edited file's unchanged parts): stored
    # again as that document's, with its order and positions, without being extracted again.
    refreshed: dict[str, ChunkRecord] = field(default_factory=dict)


def plan_chunks(chunks: Mapping[str, ChunkRecord], unknown_chunk_ids: set[str],
                leaving_chunk_ids: set[str], staying_docs: Mapping[str, Iterable[str]]) -> ChunkPlan:
    """``chunks`` are the incoming documents' (``unknown_chunk_ids`` of them are not stored yet);
    ``leaving_chunk_ids`` belong to removed documents; ``staying_docs`` maps the other indexed
    documents to their chunk ids. A leaving chunk that another document still has stays."""
    removed = set(leaving_chunk_ids)
    kept_by: dict[str, str] = {}
    for doc_id, chunk_ids in staying_docs.items():
        for chunk_id in chunk_ids:
            if chunk_id in removed:
                removed.discard(chunk_id)
                kept_by[chunk_id] = doc_id
    refreshed = {chunk_id: chunks[chunk_id] for chunk_id in removed & set(chunks)}
    removed -= set(chunks)
    new_chunks = {k: v for k, v in chunks.items() if k in unknown_chunk_ids}
    return ChunkPlan(new_chunks=new_chunks, removed_chunks=removed, reassigned=kept_by, refreshed=refreshed)
