"""Merge stage, store side: apply changed chunk extractions to the graph and entity vectors.

Every entity and relation a changed (new or removed) chunk mentions is rebuilt from the
recorded extractions of all chunks that still mention it. A node's data is therefore a
pure function of those extractions: the result does not depend on insertion order, and
deleting a document needs no new extraction call.
"""
from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Optional

from graphrag.operators.clustering import community_ids
from graphrag.operators.chunking import compute_id
from graphrag.operators.extraction import LLMCall, normalize_entity_name
from graphrag.operators.resolution import AliasMap, raw_names
from graphrag.operators.merge import (
    GraphElement,
    build_graph_records,
    group_contributions,
    long_descriptions,
    placeholder_entity,
    summarize_elements,
)
from graphrag.operators.tokenizer import Tokenizer
from graphrag.schema import GRAPH_FIELD_SEP, ChunkExtraction

if TYPE_CHECKING:
    from graphrag.schema import JSONValue
    from graphrag.storage.base import BaseGraphStorage, BaseVectorStorage

logger = logging.getLogger(__name__)

_WRITES_BETWEEN_YIELDS = 512


async def _now_and_then(i: int) -> None:
    """Let the event loop run after every ``_WRITES_BETWEEN_YIELDS`` graph writes."""
    if i % _WRITES_BETWEEN_YIELDS == _WRITES_BETWEEN_YIELDS - 1:
        await asyncio.sleep(0)


async def _in_batches(write: Callable[[dict], Coroutine[Any, Any, None]], records: dict) -> None:
    """``write`` (a batch upsert) over ``records`` in batches of ``_WRITES_BETWEEN_YIELDS``,
    letting the event loop run between them."""
    keys = list(records)
    for start in range(0, len(keys), _WRITES_BETWEEN_YIELDS):
        await write({k: records[k] for k in keys[start : start + _WRITES_BETWEEN_YIELDS]})
        await asyncio.sleep(0)


@dataclass
class GraphChanges:
    """What an update changed. Entity vectors are left to the caller so embedding can run
    beside clustering and reports instead of before them.

    ``summaries`` is the task still writing summarised descriptions of long ones into the
    graph (and their vector records), started by the caller's scheduling scope: the structure
    is already in place, so clustering can run while the summaries are in flight.
    ``summarising`` names those elements (node names, sorted edge pairs): await
    :meth:`settled` before reading their descriptions.
    """

    entities_changed: int = 0
    vectors_to_upsert: dict[str, dict[str, Any]] = field(default_factory=dict)
    vectors_to_delete: list[str] = field(default_factory=list)
    # Relation (fact) vectors, kept like entity vectors: what the hybrid walk seeds from.
    relation_vectors_to_upsert: dict[str, dict[str, Any]] = field(default_factory=dict)
    relation_vectors_to_delete: list[str] = field(default_factory=list)
    summaries: Optional["asyncio.Future[None]"] = None
    summarising: frozenset[GraphElement] = frozenset()

    async def settled(self) -> None:
        if self.summaries is not None:
            await self.summaries


async def store_entity_vectors(entities_vdb: Optional[BaseVectorStorage], changes: GraphChanges,
                               relations_vdb: Optional[BaseVectorStorage] = None,
                               catch_up: Optional[Callable[[set[str]], Awaitable[dict[str, dict[str, Any]]]]] = None
                               ) -> None:
    """Write the entity vectors (and, given ``relations_vdb``, the relation vectors) an update
    changed, once its summaries are in; ``catch_up`` (given this update's own relation vector
    ids) brings the rest of the store back to the graph's relations
    (:func:`relation_vectors_to_catch_up`)."""
    await changes.settled()
    if entities_vdb is not None:
        await entities_vdb.delete(changes.vectors_to_delete)
        await entities_vdb.upsert(changes.vectors_to_upsert)
    if relations_vdb is not None:
        own = set(changes.relation_vectors_to_upsert) | set(changes.relation_vectors_to_delete)
        earlier = await catch_up(own) if catch_up is not None else {}
        await relations_vdb.delete(changes.relation_vectors_to_delete)
        await relations_vdb.upsert({**earlier, **changes.relation_vectors_to_upsert})


