"""Local queries: answer from the entities nearest the question and what surrounds them.

The context has four sections, each packed under its own token budget:

* Reports  -- ``local_max_token_for_community_report``
* Entities -- at most half of ``local_max_token_for_local_context``
* Relationships -- the rest of ``local_max_token_for_local_context`` (what entities left)
* Sources  -- ``local_max_token_for_text_unit``

Rows are kept whole and in rank order; only when the best row of a section is bigger
than the whole section budget is its long text cell cut short to fit.

so the entities and relationships together also stay within
``local_max_token_for_local_context``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Optional, TypeVar

from graphrag.query_param import QueryParam
from graphrag.records import Chunk, CommunityReport, Entity, Relation, Retrieval
from graphrag.schema import GRAPH_FIELD_SEP, edge_key

from .community_index import largest_community, with_occurrence
from .positions import cited_content
from .report_parsing import stored_rating
from .query_context import answer_from_context, doubling_slices, pack_csv_section, pack_while_reading
from .rerank import rerank_chunks
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from graphrag.stores import Stores

    from .extraction import LLMCall
    from .query_hybrid import Ranking

logger = logging.getLogger(__name__)

T = TypeVar("T")

ENTITY_HEADER = ["id", "entity", "type", "description", "rank"]
RELATION_HEADER = ["id", "source", "target", "description", "weight", "rank"]
REPORT_HEADER = ["id", "content"]
SOURCE_HEADER = ["id", "content"]

# What the Reports section reads of a report record (``stored_rating`` reads ``report_json``).
REPORT_CONTEXT_FIELDS = {"report_string", "report_json"}

LOCAL_NEEDS_ENTITIES = "Local queries need the entity vector store: build the index with enable_local=True."


def _split(value: object) -> list[str]:
    return [p for p in str(value or "").split(GRAPH_FIELD_SEP) if p]


def _clusters(node: dict, max_level: int) -> list[str]:
    raw = node.get("clusters")
    if not raw:
        return []
    try:
        memberships = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    out = []
    for c in memberships or []:
        try:
            if int(c["level"]) <= max_level:
                out.append(str(c["cluster"]))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _weight(edge: dict) -> float:
    try:
        return float(edge.get("weight", 0.0) or 0.0)
    except (TypeError, ValueError):
        return 0.0


async def _named_entities(query: str, stores: Stores) -> list[str]:
    """The entities the question names, found by name as hybrid mode finds them (exact,
    normalised or fuzzy; a Chinese question segmented into words), strongest match first."""
    from .query_hybrid import link_entities, named_in_order
    from .walk_graph import graph_index

    index = await graph_index(stores)
    return named_in_order(link_entities(query, index), index)


async def _find_entities(query: str, stores: Stores, param: QueryParam, ranking: Optional[Ranking] = None) -> list[dict]:
    """Retrieved entities: those the question names, then the most similar to it, then, while
    fewer than ``top_k``, those hybrid's walk (``ranking``) reaches best:
    ``{entity_name, data, rank, score}`` (score: the vector similarity, None for an entity the
    vectors did not find). Names and the walk count where the embedder cannot read the
    question's language: vectors alone found almost nothing for Chinese questions with a
    weak embedder (benchmarks/README.md, "Chinese documents"); where they fill ``top_k``, as
    with an embedder that reads the question, the walk adds none."""
    hits = await stores.entities_vdb.query(query, top_k=param.top_k)
    similarity: dict[str, Optional[float]] = {}
    for hit in hits:
        name = hit.get("entity_name")
        if name and name not in similarity:
            similarity[name] = hit.get("distance")
    # The walk linked the question's names already (without a walk, or with none to seed it, linking again
    # finds the same).
    named = ranking.named if ranking is not None else await _named_entities(query, stores)
    # Of the walk's entities, no more than these can be among the first top_k distinct names.
    walked = list(ranking.best_entities(param.top_k + len(named) + len(similarity))) if ranking is not None else []
    names = list(dict.fromkeys(named + list(similarity) + walked))[:param.top_k]
    if not names:
        return []
    nodes = await stores.graph.get_nodes_batch(names)
    found = [(n, d) for n, d in zip(names, nodes) if d is not None]
    missing = len(names) - len(found)
    if missing:
        logger.warning("%d retrieved entities are missing from the graph; the index may need repair", missing)
    degrees = await stores.graph.node_degrees_batch([n for n, _ in found])
    return [{"entity_name": n, "data": d, "rank": deg, "score": similarity.get(n)} for (n, d), deg in zip(found, degrees)]


def _report_groups(entities: list[dict], param: QueryParam) -> list[list[str]]:
    """Ids of the entities' communities, grouped by how many entities share each, most first."""
    counts: dict[str, int] = {}
    for e in entities:
        for cid in dict.fromkeys(_clusters(e["data"], param.level)):
            counts[cid] = counts.get(cid, 0) + 1
    groups: dict[int, list[str]] = {}
    for cid, count in counts.items():
        groups.setdefault(count, []).append(cid)
    return [groups[count] for count in sorted(groups, reverse=True)]


