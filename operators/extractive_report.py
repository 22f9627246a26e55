"""LLM-free community reports, plus the Markdown renderer every report goes through.

An extractive report reuses text the graph already holds (entity and relation
descriptions) so ``extraction="nlp"`` indexes get the same report JSON shape as LLM ones.

Rating formula (deterministic, 0-10, one decimal):
    size_term    = min(1, ln(1 + n) / ln(1 + 50))          n = member entities
    density_term = 2m / (n (n - 1))  (0 when n < 2)       m = member relations
    rating       = 10 * (0.6 * size_term + 0.4 * density_term)
so it grows with size at a fixed density and with density at a fixed size.
"""
from __future__ import annotations

import logging
import math
import re
from typing import TYPE_CHECKING, Any, Iterable, Optional

from graphrag.schema import GRAPH_FIELD_SEP, Finding, ReportJSON, edge_key

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

logger = logging.getLogger(__name__)

SUMMARY_MAX_WORDS = 120
_EXPLANATION_MAX_WORDS = 80
_MAX_FINDINGS = 8
_TITLE_ENTITIES = 3
_MATCH_NAMES = 50  # names looked for in candidate sentences
_MAX_CANDIDATES = 300  # sentences scored for the summary
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_WS = re.compile(r"\s+")


def _parts(description: JSONValue) -> list[str]:
    """Distinct non-empty pieces of a GRAPH_FIELD_SEP-joined description."""
    seen: dict[str, None] = {}
    for part in str(description or "").split(GRAPH_FIELD_SEP):
        part = _WS.sub(" ", part).strip().strip('"').strip()
        if part:
            seen.setdefault(part, None)
    return list(seen)


def _limit_words(text: str, max_words: int) -> str:
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words]) + "..."


def _join_names(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def community_pairs(community: dict) -> list[tuple[str, str]]:
    """The community's internal relations as edge keys, de-duplicated and sorted."""
    members = set(map(str, community.get("nodes") or []))
    return sorted({
        edge_key(str(e[0]), str(e[1]))
        for e in community.get("edges") or []
        if len(e) >= 2 and e[0] != e[1] and str(e[0]) in members and str(e[1]) in members
    })


def edge_data(edges: dict[tuple[str, str], dict], a: str, b: str) -> dict:
    """The data of the edge between ``a`` and ``b`` in ``edges``, whichever way it is keyed."""
    return edges.get((a, b)) or edges.get((b, a)) or {}


def community_rating(n_nodes: int, n_edges: int) -> float:
    """See the module docstring; larger and denser communities rate higher."""
    if n_nodes <= 0:
        return 0.0
    size_term = min(1.0, math.log1p(n_nodes) / math.log1p(50))
    density = min(1.0, 2 * n_edges / (n_nodes * (n_nodes - 1))) if n_nodes > 1 else 0.0
    return round(10 * (0.6 * size_term + 0.4 * density), 1)


def _is_word(text: str, at: int) -> bool:
    """Whether ``text[at]`` is a character a regex's ``\\w`` matches (a letter, digit or number of
    any script, or the underscore)."""
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def names_mentioned(text: str, names: list[str]) -> int:
    """How many distinct ``names`` stand in ``text`` as whole words, read left to right, a
    longer name first where two start at one place, and the text a name covers not read again.

    This is what a regex of the names (longest first) between ``(?<!\\w)`` and ``(?!\\w)``
    finds, without compiling one: a pattern made for each community cost more than its search.
    """
    ordered = sorted(names, key=len, reverse=True)
    if any(not n for n in ordered):  # an empty alternative matches everywhere
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, ordered)) + r")(?!\w)")
        return len(set(pattern.findall(text)))
    starts: dict[int, int] = {}  # where a name matches -> the first such name in ``ordered``
    for rank, name in enumerate(ordered):
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            if rank < starts.get(at, len(ordered)) and not _is_word(text, at - 1) and not _is_word(text, end):
                starts[at] = rank
            at = text.find(name, at + 1)
    found: set[str] = set()
    free = 0  # the first position not inside a name already read
    for at in sorted(starts):
        if at >= free:
            name = ordered[starts[at]]
            found.add(name)
            free = at + len(name)
    return len(found)


