"""Global queries: map the question over groups of community reports, then reduce.

1. Reports at ``level <= param.level`` rated at least ``global_min_community_rating``,
   ranked by occurrence then rating, at most ``global_max_consider_community`` of them.
2. Packed in order into groups; each group's table fits
   ``global_max_token_for_community_report`` (a report too long for a group of its own
   is cut to fit, so no selected report is lost).
3. One map call per group, concurrently, asking for scored points as JSON.
4. Points scored above 0, best first, cut to the same budget, go to one reduce call.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from typing import TYPE_CHECKING, Any, Optional, Sequence

from graphrag.prompts import render as render_prompt
from graphrag.query_param import QueryParam
from graphrag.records import CommunityReport, Retrieval

from .answer_formats import strip_reasoning
from .community_index import largest_community, with_occurrence
from .format_failures import FormatFailures
from .report_parsing import stored_rating
from .query_context import answer_from_context, csv_section, fail_response, pack_csv_section, pack_texts
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from graphrag.schema import JSONValue
    from graphrag.stores import Stores

    from .extraction import LLMCall

logger = logging.getLogger(__name__)

REPORT_HEADER = ["id", "content", "rating", "importance"]
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _as_float(value: JSONValue, default: float = 0.0) -> float:
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _NUMBER.search(value)
        if m:
            return float(m.group(0))
    return default


async def _ranked_reports(stores: Stores, param: QueryParam) -> list[tuple[str, dict]]:
    keys = await stores.community_reports.all_keys()
    if not keys:
        return []
    records = await stores.community_reports.get_by_ids(keys)
    largest = await largest_community(stores.index_meta)
    chosen = []
    for key, r in zip(keys, records):
        if not r:
            continue
        r = with_occurrence(r, largest)
        try:
            level = int(r.get("level", 0))
        except (TypeError, ValueError):
            continue
        rating = stored_rating(r)
        if level > param.level or rating < param.global_min_community_rating:
            continue
        chosen.append((-_as_float(r.get("occurrence")), -rating, key, r))
    chosen.sort(key=lambda item: item[:3])
    return [(key, r) for _, _, key, r in chosen[: param.global_max_consider_community]]


@functools.lru_cache(maxsize=4)
def _group_reports(reports: tuple[tuple[str, float, float], ...], max_tokens: int, tokenizer: Tokenizer,
                   first_id: int = 0) -> list[tuple[str, tuple[int, ...]]]:
    """Consecutive reports ``(text, rating, occurrence)`` packed into tables of at most
    ``max_tokens`` tokens each, rows numbered from ``first_id``; each table with the indices
    (into ``reports``) of the reports it holds. Row numbers run on without gaps over the
    reports sent, so a row's number always names one report sent.

    The tables do not depend on the question, so a process answering several global
    queries over the same reports tokenises them once (the key holds the report texts:
    changed reports miss the cache).
    """
    title = "Reports"
    groups: list[tuple[str, tuple[int, ...]]] = []
    if tokenizer.count(csv_section(title, REPORT_HEADER, [])) >= max_tokens:
        return []
    start, number = 0, first_id
    while start < len(reports):
        rows = [[n, text, rating, occurrence]
                for n, (text, rating, occurrence) in enumerate(reports[start:], number)]
        # A report too long for a group of its own is cut short; dropped only if not even that fits.
        text, kept, _ = pack_csv_section(title, REPORT_HEADER, rows, max_tokens, tokenizer, cut_column=1)
        if kept == 0:
            start += 1
            continue
        groups.append((text, tuple(range(start, start + kept))))
        start, number = start + kept, number + kept
    return groups


async def _report_tables(stores: Stores, param: QueryParam, tokenizer: Tokenizer, first_id: int
                         ) -> tuple[list[tuple[str, dict]], list[tuple[str, tuple[int, ...]]]]:
    """The ranked reports and the tables they are packed into (see ``_group_reports``)."""
    ranked = await _ranked_reports(stores, param)
    if not ranked:
        return [], []
    rows = tuple((str(r.get("report_string") or ""), stored_rating(r), _as_float(r.get("occurrence"))) for _, r in ranked)
    return ranked, _group_reports(rows, param.global_max_token_for_community_report, tokenizer, first_id)


async def retrieve_global(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer,
                          cited: bool = False) -> Optional[Retrieval]:
    """The community reports a global answer maps over, in rank order, and their tables (one
    per map call); None when no report qualifies. ``cited``: rows numbered from 1, the
    numbers a cited answer uses."""
    ranked, groups = await _report_tables(stores, param, tokenizer, 1 if cited else 0)
    if not groups:
        return None
    tables = tuple(table for table, _ in groups)
    reports = tuple(CommunityReport.from_stored(*ranked[i]) for _, sent in groups for i in sent)
    return Retrieval(question=query, mode="global", reports=reports, context="\n\n".join(tables),
                     context_groups=tables)


async def build_global_context(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer
                               ) -> Optional[list[str]]:
    """The report tables, one per map call; None when no community report qualifies. (The
    tables alone: a plain query does not pay for a record per report.)"""
    _, groups = await _report_tables(stores, param, tokenizer, 0)
    return [table for table, _ in groups] or None


def _json_candidates(text: str) -> list[Any]:
    """Every JSON value that can be read out of a model answer, most likely first."""
    found: list[Any] = []
    pieces = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for piece in pieces:
        piece = piece.strip()
        try:
            found.append(json.loads(piece))
            continue
        except ValueError:
            pass
        for i, ch in enumerate(piece):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(piece[i:])
                except ValueError:
                    continue
                found.append(value)
                break
    return found


def parse_points(text: str) -> list[dict[str, Any]]:
    """``[{"description", "score"}]`` from a map answer, however the model wrapped it.

    Accepts ``{"points": [...]}``, a bare list, fenced or prefaced JSON, points given as
    plain strings, and scores written as strings (``"85"``, ``"85/100"``). A point with no
    score counts as 1 (the model found it relevant but forgot to say how much).
    """
    for value in _json_candidates(strip_reasoning(text or "")):
        items: JSONValue = None
        if isinstance(value, list):
            items = value
        elif isinstance(value, dict):
            items = value.get("points")
            if items is None:
                lists = [v for v in value.values() if isinstance(v, list)]
                items = lists[0] if lists else ([value] if "description" in value else None)
        if not isinstance(items, list):
            continue
        points = []
        for item in items:
            if isinstance(item, str):
                desc, score = item, 1.0
            elif isinstance(item, dict):
                desc = item.get("description") or item.get("point") or item.get("text") or ""
                score = _as_float(item.get("score"), 0.0) if "score" in item else 1.0
            else:
                continue
            desc = str(desc).strip()
            if desc:
                points.append({"description": desc, "score": score})
        return points
    return []


def _score_text(score: float) -> str:
    return str(int(score)) if float(score).is_integer() else f"{score:g}"


async def global_query(query: str, stores: Stores, param: QueryParam, *, llm: LLMCall, tokenizer: Tokenizer) -> str:
    """Answer ``query`` by map-reduce over community reports."""
    groups = await build_global_context(query, stores, param, tokenizer)
    if not groups:
        return fail_response()
    if param.only_need_context:
        return "\n\n".join(groups)
    return await map_reduce(query, groups, param, llm, tokenizer)


async def map_reduce(query: str, groups: Sequence[str], param: QueryParam, llm: LLMCall, tokenizer: Tokenizer,
                     map_template: str = "global_map_rag_points",
                     reduce_template: str = "global_reduce_rag_response") -> str:
    """One map call per report table, then one reduce call over the points scored above 0."""
    kwargs = dict(param.global_special_community_map_llm_kwargs)

    failures = FormatFailures("global map answers")

    async def map_group(table: str) -> list[dict[str, Any]]:
        system_prompt = render_prompt(map_template, context_data=table)
        answer = await llm(query, stage="query", system_prompt=system_prompt, **kwargs)
        points = parse_points(answer)
        repaired = False
        if not points:  # one more turn with the format shown again
            history = [{"role": "user", "content": query}, {"role": "assistant", "content": answer}]
            repair = await llm(render_prompt("global_map_repair"), stage="query_repair", system_prompt=system_prompt,
                               history_messages=history, **kwargs)
            points = parse_points(repair)
            repaired = bool(points)
        failures.record(failed=not points, repaired=repaired, answer=answer)
        return points

    results = await asyncio.gather(*(map_group(g) for g in groups))
    failures.log(logger, "Their reports were left out of the answer; a stronger model follows the JSON format.")
    scored = [
        (analyst, p["score"], p["description"])
        for analyst, points in enumerate(results)
        for p in points
        if p["score"] > 0
    ]
    if not scored:
        return fail_response()
    scored.sort(key=lambda s: -s[1])
    texts = [f"----Analyst {a}----\nImportance Score: {_score_text(s)}\n{d}" for a, s, d in scored]
    report_data, kept = pack_texts(texts, "\n\n", param.global_max_token_for_community_report, tokenizer)
    if not kept:
        # The best point alone is over budget: send it cut to fit rather than nothing.
        report_data = tokenizer.truncate(texts[0], param.global_max_token_for_community_report)
    if not report_data.strip():
        return fail_response()
    return await answer_from_context(query, report_data, param, llm, reduce_template, "report_data")
