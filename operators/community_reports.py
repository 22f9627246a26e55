"""Community reports: one JSON report per community, written by the LLM or extractively.

Each report is stored with a fingerprint of the community's content (member entities,
internal relations, level). When a later insert leaves a community's content as it was,
its report is reused with no LLM call, even if the community changed id.

Deeper levels go first, and a community too large for the prompt budget waits for its
sub-communities' reports so that it can be described through them. While long descriptions
are still being summarised, only the communities that contain one of them wait.
"""
from __future__ import annotations

import asyncio
import csv
import io
import itertools
import json
import logging
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Collection, Iterable, Optional, Protocol, Union

import xxhash

from graphrag.kept import PerOwner
from graphrag.prompts import render
from graphrag.schema import GRAPH_FIELD_SEP, CommunitySchema

from .extractive_report import build_extractive_report, community_pairs, edge_data, render_report_markdown
from .format_failures import FormatFailures
from .report_parsing import parse_report_json
from .tokenizer import Tokenizer, fits

if TYPE_CHECKING:
    from graphrag.schema import JSONValue
    from graphrag.storage.base import BaseGraphStorage

logger = logging.getLogger(__name__)

DEFAULT_REPORT_LLM_KWARGS: dict[str, Any] = {"response_format": {"type": "json_object"}}

# Bumped when the fingerprinted content or the report format changes, so old reports are redone.
_FINGERPRINT_VERSION = 2

# Where a stored report came from. LLM runs redo "extractive" and "fallback" reports, and keep
# a "small_component" report exactly while its community is one (and a model's only while it is
# not): which report a community has depends on the graph alone, not on the writes that made
# it. LLM-free runs reuse anything with a matching fingerprint.
SOURCE_LLM = "llm"
SOURCE_EXTRACTIVE = "extractive"
SOURCE_FALLBACK = "fallback"
# Built from its records in an LLM run, by the rule of :func:`small_component`.
SOURCE_SMALL = "small_component"

# --------------------------------------------------------------------------- helpers