def entity_vector_id(name: str) -> str:
    return compute_id(name, "ent-")


def relation_vector_id(key: tuple[str, str]) -> str:
    """A relation's vector id, from its sorted endpoint pair (the graph's edge key)."""
    return compute_id("\x1f".join(sorted(key)), "rel-")


def relation_vector_text(key: tuple[str, str], edge: dict[str, Any]) -> str:
    """What a relation's vector embeds: the fact as HippoRAG 2 embeds a triple, both ends and
    what links them, so a question that paraphrases the fact finds it."""
    return f"{key[0]} | {key[1]} | {edge.get('description')}"


def relation_vector_record(key: tuple[str, str], edge: dict[str, Any], tokenizer: Tokenizer,
                           vector_tokens: int) -> dict[str, Any]:
    return {"content": tokenizer.truncate(relation_vector_text(key, edge), vector_tokens),
            "src_id": key[0], "tgt_id": key[1]}


async def relation_vectors_to_catch_up(graph: BaseGraphStorage, relations_vdb: Optional[BaseVectorStorage],
                                       tokenizer: Tokenizer, vector_tokens: int,
                                       skip: set[str]) -> dict[str, dict[str, Any]]:
    """Make the store's ids those of the graph's relations again (those in ``skip`` apart: the
    ids this write upserts or deletes itself): vectors of relations gone while relation vectors
    were off are deleted, and the record of every relation without one (an index built before
    they were kept, or relations written while they were off) is returned to embed. Compares
    id lists only, so a write whose store is current reads no edge's attributes."""
    if relations_vdb is None:
        return {}
    from graphrag.storage.base import catch_up_keys, walk_links  # the storage package imports networkx

    _, pairs = await walk_links(graph)
    by_id = {relation_vector_id(k): k for k in {tuple(sorted(p)) for p in pairs if p[0] != p[1]}}
    ids = await catch_up_keys(await relations_vdb.get_ids(), set(by_id), skip, relations_vdb.delete,
                              "relation vectors")
    keys = [by_id[i] for i in ids]
    return {relation_vector_id(k): relation_vector_record(k, e, tokenizer, vector_tokens)
            for k, e in zip(keys, await graph.get_edges_batch(keys)) if e is not None}


def _about(extraction: ChunkExtraction, names: set[str], aliases: Optional[AliasMap] = None) -> ChunkExtraction:
    """The records of ``extraction`` that name one of ``names`` (a name read through
    ``aliases`` when given: the records of those nodes)."""
    aliases = aliases or {}

    def named(raw: str) -> bool:
        name = normalize_entity_name(raw)
        return aliases.get(name, name) in names

    return {"entities": [e for e in extraction.get("entities", []) if named(e["name"])],
            "relations": [r for r in extraction.get("relations", []) if named(r["source"]) or named(r["target"])]}


def entity_vector_text(name: str, node: dict[str, Any]) -> str:
    """What an entity's vector embeds: its names (so any alias finds it), then its description."""
    aliases = _split_ids(node.get("aliases"))
    label = f"{name} ({', '.join(aliases)})" if aliases else name
    return f"{label} {node.get('description')}"


def _split_ids(value: JSONValue) -> list[str]:
    return [v for v in str(value or "").split(GRAPH_FIELD_SEP) if v]