async def _entity_edges(entities: list[dict], stores: Stores) -> list[list[tuple[str, str]]]:
    return await stores.graph.get_nodes_edges_batch([e["entity_name"] for e in entities])


async def _relation_groups(node_edges: list[list[tuple[str, str]]], stores: Stores) -> list[list[tuple[tuple[str, str], int]]]:
    """The entities' relations as ``(key, rank)``, in groups of equal rank, highest first (each
    group in order of first appearance). A rank (the ends' degrees added) is read from the
    graph's degrees, without a relation's data: only the groups packing reaches are read."""
    pairs: dict[tuple[str, str], None] = {}
    for edges in node_edges:
        for a, b in edges:
            pairs.setdefault(edge_key(a, b), None)
    keys = list(pairs)
    groups: dict[int, list[tuple[tuple[str, str], int]]] = {}
    for key, rank in zip(keys, await stores.graph.edge_degrees_batch(keys) if keys else []):
        groups.setdefault(rank, []).append((key, rank))
    return [groups[rank] for rank in sorted(groups, reverse=True)]


def _whole_groups(groups: list[list[T]], first: int = 16) -> Iterator[list[T]]:
    """Batches of whole groups, each at least double the last in items (from ``first``): a batch
    ends where a group does, so sorting within a batch sorts within groups."""
    batch: list[T] = []
    size = first
    for group in groups:
        batch += group
        if len(batch) >= size:
            yield batch
            batch, size = [], size * 2
    if batch or not groups:  # no relations at all: one empty batch packs the empty table
        yield batch


async def _pack_relations(groups: list[list[tuple[tuple[str, str], int]]], stores: Stores, budget: int,
                          tokenizer: Tokenizer) -> tuple[str, list[tuple[tuple[str, str], dict, int]]]:
    """The Relationships section: relations by rank, then weight (ties in order of first
    appearance), as far as ``budget`` holds; a relation's data is read only for the rank
    groups the packing reaches (a hub's hundreds of relations are not read for the few dozen
    that fit). Returns the section and its relations as ``(key, data, rank)``."""

    async def read_relations(batch: list[tuple[tuple[str, str], int]]) -> list[tuple[tuple[tuple[str, str], dict, int], list[object]]]:
        datas = await stores.graph.get_edges_batch([key for key, _ in batch])
        found = [(key, d, rank) for (key, rank), d in zip(batch, datas) if d is not None]
        found.sort(key=lambda r: (-r[2], -_weight(r[1])))
        return [(r, [r[0][0], r[0][1], r[1].get("description", "UNKNOWN"), _weight(r[1]), r[2]]) for r in found]

    return await pack_while_reading("Relationships", RELATION_HEADER, _whole_groups(groups), read_relations, budget,
                                    tokenizer, cut_column=3)


