"""What ``index_meta`` keeps beside the stores: the document and community counts a query
checks without reading the documents, the cumulative LLM usage, and whether the last write
kept the relation vectors."""
from __future__ import annotations

from typing import Any, Optional

from graphrag.embedding_scheme import record_scheme
from graphrag.stores import Stores

# An insert's extraction outcome counts (see ``failed_chunks.extraction_counts``), none extracted.
NO_EXTRACTION_COUNTS: dict[str, Any] = {
    "chunks_retried": 0, "chunks_extracted": 0, "chunks_empty": 0, "chunks_failed": 0, "chunks_repaired": 0,
    "chunks_fallback": 0, "chunks_waiting": 0, "reports_failed": 0, "warnings": []}


async def update_index_meta(stores: Stores, usage: dict[str, dict[str, Any]], long_texts: Optional[str],
                            embedder: Optional[str]) -> None:
    """Add a write's LLM ``usage`` to the totals and recount; ``long_texts`` and ``embedder``:
    the embedding scheme and model, recorded once the index holds documents."""
    meta = stores.index_meta
    if meta is None:
        return
    totals = dict(await meta.get_by_id("llm_usage") or {})
    for stage, counts in usage.items():
        stage_totals = dict(totals.get(stage, {}))
        for key, value in counts.items():
            stage_totals[key] = stage_totals.get(key, 0) + value
        totals[stage] = stage_totals
    before = await meta.get_by_id("counts")
    counts = {**(before or {}), "documents": len(await stores.full_docs.all_keys())}
    if stores.is_open("community_reports"):
        counts["communities"] = len(await stores.community_reports.all_keys())
    if usage or counts != before:  # a no-op insert writes nothing
        await meta.upsert({"llm_usage": totals, "counts": counts})
    if counts["documents"]:
        await record_scheme(meta, long_texts, embedder)


# Set by a write that keeps the relation vectors (``enable_relation_vectors``), removed by a
# write that changes the graph without them: while it is set, the ``relations`` store holds
# exactly the graph's relations, so the next write with them on skips comparing the two id
# lists (``operators/graph_update.relation_vectors_to_catch_up``).
RELATION_VECTORS_KEPT = "relation_vectors_kept"


async def note_relation_vectors(stores: Stores) -> bool:
    """Record whether this write keeps the relation vectors, and return whether the write
    before it did (then their store needs no catch-up). False for a dir written before the
    record, so its first write with them on compares the id lists once."""
    meta = stores.index_meta
    if meta is None:
        return False
    kept_before = bool((await meta.get_by_id(RELATION_VECTORS_KEPT) or {}).get("kept"))
    kept_now = stores.relations_vdb is not None
    if kept_now and not kept_before:
        await meta.upsert({RELATION_VECTORS_KEPT: {"kept": True}})
    elif kept_before and not kept_now:
        await meta.delete([RELATION_VECTORS_KEPT])
    return kept_before


async def recorded_count(stores: Stores, what: str) -> Optional[int]:
    """A count kept in ``index_meta``; None for a dir written before the counts."""
    meta = stores.index_meta
    record = await meta.get_by_id("counts") if meta is not None else None
    count = record.get(what) if isinstance(record, dict) else None
    return count if isinstance(count, int) else None


async def has_documents(stores: Stores) -> bool:
    count = await recorded_count(stores, "documents")
    return count > 0 if count is not None else bool(await stores.full_docs.all_keys())


async def nothing_changed(stores: Stores) -> dict[str, Any]:
    """The summary of a write that found nothing to do."""
    communities = await recorded_count(stores, "communities")
    if communities is None:
        communities = len(await stores.community_reports.all_keys())
    return {"documents_inserted": 0, "documents_removed": 0, "chunks_inserted": 0, "chunks_removed": 0,
            "entities_changed": 0, "malformed_records_skipped": 0, "communities": communities,
            "reports_generated": 0, **NO_EXTRACTION_COUNTS, "stage_seconds": {}}
