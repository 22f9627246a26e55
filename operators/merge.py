"""Merge per-chunk extraction records into graph node and edge data.

A node's/edge's data is a pure function of the set of ``(chunk_id, record)`` contributions
to it, never of insertion order: contributions are sorted before use. That lets a later
delete or re-insert rebuild an element from its remaining contributions and get exactly
what a fresh index would have produced.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any, Iterable, Optional, Union

from graphrag.operators.extraction import LLMCall, normalize_entity_name
from graphrag.operators.tokenizer import Tokenizer, fits
from graphrag.prompts import render
from graphrag.schema import GRAPH_FIELD_SEP, ChunkExtraction, EntityRecord, RelationRecord, edge_key

logger = logging.getLogger(__name__)

__all__ = [
    "merge_entity",
    "merge_relation",
    "placeholder_entity",
    "summarize_description",
    "summary_input",
    "summary_input_budget",
    "group_contributions",
    "build_graph_records",
    "long_descriptions",
    "summarize_elements",
]

EntityContribs = dict[str, list[tuple[str, EntityRecord]]]
RelationContribs = dict[tuple[str, str], list[tuple[str, RelationRecord]]]


def _join_unique(values: Iterable[str]) -> str:
    seen: dict[str, None] = {}
    for value in values:
        if value and value not in seen:
            seen[value] = None
    return GRAPH_FIELD_SEP.join(seen)


def _source_ids(chunk_ids: Iterable[str]) -> str:
    return GRAPH_FIELD_SEP.join(sorted(set(chunk_ids)))


def merge_entity(name: str, contributions: list[tuple[str, EntityRecord]]) -> dict[str, Any]:
    """Node data for ``name``: majority type (ties alphabetical; UNKNOWN only if nothing else)."""
    contribs = sorted(contributions, key=lambda c: (c[0], c[1]["description"], c[1]["type"]))
    types = Counter(r["type"] or "UNKNOWN" for _, r in contribs)
    known = {t: n for t, n in types.items() if t != "UNKNOWN"} or dict(types) or {"UNKNOWN": 1}
    entity_type = min(known, key=lambda t: (-known[t], t))
    return {
        "entity_type": entity_type,
        "description": _join_unique(r["description"] for _, r in contribs),
        "source_id": _source_ids(c for c, _ in contribs),
    }


def merge_relation(
    source: str, target: str, contributions: list[tuple[str, RelationRecord]]
) -> dict[str, Any]:
    """Edge data: weights add up, descriptions de-duplicated, chunk ids sorted."""
    contribs = sorted(contributions, key=lambda c: (c[0], c[1]["description"], c[1]["weight"]))
    return {
        "weight": float(sum(r["weight"] for _, r in contribs)),
        "description": _join_unique(r["description"] for _, r in contribs),
        "source_id": _source_ids(c for c, _ in contribs),
        "order": 1,
    }


def placeholder_entity(name: str, relation_contributions: list[tuple[str, RelationRecord]]) -> dict[str, Any]:
    """Node data for an edge endpoint no chunk described as an entity.

    ``relation_contributions`` must be every contribution of every edge touching ``name``
    (not only the edges of the current insert), or the result depends on history.
    """
    contribs = sorted(relation_contributions, key=lambda c: (c[0], c[1]["description"]))
    return {
        "entity_type": "UNKNOWN",
        "description": _join_unique(r["description"] for _, r in contribs),
        "source_id": _source_ids(c for c, _ in contribs),
    }


# Ahead of every report in a shared concurrency pool: the reports of the communities that
# hold a summarised element wait for its summary.
SUMMARY_PRIORITY = -(1 << 20)


def summary_input_budget(max_tokens: int) -> int:
    """Tokens of description list sent to the summariser: 4x the output, at least 4000.

    Enough material for a good summary while keeping the cheap model's prompt bounded.
    """
    return max(4 * max_tokens, 4000)


def summary_input(description: str, *, tokenizer: Tokenizer, max_tokens: int,
                  input_tokens: Optional[int] = None) -> Optional[str]:
    """The description list a summary of ``description`` is written from, or None when it
    fits ``max_tokens`` as it is.

    The list keeps whole descriptions in order while they fit in ``input_tokens`` (default
    :func:`summary_input_budget`); a single oversized first description is truncated.
    Counting tokens is the costly part of a summary besides the call, so the merge does it
    in its worker thread.
    """
    if fits(tokenizer, description, max_tokens):
        return None
    budget = input_tokens if input_tokens is not None else summary_input_budget(max_tokens)
    kept: list[str] = []
    used = 0
    for part in description.split(GRAPH_FIELD_SEP):
        size = tokenizer.count(part)
        if used + size > budget:
            if not kept:
                kept.append(tokenizer.truncate(part, budget))
            break
        kept.append(part)
        used += size
    return "\n".join(kept)


async def summarize_description(
    name: str, description: str, *, llm: LLMCall, tokenizer: Tokenizer, max_tokens: int,
    listing: Optional[str] = None,
) -> str:
    """Return ``description`` unchanged when short enough, else an LLM summary of it.

    ``listing``: its :func:`summary_input`, when already computed.
    """
    if listing is None:
        listing = summary_input(description, tokenizer=tokenizer, max_tokens=max_tokens)
        if listing is None:
            return description
    prompt = render("summarize_entity_descriptions", entity_name=name, description_list=listing)
    summary = (await llm(prompt, stage="summary", max_tokens=max_tokens, priority=SUMMARY_PRIORITY)).strip()
    if not summary:
        logger.warning("empty summary for %r; truncating its description instead", name)
        return tokenizer.truncate(description, max_tokens)
    return summary


def group_contributions(
    extractions: dict[str, ChunkExtraction], aliases: Optional[dict[str, str]] = None,
) -> tuple[EntityContribs, RelationContribs]:
    """Group every chunk's records by normalised entity name and by undirected edge key;
    a name in ``aliases`` (entity resolution) counts as the name it maps to."""
    entities: EntityContribs = {}
    relations: RelationContribs = {}
    aliases = aliases or {}
    for chunk_id, extraction in extractions.items():
        for ent in extraction.get("entities", []):
            name = normalize_entity_name(ent["name"])
            name = aliases.get(name, name)
            if name:
                entities.setdefault(name, []).append((chunk_id, {**ent, "name": name}))
        for rel in extraction.get("relations", []):
            src, tgt = normalize_entity_name(rel["source"]), normalize_entity_name(rel["target"])
            src, tgt = aliases.get(src, src), aliases.get(tgt, tgt)
            if not src or not tgt or src == tgt:
                continue
            key = edge_key(src, tgt)
            relations.setdefault(key, []).append((chunk_id, {**rel, "source": src, "target": tgt}))
    return entities, relations


def build_graph_records(
    entity_contributions: EntityContribs,
    relation_contributions: RelationContribs,
    endpoint_relations: Optional[dict[str, list[tuple[str, RelationRecord]]]] = None,
) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """Node and edge data for the touched entities and edges, descriptions not yet summarised.

    Pass the FULL contribution lists (all chunks, old and new) of each touched element.
    Endpoints without an entity record get :func:`placeholder_entity` data built from
    ``endpoint_relations[name]`` when given (all edge contributions touching it), else from
    the edges in ``relation_contributions``.
    """
    nodes: dict[str, dict[str, Any]] = {
        name: merge_entity(name, contribs) for name, contribs in entity_contributions.items()
    }
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    touching: dict[str, list[tuple[str, RelationRecord]]] = {}
    for (a, b), contribs in relation_contributions.items():
        key = edge_key(a, b)
        edges[key] = merge_relation(key[0], key[1], contribs)
        for end in key:
            touching.setdefault(end, []).extend(contribs)
    for end in sorted(touching):
        if end not in nodes:
            source = (endpoint_relations or {}).get(end, touching[end])
            nodes[end] = placeholder_entity(end, source)
    return nodes, edges


GraphElement = Union[str, tuple[str, str]]


def long_descriptions(
    nodes: dict[str, dict[str, Any]], edges: dict[tuple[str, str], dict[str, Any]], *,
    tokenizer: Tokenizer, max_tokens: int, input_tokens: Optional[int] = None,
) -> dict[GraphElement, str]:
    """The nodes (names) and edges (keys) whose description needs a summary (usually few),
    each with its :func:`summary_input`."""
    long: dict[GraphElement, str] = {}
    for elements in (nodes, edges):
        for element, data in elements.items():
            listing = summary_input(data["description"], tokenizer=tokenizer, max_tokens=max_tokens,
                                    input_tokens=input_tokens)
            if listing is not None:
                long[element] = listing
    return long


async def summarize_elements(
    elements: dict[GraphElement, str],
    nodes: dict[str, dict[str, Any]],
    edges: dict[tuple[str, str], dict[str, Any]],
    *,
    llm: LLMCall,
    tokenizer: Tokenizer,
    summary_max_tokens: int,
) -> None:
    """Replace the description of each of ``elements`` (in ``nodes``/``edges``) by its
    summary; ``elements`` maps each to its :func:`summary_input` (from :func:`long_descriptions`)."""

    async def summarise(element: GraphElement, listing: str) -> None:
        data = nodes[element] if isinstance(element, str) else edges[element]
        label = element if isinstance(element, str) else f"{element[0]}, {element[1]}"
        data["description"] = await summarize_description(
            label, data["description"], llm=llm, tokenizer=tokenizer, max_tokens=summary_max_tokens, listing=listing
        )

    await asyncio.gather(*(summarise(element, listing) for element, listing in elements.items()))