def _summary(candidates: Iterable[str], names: list[str]) -> str:
    """Sentences mentioning the most distinct members first, up to SUMMARY_MAX_WORDS."""
    scored: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for order, sentence in enumerate(candidates):
        if len(scored) >= _MAX_CANDIDATES:
            break
        if sentence in seen:
            continue
        seen.add(sentence)
        hits = names_mentioned(sentence.upper(), names) if names else 0
        scored.append((-hits, order, sentence))
    scored.sort()
    chosen: list[str] = []
    words = 0
    for _, _, sentence in scored:
        n = len(sentence.split())
        if chosen and words + n > SUMMARY_MAX_WORDS:
            continue
        chosen.append(sentence)
        words += n
        if words >= SUMMARY_MAX_WORDS:
            break
    return _limit_words(" ".join(chosen), SUMMARY_MAX_WORDS)


def build_extractive_report(
    community: dict, nodes: dict[str, dict], edges: dict[tuple[str, str], dict]
) -> ReportJSON:
    """A report made only of existing descriptions, ranked by graph structure."""
    members = [str(n) for n in dict.fromkeys(community.get("nodes") or [])]
    pairs = {(a, b): float(edge_data(edges, a, b).get("weight", 1.0) or 0.0) for a, b in community_pairs(community)}

    degree = {n: 0 for n in members}
    strength = {n: 0.0 for n in members}
    for (a, b), w in pairs.items():
        degree[a] += 1
        degree[b] += 1
        strength[a] += w
        strength[b] += w

    def centrality(n: str) -> tuple:
        return (-degree[n], -strength[n], -int((nodes.get(n) or {}).get("degree", 0) or 0), n)

    ranked = sorted(members, key=centrality)
    title = _join_names(ranked[:_TITLE_ENTITIES]) or "Empty community"
    top_edges = sorted(pairs, key=lambda p: (-pairs[p], p))

    findings: list[Finding] = []
    for a, b in top_edges[:_MAX_FINDINGS]:
        text = " ".join(_parts(edge_data(edges, a, b).get("description")))
        findings.append({"summary": f"{a} and {b}", "explanation": _limit_words(text, _EXPLANATION_MAX_WORDS)})
    if not pairs:
        for n in ranked[:_MAX_FINDINGS]:
            node = nodes.get(n) or {}
            etype = str(node.get("entity_type", "") or "").strip('"').upper()
            text = " ".join(_parts(node.get("description")))
            findings.append({
                "summary": f"{n} ({etype})" if etype else n,
                "explanation": _limit_words(text, _EXPLANATION_MAX_WORDS),
            })

    # Strongest relations' sentences first, then members' own sentences by centrality.
    def sentences(descriptions: Iterable[Any]) -> Iterable[str]:
        for d in descriptions:
            for part in _parts(d):
                yield from (s for s in _SENTENCE.split(part) if s)

    candidates = sentences(
        [edge_data(edges, a, b).get("description") for a, b in top_edges[:_MAX_FINDINGS]]
        + [(nodes.get(n) or {}).get("description") for n in ranked[:_MATCH_NAMES]]
    )
    summary = _summary(candidates, ranked[:_MATCH_NAMES])
    if not summary:
        summary = f"A community of {len(members)} entities: {_join_names(ranked[:5])}." if members else ""

    n, m = len(members), len(pairs)
    density = 2 * m / (n * (n - 1)) if n > 1 else 0.0
    return {
        "title": title,
        "summary": summary,
        "rating": community_rating(n, m),
        "rating_explanation": (
            f"{n} entities with {m} relations (density {density:.2f}); "
            "larger and denser communities rate higher."
        ),
        "findings": findings,
    }


def render_report_markdown(report: Optional[dict]) -> str:
    """Markdown for any report dict (extractive or LLM); tolerates missing keys and string findings."""
    report = report if isinstance(report, dict) else {}
    title = str(report.get("title") or "Report").strip()
    summary = str(report.get("summary") or "").strip()
    blocks = [f"# {title}"]
    if summary:
        blocks.append(summary)
    findings = report.get("findings") or []
    if isinstance(findings, (str, dict)):
        findings = [findings]
    for f in findings:
        if isinstance(f, dict):
            head = str(f.get("summary") or "").strip()
            body = str(f.get("explanation") or "").strip()
        else:
            head, body = str(f).strip(), ""
        if head:
            blocks.append(f"## {head}")
        if body:
            blocks.append(body)
    return "\n\n".join(blocks)
