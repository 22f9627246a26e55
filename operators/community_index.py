"""What is kept about every community in ``index_meta``, so a small write need not read them all.

- **Sizes**: each community's number of source chunks. A community's occurrence (global mode
  ranks reports by it) is its chunk count over the largest community's; a write that reads
  only the communities it changed still needs the others' counts to know the largest, and
  readers turn a report's chunk count into its occurrence with the largest one now (an
  occurrence stored in a report is as of that report's write).
- **Reports no LLM wrote** (extractive ones, and fallbacks after unreadable answers): an LLM
  run tries each of them again, changed or not, so it must find them without reading every
  report. A small component's report (``SOURCE_SMALL``) is not among them: an LLM run made it
  so by rule, and makes it again only when its community changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Mapping, Optional

from graphrag.errors import StoreUnavailableError
from graphrag.schema import CommunitySchema

if TYPE_CHECKING:
    from graphrag.storage.base import BaseGraphStorage, BaseKVStorage

RECORD = "communities"  # index_meta key: {"sizes": {community id: chunks}, "not_from_llm": [community id]}


@dataclass
class CommunityIndex:
    sizes: dict[str, int] = field(default_factory=dict)
    not_from_llm: set[str] = field(default_factory=set)

    def as_record(self) -> dict[str, Any]:
        return {"sizes": dict(sorted(self.sizes.items(), key=lambda item: (len(item[0]), item[0]))),
                "not_from_llm": sorted(self.not_from_llm, key=lambda c: (len(c), c))}


async def read_index(meta: Optional[BaseKVStorage]) -> Optional[CommunityIndex]:
    """The recorded index (None: not recorded, as in a working dir written before it was)."""
    record = await meta.get_by_id(RECORD) if meta is not None else None
    if not isinstance(record, dict):
        return None
    try:
        return CommunityIndex({str(k): int(v) for k, v in dict(record["sizes"]).items()},
                              {str(c) for c in record["not_from_llm"]})
    except (KeyError, TypeError, ValueError):
        return None


def sizes_after(index: Optional[CommunityIndex], schema: Mapping[str, CommunitySchema],
                only: Optional[Collection[str]]) -> dict[str, int]:
    """Every community's size after a write whose ``schema`` holds every community (``only``
    None) or the communities ``only`` still there; each of those gets its occurrence set."""
    kept = {} if only is None or index is None else {c: n for c, n in index.sizes.items() if c not in only}
    sizes = {**kept, **{c: len(s["chunk_ids"]) for c, s in schema.items()}}
    largest = max(sizes.values(), default=0) or 1
    for community in schema.values():
        community["occurrence"] = len(community["chunk_ids"]) / largest
    return sizes


def index_after(index: Optional[CommunityIndex], sizes: dict[str, int], records: Mapping[str, dict],
                only: Optional[Collection[str]]) -> CommunityIndex:
    """The index after a write that reported ``records``: every community's, or (``only``) those
    of the communities it changed."""
    from graphrag.operators.community_reports import SOURCE_LLM, SOURCE_SMALL

    not_from_llm = {k for k, r in records.items() if r.get("report_source", SOURCE_LLM) not in (SOURCE_LLM, SOURCE_SMALL)}
    if only is not None and index is not None:
        not_from_llm |= index.not_from_llm - set(only)
    return CommunityIndex(sizes, not_from_llm)


async def largest_community(meta: Optional[BaseKVStorage]) -> Optional[int]:
    """The largest community's number of source chunks (None if not known: not recorded, or a
    store that cannot be reached, which a query can answer without)."""
    try:
        index = await read_index(meta)
    except StoreUnavailableError:
        return None
    return (max(index.sizes.values(), default=0) or None) if index is not None else None


async def communities_to_report(graph: BaseGraphStorage, reports: BaseKVStorage, schema: Optional[dict[str, Any]],
                                only: Optional[set[str]], keys: set[str], index: Optional[CommunityIndex],
                                extractive: bool) -> tuple[dict[str, Any], Optional[set[str]]]:
    """The schema to report and the communities it is limited to (None: every community): a
    write's changed communities, plus, in an LLM run, those whose report no LLM wrote (tried
    again, changed or not); every community when the others' reports cannot be kept unread."""
    if only is not None and (index is None or not await _reports_current(graph, reports, keys - only, index.sizes)):
        schema, only = None, None
    if schema is None:
        return await graph.community_schema(), None
    if only is not None and not extractive and index is not None and index.not_from_llm - only:
        retry = index.not_from_llm - only
        schema = {**schema, **await graph.community_schema(only=retry)}
        only = only | retry
    return schema, only


async def _reports_current(graph: BaseGraphStorage, reports: BaseKVStorage, untouched: set[str],
                           sizes: dict[str, int]) -> bool:
    """Whether the reports a write leaves unread are of this version's making, judged on the
    smallest (after a version bump, every report must be redone)."""
    from graphrag.operators.community_reports import reports_of_this_version

    smallest = min(untouched, key=lambda c: (sizes.get(c, 0), c), default=None)
    if smallest is None:
        return True
    # Untouched, the community is as its record stores it: no need to find its members again.
    record = await reports.get_by_id(smallest)
    return isinstance(record, dict) and await reports_of_this_version(graph, record, record)


def with_occurrence(record: Mapping[str, Any], largest: Optional[int]) -> dict[str, Any]:
    """A stored community report with its occurrence relative to the largest community now;
    as stored when ``largest`` is not known."""
    chunk_ids = record.get("chunk_ids")
    if not largest or not isinstance(chunk_ids, list):
        return dict(record)
    return {**record, "occurrence": min(len(chunk_ids) / largest, 1.0)}
