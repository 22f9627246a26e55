"""The knowledge graph as an API: entities, neighbours, traversals, paths, subgraphs, search.

Reached as ``rag.knowledge_graph`` -- not to be confused with ``rag.stores.graph``, the graph
*store* these calls read through its contract (``get_node_edges``, the batch reads,
``get_all_nodes``), so every backend serves them. Each call is async (``a...``) with a sync
twin, returns the typed records of :mod:`graphrag.records` with their source chunk ids and
documents, and is bounded: depth caps, ``limit``/``max_nodes``, and at most ``max_scan``
edges looked at, so a hub entity with thousands of edges costs one bounded read.

Names resolve case- and punctuation-insensitively through an index of every entity name,
built once per index version (after each insert or delete made through this ``GraphRAG``),
never per call; no call re-reads the graph from disk.
"""
from __future__ import annotations

import asyncio
import difflib
import re
import heapq
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from graphrag.aio import run_sync
from graphrag.errors import EntityNotFound, InvalidInputError
from graphrag.operators.community_index import largest_community, with_occurrence
from graphrag.operators.chinese_text import split_words
from graphrag.operators.names import compact_key as name_key
from graphrag.records import Community, Entity, Label, Path, Relation, Subgraph, split_field
from graphrag.schema import edge_key

if TYPE_CHECKING:
    from graphrag.operators.retrieval import DocumentLookup
    from graphrag.stores import Stores
    from graphrag.storage.base import BaseGraphStorage

MAX_DEPTH = 4  # neighbours, traversals and subgraphs
MAX_PATH_DEPTH = 6
MAX_SCAN = 20_000  # edges looked at per call, at most
DIRECTIONS = ("both", "out", "in")
# Longest run of words read as one entity name in a text.
MAX_NAME_WORDS = 6
_WORD = re.compile(r"\w[\w'&.-]*", re.UNICODE)
# How alike a typed text and the start of a name (or one of its words) must be for a
# fuzzy label match: SequenceMatcher's ratio, which one wrong letter in six keeps above.
FUZZY_LABEL_RATIO = 0.75
# Fuzzy label matching starts at this many letters (fewer match too much by chance), and
# compares only texts with the typed first letter: misspellings rarely change it, and it
# keeps a keystroke's scan of a large graph short.
FUZZY_LABEL_MIN_CHARS = 3


class NameIndex:
    """Every entity name by its :func:`name_key`, for resolving names as users type them."""

    def __init__(self, names: Iterable[str]) -> None:
        self.by_key: dict[str, list[str]] = {}
        for name in names:
            self.by_key.setdefault(name_key(name), []).append(name)

    def resolve(self, name: str) -> Optional[str]:
        found = self.by_key.get(name_key(name))
        if not found:
            return None
        return name if name in found else min(found)

    def close_matches(self, name: str, n: int = 5) -> list[str]:
        """Names like ``name``: those its letters start or contain, then spelling neighbours."""
        key = name_key(name)
        if not key:
            return []
        keys = list(self.by_key)
        containing = sorted((k for k in keys if key in k), key=lambda k: (not k.startswith(key), len(k), k))
        similar = difflib.get_close_matches(key, keys, n=n, cutoff=0.6)
        picked = list(dict.fromkeys(containing[:n] + similar))[:n]
        return [self.by_key[k][0] for k in picked]


