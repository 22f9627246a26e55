"""Community sizes: each community's number of source chunks, kept in ``index_meta``.

A community's occurrence (global mode ranks reports by it) is its chunk count over the
largest community's. A write that reads only the communities it changed must still know the
others' counts to know the largest, so every count is recorded here, and readers turn a
report's chunk count into its occurrence with the largest one now; an occurrence stored in a
report is as of that report's write.
"""
from __future__ import annotations

from typing import Any, Collection, Mapping, Optional

from graphrag.errors import StoreUnavailableError
from graphrag.schema import CommunitySchema

RECORD = "community_sizes"  # index_meta key: {community id: number of source chunks}


async def read_sizes(meta: Any) -> Optional[dict[str, int]]:
    """The recorded sizes (None: not recorded, as in a working dir written before they were)."""
    record = await meta.get_by_id(RECORD) if meta is not None else None
    if not isinstance(record, dict):
        return None
    try:
        return {str(k): int(v) for k, v in record.items()}
    except (TypeError, ValueError):
        return None


def updated_sizes(sizes: Optional[dict[str, int]], schema: Mapping[str, CommunitySchema],
                  only: Optional[Collection[str]]) -> dict[str, int]:
    """The sizes after a write whose ``schema`` holds every community (``only`` None), or the
    communities ``only`` that are still there; each of them gets its occurrence set."""
    kept = {} if only is None or sizes is None else {c: n for c, n in sizes.items() if c not in only}
    new = {**kept, **{c: len(s["chunk_ids"]) for c, s in schema.items()}}
    largest = max(new.values(), default=0) or 1
    for community in schema.values():
        community["occurrence"] = len(community["chunk_ids"]) / largest
    return dict(sorted(new.items(), key=lambda item: (len(item[0]), item[0])))


async def largest_community(meta: Any) -> Optional[int]:
    """The largest community's number of source chunks (None if not known: not recorded, or a
    store that cannot be reached, which a query can answer without)."""
    try:
        sizes = await read_sizes(meta)
    except StoreUnavailableError:
        return None
    return (max(sizes.values(), default=0) or None) if sizes is not None else None


def with_occurrence(record: Mapping[str, Any], largest: Optional[int]) -> dict[str, Any]:
    """A stored community report with its occurrence relative to the largest community now;
    as stored when ``largest`` is not known."""
    chunk_ids = record.get("chunk_ids")
    if not largest or not isinstance(chunk_ids, list):
        return dict(record)
    return {**record, "occurrence": min(len(chunk_ids) / largest, 1.0)}