def _inner_pairs(entities: list[dict], node_edges: list[list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The relations between two retrieved entities, in order of first appearance."""
    retrieved = {e["entity_name"] for e in entities}
    inner: dict[tuple[str, str], None] = {}
    for e, edges in zip(entities, node_edges):
        for a, b in edges:
            if (b if a == e["entity_name"] else a) in retrieved:
                inner.setdefault(edge_key(a, b), None)
    return list(inner)


def _related_chunks(
    entities: list[dict], node_edges: list[list[tuple[str, str]]], inner_data: dict[tuple[str, str], Optional[dict]]
) -> list[tuple[str, int]]:
    """``(chunk id, links)`` of the entities' source chunks, most linked first.

    A chunk's links are the distinct relations between two retrieved entities whose source
    ids include it, where one endpoint lists the chunk; ties go to the chunk of the
    better-ranked entity. ``inner_data``: the stored data of the relations between two
    retrieved entities (:func:`_inner_pairs`) by key, None where missing.
    """
    edge_chunks = {k: set(_split(d.get("source_id"))) for k, d in inner_data.items() if d}

    order: dict[str, int] = {}
    linked: dict[str, set[tuple[str, str]]] = {}
    for index, (e, edges) in enumerate(zip(entities, node_edges)):
        inner = [key for key in (edge_key(a, b) for a, b in edges) if key in edge_chunks]
        for chunk_id in _split(e["data"].get("source_id")):
            order.setdefault(chunk_id, index)
            hits = linked.setdefault(chunk_id, set())
            hits.update(key for key in inner if chunk_id in edge_chunks[key])
    ranked = sorted(order, key=lambda chunk_id: (-len(linked[chunk_id]), order[chunk_id]))
    return [(chunk_id, len(linked[chunk_id])) for chunk_id in ranked]


async def _walk_ranking(query: str, stores: Stores, param: QueryParam) -> Optional[Ranking]:
    """Hybrid mode's ranking for the question (None without chunk vectors or a seed)."""
    if stores.chunks_vdb is None:
        return None
    from .query_hybrid import rank

    return await rank(query, stores, param)


def _sources_by_walk(ranking: Optional[Ranking], ranked: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The entities' ``(chunk id, links)`` in the hybrid mode's order for the question (chunks
    it does not rank keep their order, last). Seeding the walk with the retrieved entities too
    was measured worse: they are found by vector similarity and pull it off the question."""
    if ranking is None:
        return ranked
    links = dict(ranked)
    walked = list(filter(links.__contains__, ranking.chunk_ids))  # the walk reaches most chunks
    reached = set(walked)
    return [(c, links[c]) for c in walked] + [(c, n) for c, n in ranked if c not in reached]


async def retrieve_local(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer,
                         cited: bool = False) -> Optional[Retrieval]:
    """The entities nearest the question and what surrounds them, as packed into the local
    context; None when no entity matches. ``cited``: the Sources rows are numbered from 1,
    the numbers a cited answer uses."""
    return await _retrieve(query, stores, param, tokenizer, cited, records=True)


async def _retrieve(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer, cited: bool,
                    records: bool) -> Optional[Retrieval]:
    """:func:`retrieve_local`; without ``records``, the context alone (an answer needs no records)."""
    if stores.entities_vdb is None:
        return None
    ranking = await _walk_ranking(query, stores, param)
    entities = await _find_entities(query, stores, param, ranking)
    if not entities:
        return None
    node_edges = await _entity_edges(entities, stores)
    report_groups = _report_groups(entities, param)
    relation_groups = await _relation_groups(node_edges, stores)
    inner = _inner_pairs(entities, node_edges)
    inner_data = dict(zip(inner, await stores.graph.get_edges_batch(inner)))
    chunk_ids = _sources_by_walk(ranking, _related_chunks(entities, node_edges, inner_data))
    chunk_ids = await rerank_chunks(query, chunk_ids, stores, chunk_id=lambda ranked: ranked[0],
                                    headings_first=param.named_headings_first)

    entity_rows = [
        [i, e["entity_name"], e["data"].get("entity_type", "UNKNOWN"), e["data"].get("description", "UNKNOWN"), e["rank"]]
        for i, e in enumerate(entities)
    ]
    entity_budget = param.local_max_token_for_local_context // 2
    entities_text, n_entities, entities_tokens = pack_csv_section(
        "Entities", ENTITY_HEADER, entity_rows, entity_budget, tokenizer, cut_column=3)

    relations_text, relations = await _pack_relations(
        relation_groups, stores, param.local_max_token_for_local_context - entities_tokens, tokenizer)

    single = param.local_community_single_one
    if single:
        report_groups = report_groups[:1]

    # The readers hand back stored records; only those the sections keep become records. A
    # context alone needs a report's text and rating only, not its member lists.
    report_fields = None if records else REPORT_CONTEXT_FIELDS

    async def read_reports(ids: list[str]) -> list[tuple[tuple[str, dict], list[str]]]:
        found = [(i, r) for i, r in zip(ids, await stores.community_reports.get_by_ids(ids, fields=report_fields))
                 if r is not None]
        found.sort(key=lambda item: -stored_rating(item[1]))  # within a group of equal counts, best rated first
        return [(item, [item[1].get("report_string", "")]) for item in found[:1 if single else None]]

    reports_text, kept_reports = await pack_while_reading(
        "Reports", REPORT_HEADER, report_groups, read_reports, param.local_max_token_for_community_report, tokenizer)

    async def read_chunks(ranked: list[tuple[str, int]]) -> list[tuple[tuple[str, int, dict], list[str]]]:
        records = await stores.text_chunks.get_by_ids([i for i, _ in ranked])
        return [((i, links, r), [cited_content(r)]) for (i, links), r in zip(ranked, records)
                if r is not None and r.get("content")]

    sources_text, kept_chunks = await pack_while_reading(
        "Sources", SOURCE_HEADER, doubling_slices(chunk_ids), read_chunks, param.local_max_token_for_text_unit,
        tokenizer, first_id=1 if cited else 0)
    logger.info(
        "Local context: %d/%d entities, %d/%d relations, %d/%d communities, %d/%d chunks",
        n_entities, len(entity_rows), len(relations), sum(map(len, relation_groups)), len(kept_reports),
        sum(len(g) for g in report_groups), len(kept_chunks), len(chunk_ids),
    )
    context = "\n\n".join(s for s in (reports_text, entities_text, relations_text, sources_text) if s)
    if not records:
        return Retrieval(question=query, mode="local", context=context)
    largest = await largest_community(stores.index_meta) if kept_reports else None
    reports = [CommunityReport.from_stored(i, with_occurrence(r, largest)) for i, r in kept_reports]
    chunks = [replace(Chunk.from_stored(i, r), score=float(links)) for i, links, r in kept_chunks]
    return Retrieval(
        question=query, mode="local", chunks=tuple(chunks), reports=tuple(reports), context=context,
        entities=tuple(replace(Entity.from_stored(e["entity_name"], e["data"]), degree=e["rank"], score=e["score"])
                       for e in entities[:n_entities]),
        relations=tuple(Relation.from_stored(*key, data) for key, data, _ in relations),
    )


async def build_local_context(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer) -> Optional[str]:
    """The data tables a local answer is grounded in, or None when no entity matches."""
    retrieval = await _retrieve(query, stores, param, tokenizer, cited=False, records=False)
    return retrieval.context if retrieval is not None else None


async def local_query(query: str, stores: Stores, param: QueryParam, *, llm: LLMCall, tokenizer: Tokenizer) -> str:
    """Answer ``query`` from the local context (or return that context when ``only_need_context``)."""
    if stores.entities_vdb is None:
        return LOCAL_NEEDS_ENTITIES
    context = await build_local_context(query, stores, param, tokenizer)
    return await answer_from_context(query, context, param, llm, "local_rag_response", "context_data")