@dataclass
class GraphRebuild:
    """The structure one batch of changed extractions left in the graph, before long
    descriptions are summarised. Batches applied one after another combine with ``then``,
    so most of an insert's merge can run while its last extraction calls are in flight."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # Long descriptions to summarise, each with its summary input.
    long: dict[GraphElement, str] = field(default_factory=dict)
    # Vector texts as committed before the insert (None: a new node), to skip unchanged vectors.
    committed: dict[str, Optional[str]] = field(default_factory=dict)
    committed_relations: dict[tuple[str, str], Optional[str]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    deleted_edges: set[tuple[str, str]] = field(default_factory=set)
    # The communities the touched nodes were in before (a deleted node's are known only here).
    were_in: set[str] = field(default_factory=set)

    @property
    def touched(self) -> set[str]:
        """Every node written or deleted, and both ends of every edge written or deleted."""
        return {*self.nodes, *self.deleted, *(n for key in [*self.edges, *self.deleted_edges] for n in key)}

    def then(self, later: "GraphRebuild") -> "GraphRebuild":
        """This batch followed by ``later``, which rebuilt everything it touched from all
        the extractions, so its records (and deletions) win."""
        touched = {*later.nodes, *later.edges, *later.deleted, *later.deleted_edges}
        return GraphRebuild(
            nodes={**{n: d for n, d in self.nodes.items() if n not in later.deleted}, **later.nodes},
            edges={**{k: d for k, d in self.edges.items() if k not in later.deleted_edges}, **later.edges},
            long={**{e: v for e, v in self.long.items() if e not in touched}, **later.long},
            committed={**later.committed, **self.committed},
            committed_relations={**later.committed_relations, **self.committed_relations},
            deleted=(self.deleted - set(later.nodes)) | later.deleted,
            deleted_edges=(self.deleted_edges - set(later.edges)) | later.deleted_edges,
            were_in=self.were_in | later.were_in,
        )


ExtractionReader = Callable[[list[str]], Awaitable[list[Optional[ChunkExtraction]]]]


async def rebuild_graph(
    changed_extractions: dict[str, ChunkExtraction],
    removed_chunks: set[str],
    *,
    graph: BaseGraphStorage,
    read_extractions: ExtractionReader,
    tokenizer: Tokenizer,
    summary_max_tokens: int,
    summary_input_tokens: Optional[int],
    replaced: Optional[dict[str, ChunkExtraction]] = None,
    aliases: Optional[AliasMap] = None,
    previous_aliases: Optional[AliasMap] = None,
    moved: Optional[set[str]] = None,
) -> GraphRebuild:
    """Rebuild, in the graph, every entity and relation ``changed_extractions`` mention.

    ``changed_extractions`` holds the extractions of new chunks and of ``removed_chunks``;
    ``replaced`` the earlier records of chunks extracted again (a retried chunk), whose
    names are rebuilt too, so what only the earlier record named leaves the graph;
    ``read_extractions`` gives the recorded extractions of the other chunks. Descriptions longer than ``summary_max_tokens``
    are left whole and listed in ``long`` with a summary input of at most
    ``summary_input_tokens``; with None (no LLM to summarise) they are cut to that length.

    With entity resolution, names are grouped through ``aliases``, and each node lists the
    other names it was given in its ``aliases`` attribute. ``previous_aliases``: the map the
    graph was built with, when it differs; then only the nodes and relations of the ``moved``
    names (whose node changed), under either map, are rebuilt from the changed chunks.
    """
    # The pure computing runs in worker threads and the graph writes yield now and then: a
    # merge ahead of the last extraction calls must not hold up their answers.
    added = {k: v for k, v in changed_extractions.items() if k not in removed_chunks}
    removed = {k: v for k, v in changed_extractions.items() if k in removed_chunks}
    before = aliases if previous_aliases is None else previous_aliases
    # What a re-extracted chunk named before is touched as a removed chunk's names are.
    gone = {**removed, **{k: v for k, v in (replaced or {}).items() if k in added}}
    # What the pass touches: everything the changed chunks say, or after a change of the
    # alias map only what they say about the names that moved.
    scope = added if moved is None else {c: _about(e, moved) for c, e in added.items()}
    # After a change of the alias map the added chunks are grouped below, for the rebuilt nodes only.
    (added_ents, added_rels), (scope_ents, scope_rels), (removed_ents, removed_rels), (left_ents, left_rels) = \
        await asyncio.to_thread(lambda: (
            group_contributions(added, aliases) if not moved else ({}, {}),
            group_contributions(scope, aliases) if moved else ({}, {}),
            group_contributions(gone, before),
            group_contributions(scope, before) if previous_aliases is not None else ({}, {})))
    if not moved:
        scope_ents, scope_rels = added_ents, added_rels
    names = sorted({*scope_ents, *removed_ents, *left_ents}
                   | {n for rels in (scope_rels, removed_rels, left_rels) for key in rels for n in key})
    if moved:  # the far end of a re-pointed relation keeps its node: only the moved names' nodes change
        names = sorted(set(names) & {m.get(n, n) for n in moved for m in (aliases or {}, before or {})})
    if not names:
        return GraphRebuild()
    old_nodes = dict(zip(names, await graph.get_nodes_batch(names)))
    # Every chunk that mentions a touched name is in that node's source_id, or is new;
    # the new ones are grouped already.
    sources = {c for node in old_nodes.values() if node for c in _split_ids(node.get("source_id"))}
    sources = sorted(sources - removed_chunks - set(added))
    earlier = {k: v for k, v in zip(sources, await read_extractions(sources)) if v}
    # Only relations a changed chunk states can change; each has both endpoints in ``names``.
    edge_keys = sorted({*scope_rels, *removed_rels, *left_rels})
    old_edges = dict(zip(edge_keys, await graph.get_edges_batch(edge_keys))) if edge_keys else {}

    def records() -> GraphRebuild:
        grouped, new_ents, new_rels = earlier, added_ents, added_rels
        if moved:
            # Only the records of the rebuilt nodes and of the ends of the rebuilt relations are
            # read: the rest of the chunks naming a moved name stays as it is.
            kept = set(names) | {n for key in edge_keys for n in key}
            grouped = {c: _about(e, kept, aliases) for c, e in earlier.items()}
            new_ents, new_rels = group_contributions({c: _about(e, kept, aliases) for c, e in added.items()}, aliases)
        entity_contribs, relation_contribs = group_contributions(grouped, aliases)
        for name, contribs in new_ents.items():
            entity_contribs.setdefault(name, []).extend(contribs)
        for key, contribs in new_rels.items():
            relation_contribs.setdefault(key, []).extend(contribs)
        mentions: dict[str, set[str]] = defaultdict(set)
        endpoint_relations: dict[str, list] = defaultdict(list)
        for name, contribs in entity_contribs.items():
            mentions[name].update(c for c, _ in contribs)
        for key, contribs in relation_contribs.items():
            for end in key:
                mentions[end].update(c for c, _ in contribs)
                endpoint_relations[end].extend(contribs)
        members: dict[str, set[str]] = defaultdict(set)
        if aliases is not None:
            # Every chunk naming any of a node's names is its source, even where a relation
            # between two of them became a loop; profiles are read through that.
            for chunk_id, extraction in [*earlier.items(), *added.items()]:
                for raw in raw_names(extraction):
                    members[aliases.get(raw, raw)].add(raw)
                    mentions[aliases.get(raw, raw)].add(chunk_id)
        nodes, edges = build_graph_records(
            {n: entity_contribs[n] for n in names if n in entity_contribs},
            {k: relation_contribs[k] for k in edge_keys if k in relation_contribs},
            endpoint_relations=endpoint_relations,
        )
        # A touched name whose entity records all left, still a relation's end in a chunk this
        # write did not change, keeps a node built from its relations, as a fresh build gives it.
        for name in names:
            if name not in nodes and endpoint_relations.get(name):
                nodes[name] = placeholder_entity(name, endpoint_relations[name])
        # (An edge's far end outside ``names`` keeps its node as it is.)
        touched = set(names)
        nodes = {n: d for n, d in nodes.items() if mentions.get(n) and n in touched}
        edges = {k: d for k, d in edges.items() if mentions.get(k[0]) and mentions.get(k[1])}
        for name, data in nodes.items():
            data["source_id"] = GRAPH_FIELD_SEP.join(sorted(mentions[name]))
            if aliases is not None:
                # Written even when empty: an upsert keeps the attributes it is not given.
                data["aliases"] = GRAPH_FIELD_SEP.join(sorted(members[name] - {name}))
        rebuilt = GraphRebuild(nodes=nodes, edges=edges, committed={
            n: entity_vector_text(n, old) if old else None for n, old in old_nodes.items()},
            committed_relations={k: relation_vector_text(k, old) if old else None for k, old in old_edges.items()},
            were_in=community_ids((n, old) for n, old in old_nodes.items() if old))
        if summary_input_tokens is not None:
            rebuilt.long = long_descriptions(nodes, edges, tokenizer=tokenizer, max_tokens=summary_max_tokens,
                                             input_tokens=summary_input_tokens)
        else:
            for data in [*nodes.values(), *edges.values()]:
                data["description"] = tokenizer.truncate(data["description"], summary_max_tokens)
        return rebuilt

    rebuilt = await asyncio.to_thread(records)
    nodes, edges = rebuilt.nodes, rebuilt.edges
    await _in_batches(graph.upsert_nodes, {name: nodes[name] for name in names if name in nodes})
    for i, name in enumerate(n for n in names if n not in nodes and old_nodes.get(n) is not None):
        await graph.delete_node(name)
        rebuilt.deleted.add(name)
        await _now_and_then(i)
    await _in_batches(graph.upsert_edges, {key: edges[key] for key in edge_keys if key in edges})
    for i, key in enumerate(key for key in edge_keys if key not in edges):
        await graph.delete_edge(*key)
        rebuilt.deleted_edges.add(key)
        await _now_and_then(i)
    return rebuilt


def finish_graph_update(
    rebuilt: GraphRebuild,
    *,
    graph: BaseGraphStorage,
    summarizer: Optional[LLMCall],
    tokenizer: Tokenizer,
    summary_max_tokens: int,
    vector_tokens: int,
    start: Callable[[Coroutine[Any, Any, None]], "asyncio.Future[None]"],
) -> GraphChanges:
    """Vector work for what ``rebuilt`` changed, and the summaries of its long descriptions,
    handed to ``start`` to run in the background (``GraphChanges.summaries``)."""
    nodes, edges, long = rebuilt.nodes, rebuilt.edges, sorted(rebuilt.long, key=_element_order)
    if long and summarizer is None:
        raise ValueError("long descriptions to summarise, but no summarizer")
    changes = GraphChanges(vectors_to_delete=[entity_vector_id(n) for n in sorted(rebuilt.deleted)],
                           relation_vectors_to_delete=[relation_vector_id(k) for k in sorted(rebuilt.deleted_edges)])

    def vector_for(name: str) -> None:
        text = entity_vector_text(name, nodes[name])
        if rebuilt.committed.get(name) != text:
            changes.vectors_to_upsert[entity_vector_id(name)] = {
                "content": tokenizer.truncate(text, vector_tokens),
                "entity_name": name,
            }

    def relation_vector_for(key: tuple[str, str]) -> None:
        if rebuilt.committed_relations.get(key) != relation_vector_text(key, edges[key]):
            changes.relation_vectors_to_upsert[relation_vector_id(key)] = relation_vector_record(
                key, edges[key], tokenizer, vector_tokens)

    summarising = set(long)
    for name in sorted(nodes):
        if name not in summarising:
            vector_for(name)
    for key in sorted(edges):
        if key not in summarising:
            relation_vector_for(key)
    changes.entities_changed = len(nodes) + len(changes.vectors_to_delete)
    logger.info("Merged %d entities and %d relations (%d entities removed, %d descriptions to summarise)",
                len(nodes), len(edges), len(changes.vectors_to_delete), len(long))

    async def write_summaries() -> None:
        # Only descriptions change here, never the structure that clustering reads meanwhile.
        assert summarizer is not None
        await summarize_elements({e: rebuilt.long[e] for e in long}, nodes, edges, llm=summarizer,
                                 tokenizer=tokenizer, summary_max_tokens=summary_max_tokens)
        await graph.upsert_nodes({e: nodes[e] for e in long if isinstance(e, str)})
        await graph.upsert_edges({e: edges[e] for e in long if not isinstance(e, str)})
        for element in long:
            if isinstance(element, str):
                vector_for(element)
            else:
                relation_vector_for(element)

    if long:
        changes.summaries = start(write_summaries())
        changes.summarising = frozenset(long)
    return changes


def _element_order(element: GraphElement) -> tuple:
    return (0, element, "") if isinstance(element, str) else (1, *element)


class MergeAhead:
    """Merges the chunks extracted so far while extraction runs, and the rest after it. Every
    pass rebuilds what it touches from every extraction, so the graph is the one a single pass
    would make.

    The first early pass starts once half of the ``expected`` chunks are in (the event loop has
    CPU to spare while the model works), the next once only ``tail`` are left (the model's
    slots would mostly idle); each merges what came since the one before, after it (they write
    the same graph). What a pass leaves is what the merge after the last answer has to do.

    ``rebuild(changed, removed_chunks)`` runs one pass; ``start`` runs the early passes in the
    background. The extractions merged are gathered in ``extracted`` (given: the dict the
    rebuild reads this write's extractions from, before they are recorded).
    """

    def __init__(self, rebuild: Callable[[dict[str, ChunkExtraction], set[str]], Awaitable[GraphRebuild]],
                 removed: dict[str, ChunkExtraction], expected: int, tail: int,
                 start: Callable[[Coroutine[Any, Any, GraphRebuild]], "asyncio.Future[GraphRebuild]"],
                 extracted: Optional[dict[str, ChunkExtraction]] = None) -> None:
        self._rebuild = rebuild
        self._removed = removed
        self._expected = expected
        self._start = start
        self.extracted: dict[str, ChunkExtraction] = {} if extracted is None else extracted
        # The numbers of chunks still to come at which an early pass starts, largest first.
        self._starts = sorted({left for left in (expected // 2, tail) if left >= 1}, reverse=True)
        self._merged: set[str] = set()
        self._ahead: Optional["asyncio.Future[GraphRebuild]"] = None

    def on_extracted(self, chunk_id: str, extraction: ChunkExtraction) -> None:
        self.extracted[chunk_id] = extraction
        left = self._expected - len(self.extracted)
        if self._starts and left <= min(self._starts[0], len(self.extracted)):
            del self._starts[0]
            while self._starts and left <= self._starts[0]:
                del self._starts[0]
            so_far = {k: v for k, v in self.extracted.items() if k not in self._merged}
            self._merged |= set(so_far)
            self._ahead = self._start(self._after(self._ahead, so_far))

    async def finish(self, extractions: dict[str, ChunkExtraction]) -> GraphRebuild:
        """The whole rebuild, once ``extractions`` (every new chunk's) are in."""
        self.extracted.update(extractions)
        rest = {k: v for k, v in extractions.items() if k not in self._merged}
        return await self._after(self._ahead, rest)

    async def _after(self, before: Optional["asyncio.Future[GraphRebuild]"],
                     extractions: dict[str, ChunkExtraction]) -> GraphRebuild:
        """The pass over ``extractions`` once the pass ``before`` is done, joined to its result
        (the first pass also takes the removed chunks out)."""
        if before is None:
            return await self._first_pass(extractions)
        return (await before).then(await self._rebuild(extractions, set()))

    async def _first_pass(self, extractions: dict[str, ChunkExtraction]) -> GraphRebuild:
        return await self._rebuild({**self._removed, **extractions}, set(self._removed))
