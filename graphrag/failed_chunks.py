"""Chunks whose extraction failed, kept for a retry rather than counted as indexed.

A chunk is indexed once its document is in ``full_docs``; a chunk the model answered
with prose would then be "done" with nothing in it, and re-running with a better model
would skip it. So the failed ones are listed in ``index_meta`` under ``failed_chunks``
(``{chunk_id: {"answer": <sample>, "fallback": bool}}``) and every insert extracts them
again; the LLM cache makes that free until something (the model, the prompt) changes.
A working dir written before this record has no failed chunks, and code that predates it
never reads it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from graphrag.operators.extraction import EMPTY, EXTRACTED, FAILED
from graphrag.operators.format_failures import FormatFailures, short_sample
from graphrag.schema import ChunkExtraction

if TYPE_CHECKING:
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)

FAILED_CHUNKS = "failed_chunks"

RETRY_ADVICE = ("They are recorded as failed, and the next insert (or `graphrag index`) extracts them again. "
                "To get their entities: a stronger model, extraction_fallback='nlp' (CLI: --extraction-fallback "
                "nlp) for LLM-free extraction of the chunks the model fails on, or extraction='nlp' "
                "(CLI: --offline) for no LLM at all.")
FALLBACK_ADVICE = ("The LLM-free extractor stood in for them (extraction_fallback='nlp'); the next insert asks "
                   "the model again, so a stronger model can replace those records.")


async def read_failed_chunks(meta: Optional[BaseKVStorage]) -> dict[str, dict[str, Any]]:
    """The recorded failed chunks; {} for a dir with none (or written before the record)."""
    record = await meta.get_by_id(FAILED_CHUNKS) if meta is not None else None
    if not isinstance(record, dict):
        return {}
    return {k: v if isinstance(v, dict) else {} for k, v in record.items()}


def failed_after(before: Mapping[str, dict[str, Any]], extractions: Mapping[str, ChunkExtraction],
                 removed_chunks: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The failed chunks once a write has extracted ``extractions`` and dropped ``removed_chunks``."""
    gone = set(removed_chunks)
    after = {k: v for k, v in before.items() if k not in extractions and k not in gone}
    for chunk_id, found in extractions.items():
        if found.get("status") == FAILED:
            after[chunk_id] = {"answer": short_sample(str(found.get("answer", ""))),
                               "fallback": bool(found.get("fallback"))}
    return dict(sorted(after.items()))


async def write_failed_chunks(meta: Optional[BaseKVStorage], failed: dict[str, dict[str, Any]], before: Mapping[str, Any]
                              ) -> None:
    if failed:
        await meta.upsert({FAILED_CHUNKS: failed})
    elif before:
        await meta.delete([FAILED_CHUNKS])


def extraction_counts(extractions: Mapping[str, ChunkExtraction], warning_share: float
                      ) -> tuple[dict[str, int], Optional[str]]:
    """Per-insert counts of what extraction made of its chunks, and the warning to give when
    more than ``warning_share`` of them failed (logged here, once)."""
    tally = FormatFailures("chunks")
    counts = {"chunks_extracted": 0, "chunks_empty": 0, "chunks_failed": 0, "chunks_repaired": 0,
              "chunks_fallback": 0}
    for found in extractions.values():
        # The LLM-free extractor gives no status: it cannot fail.
        status = found.get("status") or (EXTRACTED if found["entities"] or found["relations"] else EMPTY)
        counts[f"chunks_{status}"] += 1
        counts["chunks_repaired"] += bool(found.get("repaired"))
        counts["chunks_fallback"] += bool(found.get("fallback"))
        tally.record(failed=status == FAILED, repaired=bool(found.get("repaired")), answer=str(found.get("answer", "")))
    advice = FALLBACK_ADVICE if counts["chunks_fallback"] == counts["chunks_failed"] else RETRY_ADVICE
    return counts, tally.log(logger, advice, warning_share)