def _float(value: JSONValue, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _text(value: JSONValue) -> str:
    """A description for the prompt: GRAPH_FIELD_SEP-joined parts become one text."""
    parts = [p.strip() for p in str(value or "").split(GRAPH_FIELD_SEP)]
    return " ".join(p for p in parts if p)


def _entity_type(value: JSONValue) -> str:
    return str(value or "").strip().strip('"').strip()


# --------------------------------------------------------------------------- fingerprint


# Member and relation digests kept between writes, per graph store (so per GraphRAG
# instance: they go with it), by name or pair, with the very attribute objects each was made
# from: a graph keeps an untouched element's values as the same objects, so an identity check
# (the values held here cannot be freed and their ids reused) proves the digest current
# without serialising or hashing anything. An element a write changed has new values and is
# digested again. Bounded by a count, cleared whole past it.
KeptDigests = dict[Union[str, tuple[str, str]], tuple[Any, Any, str]]
_KEPT_DIGESTS: PerOwner[KeptDigests] = PerOwner(dict)
_KEPT_DIGESTS_MAX = 1 << 18


def _digest(parts: list) -> str:
    return xxhash.xxh128_hexdigest(json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def community_fingerprint(
    community: CommunitySchema,
    nodes: dict[str, dict],
    edges: dict[tuple[str, str], dict],
    digests: Optional[dict[Union[str, tuple[str, str]], str]] = None,
    pairs: Optional[list[tuple[str, str]]] = None,
    kept: Optional[KeptDigests] = None,
) -> str:
    """xxh128 hex of the community's content: members, internal relations and level.

    Each member and relation is hashed once into ``digests`` (pass the same dict for all
    communities of a run; members by name, relations by pair): a member of a large community
    sits in one community per level, and re-serialising its description for each would
    dominate the report stage's set-up. ``pairs``: :func:`community_pairs` of ``community``,
    if already made.
    """
    digests = {} if digests is None else digests
    kept = {} if kept is None else kept
    if len(kept) > _KEPT_DIGESTS_MAX:
        kept.clear()
    entities = []
    for name in dict.fromkeys(map(str, community.get("nodes") or [])):
        found = digests.get(name)
        if found is None:
            data = nodes.get(name) or {}
            kind, description = data.get("entity_type"), data.get("description")
            known = kept.get(name)
            if known is not None and known[0] is kind and known[1] is description:
                found = known[2]
            else:
                found = _digest([name, _entity_type(kind), str(description or "")])
                kept[name] = (kind, description, found)
            digests[name] = found
        entities.append(found)
    relations = []
    for pair in community_pairs(community) if pairs is None else pairs:
        found = digests.get(pair)
        if found is None:
            a, b = pair
            data = edge_data(edges, a, b)
            description, weight = data.get("description"), data.get("weight")
            known = kept.get(pair)
            if known is not None and known[0] is description and known[1] is weight:
                found = known[2]
            else:
                found = _digest([a, b, str(description or ""), _float(weight, 1.0)])
                kept[pair] = (description, weight, found)
            digests[pair] = found
        relations.append(found)
    entities.sort()
    relations.sort()
    canon = json.dumps({"v": _FINGERPRINT_VERSION, "level": int(community.get("level", 0) or 0),
                        "entities": entities, "relations": relations}, separators=(",", ":"))
    return xxhash.xxh128_hexdigest(canon.encode("utf-8"))


# --------------------------------------------------------------------------- context


def _csv_line(fields: list[Any]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue()


_ENTITY_HEADER = _csv_line(["id", "entity", "type", "description", "degree"])
_RELATION_HEADER = _csv_line(["id", "source", "target", "description", "rank"])
_REPORT_HEADER = _csv_line(["id", "title", "content"])


def _joints(sections: list[tuple[str, str, list[str]]]) -> list[str]:
    """The text around the sections' row blocks: before the first, between each two, after
    the last. Each block's rows start with their number after a newline, and each joint after
    the first with a backtick after one: every seam is a line cut (see ``fits``)."""
    joints = [""]
    for title, header, _ in sections:
        joints[-1] += f"-----{title}-----\n```csv\n{header}"
        joints.append("```\n\n")
    joints[-1] = "```\n"
    return joints


def _assemble(sections: list[tuple[str, str, list[str]]]) -> str:
    """The sections as CSV tables (title, header line, row lines), a blank line between two."""
    joints = _joints(sections)
    return "".join(part for (_, _, rows), joint in zip(sections, joints) for part in (joint, *rows)) + joints[-1]


def _pieces(sections: list[tuple[str, str, list[str]]]) -> list[str]:
    """``_assemble``'s text cut at its seams, in no particular order (for ``fits``)."""
    return [*_joints(sections), *(row for _, _, rows in sections for row in rows)]


class TableRows:
    """Each member's and internal relation's table row (its CSV line after the row number)
    and sort key, made once per run from the same node and edge data: a member sits in one
    community per level, and its row reads the same in each. Deeper levels are tabled
    first, so the top level (0) is the last to ask for a row: a row asked for with
    ``keep=False`` is let go."""

    def __init__(self, nodes: dict[str, dict], edges: dict[tuple[str, str], dict]) -> None:
        self.nodes, self.edges = nodes, edges
        self._entities: dict[str, tuple[tuple, str]] = {}
        self._relations: dict[tuple[str, str], tuple[tuple, str]] = {}

    def entity(self, name: str, keep: bool = True) -> tuple[tuple, str]:
        """(sort key: most connected first, then by name; the line of name, type, description, degree)."""
        found = self._entities.get(name) if keep else self._entities.pop(name, None)
        if found is None:
            data = self.nodes.get(name) or {}
            degree = int(_float(data.get("degree"), 0))
            line = _csv_line([name, _entity_type(data.get("entity_type")), _text(data.get("description")), degree])
            found = ((-degree, name), line)
            if keep:
                self._entities[name] = found
        return found

    def relation(self, a: str, b: str, keep: bool = True) -> tuple[tuple, str]:
        """(sort key: by rank (degree sum), then weight; the line of source, target, description, rank)."""
        found = self._relations.get((a, b)) if keep else self._relations.pop((a, b), None)
        if found is None:
            data = edge_data(self.edges, a, b)
            rank = data.get("rank")
            if rank is None:
                rank = (_float((self.nodes.get(a) or {}).get("degree"), 0)
                        + _float((self.nodes.get(b) or {}).get("degree"), 0))
            rank = int(_float(rank, 0))
            line = _csv_line([a, b, _text(data.get("description")), rank])
            found = ((-rank, -_float(data.get("weight"), 1.0), a, b), line)
            if keep:
                self._relations[(a, b)] = found
        return found


def _numbered(rows: Iterable[tuple[tuple, str]]) -> list[str]:
    # A row number is a plain field: "i," before the rest of the line is how csv writes it.
    return [f"{i},{line}" for i, (_, line) in enumerate(sorted(rows, key=itemgetter(0)))]


class _Budget:
    """Picks, for several ranked row lists, the longest prefixes that fit a token budget."""

    def __init__(self, tokenizer: Tokenizer, max_tokens: int) -> None:
        self.tokenizer = tokenizer
        self.left = max_tokens

    def cost(self, text: str) -> int:
        return self.tokenizer.count(text)

    def take(self, text: str) -> bool:
        c = self.cost(text)
        if c > self.left:
            return False
        self.left -= c
        return True

    def fill(self, ranked: list[list[str]]) -> list[int]:
        """Round-robin over the lists, one row each turn, so every table keeps its best rows.

        A list stops at its first row that does not fit: a less important row never takes
        the place of a more important one.
        """
        counts = [0] * len(ranked)
        open_ = [bool(rows) for rows in ranked]
        while any(open_):
            for i, rows in enumerate(ranked):
                if not open_[i]:
                    continue
                if self.take(rows[counts[i]]):
                    counts[i] += 1
                    open_[i] = counts[i] < len(rows)
                else:
                    open_[i] = False
        return counts


def _own_sections(entity_lines: list[str], relation_lines: list[str]) -> list[tuple[str, str, list[str]]]:
    return [("Entities", _ENTITY_HEADER, entity_lines), ("Relationships", _RELATION_HEADER, relation_lines)]


@dataclass
class CommunityTables:
    """A community's own entity and relation rows (CSV lines), and their assembled text.

    The text is assembled when asked for, not kept: a community whose tables do not fit
    waits for its sub-communities' reports, and then only some of its rows are read.
    """

    entity_lines: list[str]
    relation_lines: list[str]
    _fits: dict[int, bool] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        return _assemble(_own_sections(self.entity_lines, self.relation_lines))

    def fit(self, tokenizer: Tokenizer, max_tokens: int) -> bool:
        """Whether ``text`` fits ``max_tokens``; counted once (a large community's tables are
        asked twice: to choose between reporting now and waiting, then to build the context).
        Its rows are counted in the order a budget takes them (``_Budget.fill``), so a table that
        does not fit has its best rows counted for the context, and few others."""
        known = self._fits.get(max_tokens)
        if known is None:
            joints = _joints(_own_sections(self.entity_lines, self.relation_lines))
            rows = (row for pair in itertools.zip_longest(self.entity_lines, self.relation_lines)
                    for row in pair if row is not None)
            known = self._fits[max_tokens] = fits(tokenizer, self.text, max_tokens, itertools.chain(joints, rows))
        return known


def community_tables(community: CommunitySchema, nodes: dict[str, dict], edges: dict[tuple[str, str], dict],
                     rows: Optional[TableRows] = None,
                     pairs: Optional[list[tuple[str, str]]] = None) -> CommunityTables:
    """``rows``: the run's :class:`TableRows` over ``nodes`` and ``edges``, if kept across
    communities; ``pairs``: :func:`community_pairs` of ``community``, if already made."""
    rows = rows or TableRows(nodes, edges)
    keep = int(community.get("level", 0) or 0) > 0  # the levels above still ask for these rows
    ent_lines = _numbered(rows.entity(name, keep) for name in dict.fromkeys(map(str, community.get("nodes") or [])))
    rel_lines = _numbered(rows.relation(a, b, keep)
                          for a, b in (community_pairs(community) if pairs is None else pairs))
    return CommunityTables(ent_lines, rel_lines)


def build_community_context(
    community: CommunitySchema,
    nodes: dict[str, dict],
    edges: dict[tuple[str, str], dict],
    *,
    tokenizer: Tokenizer,
    max_tokens: int,
    sub_reports: Optional[dict[str, dict]] = None,
    tables: Optional[CommunityTables] = None,
) -> str:
    """The report prompt's data: CSV tables of entities and relations within ``max_tokens``.

    ``nodes`` values carry ``entity_type``, ``description`` and ``degree``; ``edges`` values
    carry ``description``, ``weight`` and optionally ``rank`` (else the endpoints' degree sum).
    When the community's own tables do not fit and ``sub_reports`` (sub-community id ->
    stored report record) has reports of its sub-communities, the context is those reports,
    largest sub-community first, topped up with whatever own rows still fit. ``tables``:
    :func:`community_tables` of this community, if already built.
    """
    tables = tables or community_tables(community, nodes, edges)
    if tables.fit(tokenizer, max_tokens):
        return tables.text
    ent_lines, rel_lines = tables.entity_lines, tables.relation_lines

    subs = [
        (sid, rec) for sid in community.get("sub_communities") or []
        if (rec := (sub_reports or {}).get(str(sid))) and (rec.get("report_string") or rec.get("report_json"))
    ]
    subs.sort(key=lambda s: (-len(s[1].get("nodes") or []), str(s[0])))

    def skeleton(titles: Iterable[tuple[str, str]]) -> str:
        return _assemble([(t, h, []) for t, h in titles])

    own_tables = [("Entities", _ENTITY_HEADER), ("Relationships", _RELATION_HEADER)]
    budget = _Budget(tokenizer, max_tokens)
    report_lines: list[str] = []
    if subs:
        budget.take(skeleton([("Reports", _REPORT_HEADER), *own_tables]))
        for sid, rec in subs:
            report = rec.get("report_json") if isinstance(rec.get("report_json"), dict) else {}
            title = str(report.get("title") or rec.get("title") or f"Community {sid}")
            content = rec.get("report_string") or render_report_markdown(report)
            # The whole report if it fits, else its summary: a sub-community is never left out
            # for a smaller one while some text of it still fits.
            line = _csv_line([len(report_lines), title, content])
            if not budget.take(line):
                line = _csv_line([len(report_lines), title, str(report.get("summary") or "")])
                if not budget.take(line):
                    break
            report_lines.append(line)
        if not report_lines:
            budget = _Budget(tokenizer, max_tokens)  # no report fits: own rows only
    if not report_lines:
        budget.take(skeleton(own_tables))

    n_ent, n_rel = budget.fill([ent_lines, rel_lines])
    sections = [("Entities", _ENTITY_HEADER, ent_lines[:n_ent]), ("Relationships", _RELATION_HEADER, rel_lines[:n_rel])]
    if report_lines:
        sections.insert(0, ("Reports", _REPORT_HEADER, report_lines))

    # Token counts of pieces can differ from the joined text's by a token here and there:
    # drop the least important rows until the whole truly fits.
    text = _assemble(sections)
    while not fits(tokenizer, text, max_tokens, _pieces(sections)):
        candidates = [s for s in sections if s[2]]
        if not candidates:
            return tokenizer.truncate(text, max_tokens)  # not even the headers fit
        # Own rows go before sub-reports; of the own tables, the longer loses a row.
        own = [s for s in candidates if s[0] != "Reports"]
        victim = max(own, key=lambda s: len(s[2])) if own else candidates[0]
        victim[2].pop()
        text = _assemble(sections)
    return text


# --------------------------------------------------------------------------- generation


def _record(community: CommunitySchema, report: dict, fingerprint: str, source: str,
            report_string: Optional[str] = None) -> dict:
    return {
        **community,
        "report_json": report,
        "report_string": report_string or render_report_markdown(report),
        "fingerprint": fingerprint,
        "title": str(report.get("title") or community.get("title") or ""),
        "report_source": source,
    }


def small_component(community: CommunitySchema, nodes: dict[str, dict], pairs: list[tuple[str, str]],
                    max_entities: int) -> bool:
    """Whether ``community`` is a whole connected component of at most ``max_entities`` members:
    no relation leaves it (each member's degree in the graph, ``nodes[n]["degree"]``, is all
    inside it), so its records are all there is to say of its entities, and a report built from
    them (every relation a finding) leaves nothing for a model to summarise. ``pairs``: its
    :func:`community_pairs`."""
    members = community.get("nodes") or []
    if not 0 < len(members) <= max_entities or community.get("sub_communities"):
        return False
    total = 0
    for n in members:
        degree = (nodes.get(str(n)) or {}).get("degree")
        if not isinstance(degree, int):
            return False  # not known: the model reports it
        total += degree
    return total == 2 * len(pairs)  # each internal relation counts at both its ends


def _reusable(record: Optional[dict], fingerprint: str, extractive: bool, small: bool = False) -> bool:
    """Whether ``record`` can stand as the report of a community with ``fingerprint``: in an
    LLM run, one the small-component rule made if ``small`` (the community qualifies), else
    one a model wrote."""
    if not isinstance(record, dict) or record.get("fingerprint") != fingerprint:
        return False
    if not isinstance(record.get("report_json"), dict):
        return False
    return extractive or record.get("report_source", SOURCE_LLM) == (SOURCE_SMALL if small else SOURCE_LLM)


class SummariesInFlight(Protocol):
    """Descriptions still being summarised: ``summarising`` holds node names and sorted edge
    pairs; :meth:`settled` returns once their summaries are in the graph."""

    @property
    def summarising(self) -> Collection[Union[str, tuple[str, str]]]: ...

    async def settled(self) -> None: ...


# Communities whose graph data is read together in the report stage.
_LOAD_BATCH = 256


class _GraphData:
    """Node and edge data for fingerprints and contexts, read from the graph as communities
    need it: the first reports go out while later communities' data is still unread."""

    def __init__(self, graph: BaseGraphStorage) -> None:
        self.graph = graph
        self.nodes: dict[str, dict] = {}
        self.edges: dict[tuple[str, str], dict] = {}

    async def load(self, *communities: CommunitySchema,
                   pairs: Optional[list[list[tuple[str, str]]]] = None) -> None:
        """Read what ``communities`` need and is not read yet: three batch reads for all of them
        (a database store pays a round trip per read, not per community). ``pairs``: each
        community's :func:`community_pairs`, if already made."""
        names = [n for n in dict.fromkeys(str(n) for c in communities for n in c.get("nodes") or [])
                 if n not in self.nodes]
        if names:
            data = await self.graph.get_nodes_batch(names)
            degrees = await self.graph.node_degrees_batch(names)
            for name, d, degree in zip(names, data, degrees):
                self.nodes[name] = {**(d or {}), "degree": int(degree or 0)}
        if pairs is None:
            pairs = [community_pairs(c) for c in communities]
        unread = [p for p in dict.fromkeys(p for ps in pairs for p in ps) if p not in self.edges]
        if unread:
            for (a, b), d in zip(unread, await self.graph.get_edges_batch(unread)):
                rank = self.nodes.get(a, {}).get("degree", 0) + self.nodes.get(b, {}).get("degree", 0)
                self.edges[(a, b)] = {**(d or {}), "rank": rank}


async def _of_this_version(community: CommunitySchema, record: dict, graph_data: _GraphData) -> bool:
    await graph_data.load(community)
    return community_fingerprint(community, graph_data.nodes, graph_data.edges) == record.get("fingerprint")


async def reports_of_this_version(graph: BaseGraphStorage, community: CommunitySchema, record: dict) -> bool:
    """Whether ``record``, the report of the unchanged ``community``, carries the fingerprint
    this version gives it: after a version bump none does, and every report is redone."""
    return await _of_this_version(community, record, _GraphData(graph))


async def generate_community_reports(
    communities: dict[str, CommunitySchema],
    *,
    graph: BaseGraphStorage,
    llm: Optional[Callable[..., Awaitable[str]]],
    tokenizer: Tokenizer,
    max_tokens: int,
    existing: dict[str, dict],
    llm_kwargs: Optional[dict] = None,
    extractive: bool = False,
    on_progress: Optional[Callable[[int], None]] = None,
    in_flight: Optional[SummariesInFlight] = None,
    failures: Optional[FormatFailures] = None,
    touched: Optional[Collection[str]] = None,
    small_component_max_entities: int = 0,
) -> tuple[dict[str, dict], int]:
    """Report every community; returns ({id: record}, number of reports made fresh).

    A community whose fingerprint matches an existing record (its own, or any record
    with that fingerprint) keeps that report. The rest are written concurrently, deepest
    level first; a community too large for the prompt waits for its sub-communities'
    reports. ``on_progress(n)`` is called with the number of communities just finished
    (reused ones together, then 1 per new report). With ``in_flight``, a community that
    contains an element still being summarised (or a sub-community that does) is read and
    reported only once the summaries have settled; the others start at once.
    An answer with no readable report gets one repair turn; ``failures`` counts them, and
    a community still without one gets an extractive report.

    ``touched``: the nodes whose data or edges changed since ``existing`` was reported (None:
    unknown). A community with none of them, the same members, internal relations and level
    as its record, has that record's fingerprint still: it is not read or fingerprinted again.

    ``small_component_max_entities``: in an LLM run, a community that is a whole connected
    component of at most this many entities (:func:`small_component`) gets an extractive report
    (source ``SOURCE_SMALL``) and no model call; 0: none does.
    """
    existing = existing or {}
    kwargs = dict(DEFAULT_REPORT_LLM_KWARGS if llm_kwargs is None else llm_kwargs)
    graph_data = _GraphData(graph)
    nodes, edges = graph_data.nodes, graph_data.edges  # filled community by community below
    rows = TableRows(nodes, edges)

    by_fingerprint: dict[str, dict] = {}
    for rec in existing.values():
        if isinstance(rec, dict) and rec.get("fingerprint"):
            fp = rec["fingerprint"]
            if fp not in by_fingerprint or _reusable(rec, fp, False):
                by_fingerprint[fp] = rec

    results: dict[str, dict] = {}
    pairs_of: dict[str, list[tuple[str, str]]] = {}

    def pairs(cid: str) -> list[tuple[str, str]]:
        """:func:`community_pairs` of ``cid``, made once: its fingerprint, its tables and the
        graph read all ask (the tables last: they take it out)."""
        found = pairs_of.get(cid)
        if found is None:
            found = pairs_of[cid] = community_pairs(communities[cid])
        return found

    def finished(cid: str, record: dict) -> None:
        results[cid] = record
        if on_progress:
            on_progress(1)

    def extractive_record(community: CommunitySchema, fp: str, source: str) -> dict:
        return _record(community, build_extractive_report(community, nodes, edges), fp, source)

    async def one(cid: str, fp: str, tables: CommunityTables) -> None:
        assert llm is not None  # only the LLM path writes a report here (``extractive`` takes llm None)
        community = communities[cid]
        sub_reports = {}
        for sid in community.get("sub_communities") or []:
            rec = results.get(str(sid)) or existing.get(str(sid))
            if rec:
                sub_reports[str(sid)] = rec
        context = build_community_context(community, nodes, edges, tokenizer=tokenizer, max_tokens=max_tokens,
                                          sub_reports=sub_reports, tables=tables)
        prompt = render("community_report", input_text=context)
        # Deeper communities have more reports waiting on them: they go first.
        priority = -int(community.get("level", 0) or 0)
        answer = await llm(prompt, stage="report", priority=priority, **kwargs)
        report = parse_report_json(answer)
        repaired = False
        if report is None:
            logger.info("Community %s: no readable report, showing the model the format again", cid)
            history = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
            repair = await llm(render("community_report_repair"), stage="report_repair", history_messages=history,
                               priority=priority, **kwargs)
            report = parse_report_json(repair)
            repaired = report is not None
        if failures is not None:
            failures.record(failed=report is None, repaired=repaired, answer=answer)
        if report is None:
            logger.info("Community %s: no usable report after the repair turn; using an extractive one", cid)
            finished(cid, extractive_record(community, fp, SOURCE_FALLBACK))
        else:
            finished(cid, _record(community, report, fp, SOURCE_LLM))

    # A community whose own tables fit the budget is reported at once; only one that does
    # not waits for its sub-communities' reports (it is described through them). So the LLM
    # stays busy across levels instead of waiting for a whole level, or even a whole subtree.
    pending: dict[str, "asyncio.Future[None]"] = {}
    # Contexts are built just before a concurrency slot can take them, not all at once up
    # front: a burst of CPU on the event loop would delay the answers of calls in flight.
    preparing = asyncio.Semaphore(2 * int(getattr(llm, "max_async", 16) or 16))

    async def when_ready(cid: str, fp: str) -> None:
        community = communities[cid]
        async with preparing:
            tables = community_tables(community, nodes, edges, rows, pairs_of.pop(cid, None))
            if tables.fit(tokenizer, max_tokens):
                await one(cid, fp, tables)
                return
        subs = [pending[str(s)] for s in community.get("sub_communities") or [] if str(s) in pending]
        if subs:
            await asyncio.wait(subs)
        async with preparing:
            await one(cid, fp, tables)

    def unchanged(cid: str, touched: set[str]) -> bool:
        """Whether ``cid``'s fingerprint is still its record's (see ``touched``)."""
        old, community = existing.get(cid), communities[cid]
        # Untouched, a community is a whole component exactly when it was one: a small
        # component's record stands while within the limit (which may have changed). A model's
        # record of a community within the limit may be of a whole component (reported under a
        # lower limit): such a record is not taken unread, and the rule is checked on the graph.
        small = len(community.get("nodes") or []) <= small_component_max_entities
        return (isinstance(old, dict) and bool(old.get("fingerprint"))
                and _reusable(old, old["fingerprint"], extractive, small)
                and all(old.get(k) == community.get(k) for k in ("level", "nodes", "edges"))
                and touched.isdisjoint(map(str, community.get("nodes") or [])))

    touched_nodes = set(touched or ())
    known = set() if touched is None else {c for c in communities if unchanged(c, touched_nodes)}
    if known:
        # The stored fingerprints must be of this version's making (else every report is redone,
        # as the version bump intends): the smallest unchanged community is fingerprinted to see.
        probe = min(known, key=lambda c: (len(communities[c].get("nodes") or []), c))
        if not await _of_this_version(communities[probe], existing[probe], graph_data):
            logger.info("Stored report fingerprints are of another version: every community is fingerprinted")
            known = set()

    async def start(cid: str) -> None:
        nonlocal reused, made_small
        community = communities[cid]
        old = existing.get(cid)
        if cid in known:  # ``unchanged`` found its record reusable
            assert old is not None
            fp, small = old["fingerprint"], old.get("report_source") == SOURCE_SMALL
        else:
            fp = community_fingerprint(community, nodes, edges, digests, pairs(cid), kept)
            small = (not extractive and small_component_max_entities > 0
                     and small_component(community, nodes, pairs(cid), small_component_max_entities))
        if not _reusable(old, fp, extractive, small):
            old = by_fingerprint.get(fp)
        reusable = _reusable(old, fp, extractive, small)
        if reusable or extractive or small:
            pairs_of.pop(cid, None)  # kept only for the tables of a report made afresh
        if reusable:
            assert old is not None
            results[cid] = _record(community, old["report_json"], fp,
                                   old.get("report_source", SOURCE_LLM), old.get("report_string"))
            reused += 1
        elif extractive:
            todo.append((cid, fp))
        elif small:
            made_small += 1
            finished(cid, extractive_record(community, fp, SOURCE_SMALL))
        else:
            pending[cid] = asyncio.ensure_future(when_ready(cid, fp))
            if len(pending) % 8 == 0:
                await asyncio.sleep(0)

    summarising = set(in_flight.summarising) if in_flight is not None else set()
    deferred: set[str] = set()

    def touches_summaries(cid: str) -> bool:
        # A parent contains its sub-communities; the check on them keeps that true even if not.
        community = communities[cid]
        return (any(str(s) in deferred for s in community.get("sub_communities") or [])
                or any(str(n) in summarising for n in community.get("nodes") or [])
                or any(pair in summarising for pair in pairs(cid)))

    # Deepest level first, so that sub-community tasks exist before their parents'. Calls
    # start while the rest is still being fingerprinted: the set-up overlaps the first calls.
    ordered = sorted(communities, key=lambda c: -int(communities[c].get("level", 0) or 0))
    todo: list[tuple[str, str]] = []
    made_small = 0  # reports of small components, built from their records
    reused = 0
    digests: dict[Union[str, tuple[str, str]], str] = {}
    kept = _KEPT_DIGESTS.get(graph)

    async def start_all(cids: list[str]) -> None:
        # Read a batch's graph data at once, then start its communities: the first calls go
        # out while later batches are still unread.
        for i in range(0, len(cids), _LOAD_BATCH):
            batch = cids[i : i + _LOAD_BATCH]
            unread = [c for c in batch if c not in known]
            await graph_data.load(*(communities[c] for c in unread), pairs=[pairs(c) for c in unread])
            for cid in batch:
                await start(cid)

    try:
        for cid in ordered:
            if summarising and cid not in known and touches_summaries(cid):  # known: no touched node
                deferred.add(cid)
        await start_all([c for c in ordered if c not in deferred])
        if deferred:
            assert in_flight is not None
            logger.info("Community reports: %d wait for summaries in flight", len(deferred))
            await in_flight.settled()
            await start_all([c for c in ordered if c in deferred])
        if reused and on_progress:
            on_progress(reused)
        logger.info("Community reports: %d reused, %d to generate, %d of small components built from their records",
                    reused, len(todo) + len(pending), made_small)
        for cid, fp in todo:  # extractive: deepest first, like the LLM path
            finished(cid, extractive_record(communities[cid], fp, SOURCE_EXTRACTIVE))
        await asyncio.gather(*pending.values())
    except BaseException:
        for task in pending.values():
            task.cancel()
        await asyncio.gather(*pending.values(), return_exceptions=True)
        raise
    return {cid: results[cid] for cid in communities}, len(todo) + len(pending) + made_small
