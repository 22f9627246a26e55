"""Prepared documents in, each one's outcome out: new, updated (a document at an indexed
source with other content replaces it), unchanged (costs nothing), or moved (known content
at a new source: only its records follow it)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from graphrag.config import llm_configured
from graphrag.failed_chunks import read_failed_chunks
from graphrag.indexing.index_meta import nothing_changed
from graphrag.indexing.pipeline import Pipeline, without_marks
from graphrag.stores import Stores

logger = logging.getLogger(__name__)


@dataclass
class Inserted:
    """What an insert did: the pipeline's ``summary``, and per document id (``outcomes``)
    what became of it with the source the index now records for it."""

    summary: dict[str, Any]
    outcomes: dict[str, tuple[str, Optional[str]]] = field(default_factory=dict)
    already_indexed: int = 0
    moved: int = 0


async def insert_documents(write: Pipeline, documents: dict[str, dict[str, Any]],
                           may_move: Optional[Callable[[str, str], bool]] = None) -> Inserted:
    """Insert prepared documents inside ``write`` (opened with only the documents and
    ``index_meta``; the rest is opened when there is work). A known document is "moved" when
    ``may_move(doc_id, old_source)`` allows it."""
    stores = write.stores
    unknown = await stores.full_docs.filter_keys(list(documents))
    new_docs = {k: v for k, v in documents.items() if k in unknown}
    failed = await read_failed_chunks(stores.index_meta)
    waiting = 0
    if failed and write.config.extraction == "llm" and not llm_configured(write.config):
        logger.warning("%d chunk(s) whose extraction failed wait for a retry, which needs an LLM; none is "
                       "configured, so this insert leaves them waiting", len(failed))
        waiting, failed = len(failed), {}
    if new_docs or failed:
        write.get_ready_to_extract()
    replaced: list[str] = []
    replaced_sources: set[Optional[str]] = set()
    if any(d.get("source") for d in new_docs.values()):
        from graphrag.operators.documents import superseded_documents

        indexed = await stored_sources(stores)
        replaced = superseded_documents(new_docs, indexed, keep=documents)
        replaced_sources = {indexed[k] for k in replaced}
    known_sources: dict[str, Optional[str]] = {}
    moved: dict[str, str] = {}
    if may_move is not None:
        from graphrag.operators.documents import moved_documents

        known_sources = await stored_sources(stores, [k for k in documents if k not in unknown])
        moved = moved_documents(documents, known_sources, may_move)
    if new_docs or replaced or moved or failed:
        await stores.index_start()
    if moved:
        await record_moves(stores, {k: documents[k] for k in moved})
    if new_docs or replaced or failed:
        summary = await write.apply_changes(new_docs, replaced, retry_failed=bool(failed))
    else:
        summary = {**await nothing_changed(stores), "chunks_waiting": waiting}

    def outcome(doc_id: str, source: Optional[str]) -> tuple[str, Optional[str]]:
        if doc_id in moved:
            return "moved", source
        if doc_id not in new_docs:
            return "unchanged", known_sources.get(doc_id)
        return ("updated" if source in replaced_sources else "new"), source

    return Inserted(summary, {k: outcome(k, d.get("source")) for k, d in documents.items()},
                    already_indexed=len(documents) - len(new_docs), moved=len(moved))


async def stored_sources(stores: Stores, doc_ids: Optional[list[str]] = None) -> dict[str, Optional[str]]:
    """``{doc_id: source}`` of the given indexed documents (default: all of them)."""
    keys = await stores.full_docs.all_keys() if doc_ids is None else doc_ids
    records = await stores.full_docs.get_by_ids(keys, fields={"source"})
    return {k: r.get("source") for k, r in zip(keys, records) if r}


async def record_moves(stores: Stores, moved: dict[str, dict[str, Any]]) -> None:
    """Indexed documents found under a new source: their records and their chunks'
    positions follow it; nothing is extracted again."""
    from graphrag.operators.positions import locate_chunks

    ids = list(moved)
    stored = dict(zip(ids, await stores.full_docs.get_by_ids(ids)))
    chunk_ids = sorted({c for r in stored.values() if r for c in r.get("chunk_ids", [])})
    chunks = {c: r for c, r in zip(chunk_ids, await stores.text_chunks.get_by_ids(chunk_ids))
              if r and r.get("full_doc_id") in moved}
    await stores.text_chunks.upsert(locate_chunks(chunks, moved))  # type: ignore[arg-type]
    await stores.full_docs.upsert({k: {**r, **without_marks(moved[k])} for k, r in stored.items() if r})