class KnowledgeGraph:
    """Graph exploration over a working dir's stores (see the module docstring)."""

    def __init__(self, stores: Callable[[], "Stores"], version: Callable[[], int]) -> None:
        self._stores = stores
        self._version = version
        self._cache_key: Optional[tuple[int, int]] = None
        self._names: Optional[NameIndex] = None
        self._labels: Optional[list[tuple[Label, str, tuple[str, ...]]]] = None
        self._documents: Optional["DocumentLookup"] = None

    @classmethod
    def open(cls, working_dir: str) -> "KnowledgeGraph":
        """Read-only over a working dir's files: no embedding model (so no ``search``), no LLM,
        no lock, nothing written -- for notebooks and tools inspecting an index."""
        from graphrag.config import GraphRAGConfig
        from graphrag.stores import open_stores

        stores = open_stores(GraphRAGConfig(working_dir=working_dir, always_create_working_dir=False), None)
        return cls(lambda: stores, lambda: 0)

    # ------------------------------------------------------------------ caches

    def _fresh(self) -> None:
        key = (self._version(), id(self._stores()))
        if key != self._cache_key:
            from graphrag.operators.retrieval import DocumentLookup

            self._cache_key, self._names, self._labels = key, None, None
            self._documents = DocumentLookup(self._stores())

    @property
    def _graph(self) -> BaseGraphStorage:
        return self._stores().graph

    async def _name_index(self) -> NameIndex:
        self._fresh()
        if self._names is None:
            self._names = NameIndex(name for name, _ in await self._graph.get_all_nodes())
        return self._names

    async def _label_index(self) -> list[tuple[Label, str, tuple[str, ...]]]:
        """Every entity as a label with its name's key and its words' keys, best connected
        first; built once per index version (autocomplete asks on every keystroke)."""
        self._fresh()
        if self._labels is None:
            nodes = await self._graph.get_nodes_attributes(("entity_type",))
            degrees = await self._graph.node_degrees_batch([name for name, _ in nodes])
            labels = sorted((Label(name, Entity.from_stored(name, data).type, degree)
                             for (name, data), degree in zip(nodes, degrees)), key=lambda l: (-l.degree, l.name))
            self._labels = [(label, name_key(label.name), tuple(name_key(w) for w in label.name.split()))
                            for label in labels]
        return self._labels

    @property
    def documents(self) -> "DocumentLookup":
        """Chunk -> document lookups, remembered for this index version."""
        self._fresh()
        assert self._documents is not None
        return self._documents

    async def _resolve(self, name: str) -> str:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("an entity name must be a non-empty string")
        names = await self._name_index()
        found = names.resolve(name)
        if found is None:
            suggestions = names.close_matches(name)
            hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
            raise EntityNotFound(f"no entity named {name!r}{hint}", missing=[name], suggestions=suggestions)
        return found

    async def _entities(self, names: Sequence[str], **fields: Any) -> list[Entity]:
        """Entities of ``names`` (unknown ones skipped), with degree and documents; ``fields``
        maps a name to extra field values (``distance``, ``via``, ``score``)."""
        graph = self._graph
        nodes, degrees = await graph.get_nodes_batch(list(names)), await graph.node_degrees_batch(list(names))
        out = []
        for name, node, degree in zip(names, nodes, degrees):
            if node is None:
                continue
            entity = Entity.from_stored(name, node)
            extra = {field: values[name] for field, values in fields.items() if name in values}
            out.append(replace(entity, degree=degree, documents=await self.documents.documents(entity.source_chunk_ids),
                               **extra))
        return out

    async def _communities(self, entities: Sequence[Entity]) -> tuple[Community, ...]:
        ids = list(dict.fromkeys(c for e in entities for c in e.communities))
        if not ids:
            return ()
        stores = self._stores()
        records, largest = await stores.community_reports.get_by_ids(ids), await largest_community(stores.index_meta)
        return tuple(Community.from_stored(c, with_occurrence(r, largest)) for c, r in zip(ids, records) if r is not None)

    async def _relation(self, a: str, b: str, data: dict) -> Relation:
        relation = Relation.from_stored(a, b, data)
        return replace(relation, documents=await self.documents.documents(relation.source_chunk_ids))

    # ------------------------------------------------------------------ calls

    async def aentity(self, name: str) -> Entity:
        """The entity ``name`` names (any case or punctuation); ``EntityNotFound`` with close
        matches in ``.suggestions`` otherwise."""
        resolved = await self._resolve(name)
        found = await self._entities([resolved])
        if not found:  # the index of names is older than the graph store it was read from
            raise EntityNotFound(f"no entity named {name!r}", missing=[name])
        return found[0]

    async def aneighbors(self, name: str, depth: int = 1, direction: str = "both", relation: Optional[str] = None,
                         entity_type: Optional[str] = None, min_weight: float = 0.0, limit: int = 50,
                         max_scan: int = MAX_SCAN) -> list[Entity]:
        """Entities within ``depth`` hops (at most ``MAX_DEPTH``), nearest first and, at one
        distance, by the weight of the edge that reached them; each with ``distance`` and ``via``.

        Filters apply to every hop: ``relation`` is a word or phrase the relation's description
        holds (any case), ``entity_type`` the neighbour's type, ``min_weight`` the least edge
        weight, ``direction`` ``"out"`` (``name`` was the relation's source when it was
        extracted) or ``"in"`` (its target). Deeper hops start only from the ``limit`` kept.
        """
        return await self._walk(name, depth, direction, relation, entity_type, min_weight, limit, max_scan)

    async def atraverse(self, start: str, max_depth: int = 2, relation: Optional[str] = None,
                        entity_type: Optional[str] = None, min_weight: float = 0.0, direction: str = "both",
                        limit: int = 100, max_scan: int = MAX_SCAN) -> list[Entity]:
        """Breadth-first from ``start`` (the start itself first, at distance 0): each entity
        with its ``distance`` and the edge that reached it (``via``)."""
        first = await self.aentity(start)
        rest = await self._walk(start, max_depth, direction, relation, entity_type, min_weight, max(limit - 1, 0),
                                max_scan)
        return [replace(first, distance=0)] + rest

    async def _walk(self, name: str, depth: int, direction: str, relation: Optional[str],
                    entity_type: Optional[str], min_weight: float, limit: int, max_scan: int) -> list[Entity]:
        _check_bounds(depth=(depth, MAX_DEPTH), limit=(limit, None), max_scan=(max_scan, None))
        if direction not in DIRECTIONS:
            raise InvalidInputError(f"direction must be one of {', '.join(DIRECTIONS)}; got {direction!r}")
        start = await self._resolve(name)
        graph, keyword = self._graph, (relation or "").casefold()
        seen: set[str] = {start}
        frontier, found, scanned = [start], [], 0
        for distance in range(1, depth + 1):
            if not frontier or len(found) >= limit:
                break
            candidates: dict[str, tuple[str, str]] = {}  # neighbour -> (from, neighbour)
            for node, edges in zip(frontier, await graph.get_nodes_edges_batch(frontier)):
                for a, b in edges:
                    other = b if a == node else a
                    if other in seen or other in candidates:
                        continue
                    if scanned >= max_scan:
                        break
                    scanned += 1
                    candidates[other] = (node, other)
            pairs = list(candidates.values())
            datas = await graph.get_edges_batch(pairs)
            kept = [(pair, data) for pair, data in zip(pairs, datas) if data is not None
                    and _weight(data) >= min_weight
                    and (not keyword or keyword in str(data.get("description") or "").casefold())]
            if entity_type:
                nodes = await graph.get_nodes_batch([b for (_, b), _ in kept])
                kept = [k for k, node in zip(kept, nodes)
                        if node and str(node.get("entity_type") or "").strip('"').casefold() == entity_type.casefold()]
            if direction != "both":
                kept = await self._directed(kept, direction)
            best = heapq.nsmallest(limit - len(found), kept, key=lambda k: (-_weight(k[1]), k[0][1]))
            via = {b: await self._relation(a, b, data) for (a, b), data in best}
            found += await self._entities([b for (_, b), _ in best], distance={b: distance for b in via}, via=via)
            seen.update(via)
            frontier = [b for (_, b), _ in best]
        return found

    async def _directed(self, kept: list[tuple[tuple[str, str], dict]], direction: str
                        ) -> list[tuple[tuple[str, str], dict]]:
        """The ``(from, to)`` edges extracted with ``from`` as source (``out``) or target (``in``):
        the graph is undirected, so the direction is read from the recorded extractions."""
        extractions = self._stores().chunk_extractions
        chunk_ids = list(dict.fromkeys(c for _, data in kept for c in split_field(data.get("source_id"))))
        records = dict(zip(chunk_ids, await extractions.get_by_ids(chunk_ids)))
        out = []
        for (a, b), data in kept:
            wanted = (a, b) if direction == "out" else (b, a)
            for chunk_id in split_field(data.get("source_id")):
                relations = (records.get(chunk_id) or {}).get("relations", ())
                if any(_same_name(r.get("source"), wanted[0]) and _same_name(r.get("target"), wanted[1])
                       for r in relations):
                    out.append(((a, b), data))
                    break
        return out

    async def apaths(self, a: str, b: str, max_depth: int = 4, k: int = 3, max_nodes: int = 50_000) -> list[Path]:
        """The ``k`` shortest simple paths from ``a`` to ``b`` of at most ``max_depth`` hops
        (capped at ``MAX_PATH_DEPTH``), shortest first; each hop with its relation's
        description, weight, source chunks and documents. At most ``max_nodes`` entities are
        visited to bound the search."""
        _check_bounds(max_depth=(max_depth, MAX_PATH_DEPTH), k=(k, None), max_nodes=(max_nodes, None))
        start, goal = await self._resolve(a), await self._resolve(b)
        if start == goal or k == 0 or max_depth == 0:
            return []
        adjacency: dict[str, list[str]] = {}

        async def neighbours(nodes: list[str]) -> None:
            missing = [n for n in nodes if n not in adjacency]
            for node, edges in zip(missing, await self._graph.get_nodes_edges_batch(missing)):
                adjacency[node] = sorted({y if x == node else x for x, y in edges})

        # Hops from the goal, breadth-first up to max_depth - 1: prunes the walks from the start.
        to_goal, frontier = {goal: 0}, [goal]
        for hops in range(1, max_depth):
            await neighbours(frontier)
            frontier = [m for n in frontier for m in adjacency[n] if m not in to_goal]
            frontier = list(dict.fromkeys(frontier))
            for m in frontier:
                to_goal[m] = hops
            if len(to_goal) >= max_nodes:
                break
        await neighbours([start])
        found: list[list[str]] = []
        steps = 0  # walks extended, bounded like the nodes visited
        for length in range(1, max_depth + 1):
            stack = [(start, [start])]
            while stack and len(found) < k and steps < max_nodes:
                node, walk = stack.pop()
                steps += 1
                if node == goal:
                    if len(walk) - 1 == length:
                        found.append(walk)
                    continue
                await neighbours([node])
                left = length - (len(walk) - 1) - 1  # hops after the next one
                for nxt in reversed(adjacency[node]):
                    if nxt not in walk and to_goal.get(nxt, max_depth + 1) <= left:
                        stack.append((nxt, walk + [nxt]))
            if len(found) >= k:
                break
        hops = [(x, y) for walk in found for x, y in zip(walk, walk[1:])]
        datas = dict(zip(hops, await self._graph.get_edges_batch(hops)))
        return [Path(hops=tuple([await self._relation(x, y, datas[(x, y)] or {}) for x, y in zip(walk, walk[1:])]))
                for walk in found]

    async def asubgraph(self, names: Sequence[str], depth: int = 1, max_nodes: int = 200,
                        max_scan: int = MAX_SCAN) -> Subgraph:
        """The entities within ``depth`` hops of ``names`` (heaviest edges first, at most
        ``max_nodes``), every relation among them, and the communities they belong to."""
        if isinstance(names, str):
            names = [names]
        _check_bounds(depth=(depth, MAX_DEPTH), max_nodes=(max_nodes, None), max_scan=(max_scan, None))
        seeds = list(dict.fromkeys([await self._resolve(n) for n in names]))[:max_nodes]
        chosen = dict.fromkeys(seeds)
        truncated = len(seeds) < len(set(names))
        per_seed = max(1, (max_nodes - len(chosen)) // max(1, len(seeds)))
        for seed in seeds:
            if len(chosen) >= max_nodes or depth == 0:
                truncated = truncated or len(chosen) >= max_nodes
                break
            # One more than fits: finding it tells the subgraph was cut short.
            around = await self._walk(seed, depth, "both", None, None, 0.0, per_seed + 1, max_scan)
            truncated = truncated or len(around) > per_seed
            for entity in around[:per_seed]:
                if len(chosen) >= max_nodes:
                    truncated = True
                    break
                chosen.setdefault(entity.name)
        members = list(chosen)
        entities = await self._entities(members)
        inside, pairs, scanned = set(members), {}, 0
        for node, edges in zip(members, await self._graph.get_nodes_edges_batch(members)):
            for x, y in edges:
                scanned += 1
                if scanned > max_scan:
                    truncated = True
                    break
                if x in inside and y in inside:
                    pairs.setdefault(edge_key(x, y), None)
        keys = list(pairs)
        relations = [await self._relation(x, y, data)
                     for (x, y), data in zip(keys, await self._graph.get_edges_batch(keys)) if data is not None]
        return Subgraph(entities=tuple(entities), relations=tuple(relations),
                        communities=await self._communities(entities), truncated=truncated)

    async def awhole(self, max_nodes: Optional[int] = None) -> Subgraph:
        """The whole graph (for export), or its ``max_nodes`` best-connected entities and the
        relations among them."""
        graph = self._graph
        nodes = await graph.get_all_nodes()
        truncated = max_nodes is not None and len(nodes) > max_nodes
        if truncated:
            degrees = await graph.node_degrees_batch([n for n, _ in nodes])
            ranked = sorted(zip(nodes, degrees), key=lambda item: (-item[1], item[0][0]))
            nodes = [node for node, _ in ranked[:max_nodes]]
        members = {name for name, _ in nodes}
        entities = await self._entities([name for name, _ in nodes])
        relations = [await self._relation(a, b, data) for a, b, data in await graph.get_all_edges()
                     if a in members and b in members]
        return Subgraph(entities=tuple(entities), relations=tuple(relations),
                        communities=await self._communities(entities), truncated=truncated)

    async def anames_in(self, text: str) -> list[str]:
        """The entities ``text`` names: every run of up to ``MAX_NAME_WORDS`` words resolved as
        a typed name is (:func:`name_key`), longest runs first; Chinese, written without
        spaces, is segmented into words first. Needs no vectors."""
        names = await self._name_index()
        words = split_words(_WORD.findall(text))
        found: dict[str, None] = {}
        for length in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
            for start in range(len(words) - length + 1):
                name = names.resolve(" ".join(words[start : start + length]))
                if name is not None:
                    found.setdefault(name)
        return list(found)

    async def asearch(self, text: str, top_k: int = 10) -> list[Entity]:
        """Entities whose description vectors are nearest ``text``; ``score`` is the similarity."""
        _check_bounds(top_k=(top_k, None))
        vectors = self._stores().entities_vdb
        if vectors is None:
            raise InvalidInputError("entity search needs the entity vector store: build the index with "
                                    "enable_local=True and open it with its embedding_func")
        hits = await vectors.query(text, top_k=top_k)
        score = {}
        for hit in hits:
            if hit.get("entity_name") and hit["entity_name"] not in score:
                score[hit["entity_name"]] = float(hit.get("distance") or 0.0)
        return await self._entities(list(score), score=score, distance={n: 0 for n in score})

    async def agraph_search(self, text: str, top_k: int = 10, depth: int = 1, decay: float = 0.5,
                            limit: int = 50, max_scan: int = MAX_SCAN) -> list[Entity]:
        """Vector hits expanded through the graph: an entity ``d`` hops from a hit scores the
        hit's similarity times ``decay ** d`` times its edge's share of the heaviest edge
        there (best over the hits); best ``limit`` first."""
        seeds = await self.asearch(text, top_k)
        best: dict[str, Entity] = {e.name: e for e in seeds}
        for seed in seeds:
            around = await self._walk(seed.name, depth, "both", None, None, 0.0, limit, max_scan)
            heaviest = max((_weight_of(e.via) for e in around), default=1.0) or 1.0
            for entity in around:
                score = (seed.score or 0.0) * decay ** (entity.distance or 0) * (0.5 + 0.5 * _weight_of(entity.via)
                                                                                  / heaviest)
                if entity.name not in best or score > (best[entity.name].score or 0.0):
                    best[entity.name] = replace(entity, score=score)
        return sorted(best.values(), key=lambda e: (-(e.score or 0.0), e.name))[:limit]

    async def alabels(self, query: str = "", limit: int = 20) -> list[Label]:
        """Entity names for a name picker, each tier best connected first: names that start
        with ``query`` (any case or punctuation), names one of whose words does, names that
        contain it, then names whose start or one of whose words is spelt like it. An empty
        query gives the best connected entities."""
        _check_bounds(limit=(limit, None))
        index = await self._label_index()
        key = name_key(query)
        if not key:
            return [label for label, _, _ in index[:limit]]
        # A scan of every name: off the event loop (the index is never changed once built).
        return await asyncio.to_thread(_matching_labels, key, index, limit)

    async def apopular(self, limit: int = 20) -> list[Label]:
        """The ``limit`` best connected entities (most relations first)."""
        return await self.alabels("", limit)

    # ------------------------------------------------------------------ sync twins

    def entity(self, name: str) -> Entity:
        return run_sync(self.aentity(name))

    def neighbors(self, name: str, **options: Any) -> list[Entity]:
        return run_sync(self.aneighbors(name, **options))

    def traverse(self, start: str, **options: Any) -> list[Entity]:
        return run_sync(self.atraverse(start, **options))

    def paths(self, a: str, b: str, **options: Any) -> list[Path]:
        return run_sync(self.apaths(a, b, **options))

    def subgraph(self, names: Sequence[str], **options: Any) -> Subgraph:
        return run_sync(self.asubgraph(names, **options))

    def whole(self, max_nodes: Optional[int] = None) -> Subgraph:
        return run_sync(self.awhole(max_nodes))

    def labels(self, query: str = "", limit: int = 20) -> list[Label]:
        return run_sync(self.alabels(query, limit))

    def popular(self, limit: int = 20) -> list[Label]:
        return run_sync(self.apopular(limit))

    def names_in(self, text: str) -> list[str]:
        return run_sync(self.anames_in(text))

    def search(self, text: str, top_k: int = 10) -> list[Entity]:
        return run_sync(self.asearch(text, top_k))

    def graph_search(self, text: str, **options: Any) -> list[Entity]:
        return run_sync(self.agraph_search(text, **options))


def _weight(data: dict) -> float:
    try:
        return float(data.get("weight", 0.0) or 0.0)
    except (TypeError, ValueError):
        return 0.0


def _weight_of(relation: Optional[Relation]) -> float:
    return relation.weight if relation is not None else 0.0


def _same_name(extracted: object, node: str) -> bool:
    return isinstance(extracted, str) and name_key(extracted) == name_key(node)


def _matching_labels(key: str, index: list[tuple[Label, str, tuple[str, ...]]], limit: int) -> list[Label]:
    """``KnowledgeGraph.alabels``'s tiers over the label index, best connected first in each."""
    tiers: tuple[list[Label], ...] = ([], [], [])
    rest = []
    for label, name, words in index:
        if name.startswith(key):
            tiers[0].append(label)
        elif any(w.startswith(key) for w in words):
            tiers[1].append(label)
        elif key in name:
            tiers[2].append(label)
        else:
            rest.append((label, name, words))
    found = [label for tier in tiers for label in tier][:limit]
    if len(found) < limit:
        found += _spelt_like(key, rest, limit - len(found))
    return found


def _spelt_like(key: str, candidates: Iterable[tuple[Label, str, tuple[str, ...]]], limit: int) -> list[Label]:
    """The labels whose name's start, or one of whose words, is most alike ``key`` (at least
    ``FUZZY_LABEL_RATIO``), most alike first, then best connected."""
    if len(key) < FUZZY_LABEL_MIN_CHARS:
        return []
    matcher = difflib.SequenceMatcher(b=key, autojunk=False)
    scored = []
    for label, name, words in candidates:
        best = 0.0
        for text in (name[:len(key)], *words):
            if text[:1] != key[:1]:
                continue
            matcher.set_seq1(text)
            if matcher.real_quick_ratio() >= FUZZY_LABEL_RATIO and matcher.quick_ratio() >= FUZZY_LABEL_RATIO:
                best = max(best, matcher.ratio())
        if best >= FUZZY_LABEL_RATIO:
            scored.append((-best, -label.degree, label.name, label))
    return [label for *_, label in heapq.nsmallest(limit, scored)]


def _check_bounds(**values: tuple[int, Optional[int]]) -> None:
    for name, (value, cap) in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
        if cap is not None and value > cap:
            raise InvalidInputError(f"{name} is at most {cap}, got {value}")
