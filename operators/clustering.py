"""Community detection over any graph store: incremental hierarchical Leiden and the community schema.

Works through the graph contract only (``get_nodes_attributes``, ``get_edges_attributes``, ``get_adjacency``,
``update_node_clusters``, graph attributes), so every backend gets the same communities.
A node's memberships live in its ``clusters`` attribute, as nano-graphrag keeps them:
JSON ``[{"level": 0, "cluster": 7}, {"level": 1, "cluster": 12}, ...]``.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Collection, Iterable, Iterator, Mapping, Optional

from graphrag.schema import GRAPH_FIELD_SEP, CommunitySchema, edge_key

if TYPE_CHECKING:
    from graphrag.storage.base import BaseGraphStorage

logger = logging.getLogger(__name__)

# node -> {neighbour: edge attributes}, each edge seen from both ends (BaseGraphStorage.get_adjacency).
Adjacency = Mapping[str, Mapping[str, dict[str, Any]]]

# Graph attribute: communities the incremental update split, and their size before (see _place_incrementally).
SPLIT_ATTRIBUTE = "split_communities"
# Graph attribute: the settings the stored memberships were made with. Reading only around the
# touched nodes keeps every other component as stored, which is right only under the same settings.
SETTINGS_ATTRIBUTE = "clustering_settings"

# A write touching more nodes than this (a large insert) is clustered over the whole graph
# directly: reading around that many nodes costs more than one pass over everything.
NEAR_AT_MOST = 1000


def _weight(data: dict[str, Any]) -> float:
    return float(data.get("weight", 1.0) or 1.0)


def leiden_partitions(adjacency: Adjacency, max_cluster_size: int, seed: int,
                      nodes: Optional[Iterable[str]] = None) -> list[dict[str, list[int]]]:
    """Hierarchical Leiden run on each connected component (of the subgraph ``nodes``
    induces; default the whole graph) on its own.

    Each component's result depends only on that component, so a change in one part
    of the graph leaves the communities of the others exactly as they were, and every
    component (not only the largest) gets communities. Returns, per component, a map
    node -> [local cluster at level 0, level 1, ...].
    """
    from graspologic_native import hierarchical_leiden

    keep = set(adjacency) if nodes is None else set(nodes)
    results = []
    for component in sorted((sorted(c) for c in _components(adjacency, keep)), key=lambda c: c[0]):
        if len(component) < 2:
            continue  # an isolated node has no relation to summarise
        if len(component) == 2:
            results.append({n: [0] for n in component})
            continue
        edges = sorted((a, b, _weight(d)) for a in component for b, d in adjacency[a].items() if a <= b and b in keep)
        membership: dict[str, list[int]] = defaultdict(list)
        for entry in sorted(hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed),
                            key=lambda e: (e.node, e.level)):
            membership[entry.node].append(entry.cluster)
        results.append(dict(membership))
    return results


def _components(adjacency: Adjacency, keep: set[str]) -> Iterator[list[str]]:
    """Connected components of the subgraph ``keep`` induces."""
    seen: set[str] = set()
    for start in keep:
        if start in seen:
            continue
        seen.add(start)
        group, frontier = [start], [start]
        while frontier:
            for neighbour in adjacency.get(frontier.pop(), ()):
                if neighbour in keep and neighbour not in seen:
                    seen.add(neighbour)
                    group.append(neighbour)
                    frontier.append(neighbour)
        yield group


class _CommunityIds:
    """Hands out community ids: old ones where a community is recognisably the same, else fresh."""

    def __init__(self, next_id: int) -> None:
        self.next_id = next_id  # above every id in use
        self.taken: set[int] = set()

    def fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def number(self, membership: dict[str, list[int]]) -> dict[str, list[int]]:
        """Global fresh ids for the local clusters of one ``leiden_partitions`` entry."""
        ids: dict[tuple[int, int], int] = {}
        for node in sorted(membership):
            for level, local in enumerate(membership[node]):
                if (level, local) not in ids:
                    ids[(level, local)] = self.fresh()
        return {n: [ids[(level, local)] for level, local in enumerate(p)] for n, p in membership.items()}

    def match(self, membership: dict[str, list[int]], old_paths: dict[str, list[int]]) -> dict[str, list[int]]:
        """Give each new community the free old id at its level it overlaps most (Jaccard >= 0.5)."""
        new_groups: dict[tuple[int, int], set[str]] = defaultdict(set)
        for node, path in membership.items():
            for level, local in enumerate(path):
                new_groups[(level, local)].add(node)
        old_groups: dict[tuple[int, int], set[str]] = defaultdict(set)
        for node, path in old_paths.items():
            for level, cluster in enumerate(path):
                old_groups[(level, cluster)].add(node)
        candidates = []
        for (level, local), members in new_groups.items():
            for cid in {old_paths[n][level] for n in members if len(old_paths.get(n, ())) > level}:
                old = old_groups[(level, cid)]
                jaccard = len(members & old) / len(members | old)
                if jaccard >= 0.5:
                    candidates.append((-jaccard, cid, level, local))
        ids: dict[tuple[int, int], int] = {}
        for _, cid, level, local in sorted(candidates):
            if (level, local) not in ids and cid not in self.taken:
                ids[(level, local)] = cid
                self.taken.add(cid)
        for key in sorted(new_groups, key=lambda k: (k[0], min(new_groups[k]))):
            if key not in ids:
                ids[key] = self.fresh()
        return {n: [ids[(level, local)] for level, local in enumerate(p)] for n, p in membership.items()}


def _place_incrementally(adjacency: Adjacency, component: list[str], old_paths: dict[str, list[int]],
                         ids: _CommunityIds, max_cluster_size: int, seed: int,
                         split_parents: dict[int, int]) -> dict[str, list[int]]:
    """Keep old paths; give new nodes communities without disturbing the old ones.

    ``split_parents`` maps each community this function split (because it outgrew
    ``max_cluster_size``) to its size before it grew; it is updated in place so the
    split is undone once the community is back to that size.
    """
    paths = {n: list(p) for n, p in old_paths.items()}
    unplaced = sorted(n for n in component if n not in paths)
    for membership in leiden_partitions(adjacency, max_cluster_size, seed, nodes=unplaced):
        paths.update(ids.number(membership))
    for node in unplaced:
        if node in paths:
            continue
        weights: dict[tuple[int, ...], float] = defaultdict(float)
        for neighbour, data in adjacency[node].items():
            if neighbour in paths:
                weights[tuple(paths[neighbour])] += _weight(data)
        paths[node] = list(min(weights.items(), key=lambda kv: (-kv[1], kv[0]))[0])

    def groups(source: dict[str, list[int]]) -> dict[tuple[int, ...], set[str]]:
        out: dict[tuple[int, ...], set[str]] = defaultdict(set)
        for node, path in source.items():
            for depth in range(1, len(path) + 1):
                out[tuple(path[:depth])].add(node)
        return out

    before = groups(old_paths)
    members = groups(paths)
    for prefix in sorted(members, key=lambda p: (len(p), p)):
        group = members[prefix]
        has_children = any(len(paths[n]) > len(prefix) for n in group)
        if has_children and len(group) <= split_parents.get(prefix[-1], -1):
            for node in group:
                del paths[node][len(prefix):]
            del split_parents[prefix[-1]]
        elif not has_children and len(group) > max_cluster_size and group != before.get(prefix):
            for membership in leiden_partitions(adjacency, max_cluster_size, seed, nodes=group):
                if len({p[0] for p in membership.values()}) > 1:
                    for node, tail in ids.number(membership).items():
                        paths[node].extend(tail)
                    split_parents[prefix[-1]] = max(len(before.get(prefix, ())), max_cluster_size)
    return paths


def community_paths(adjacency: Adjacency, old_paths: dict[str, list[int]], max_cluster_size: int, seed: int,
                    exact_below: Optional[int], split_parents: dict[int, int]) -> dict[str, list[int]]:
    """Community id per level for every node that has an edge.

    Leiden is global: after two nodes join a 5,000-node component, a fresh run
    reshuffles about 40% of that component's communities, each needing a new report.
    So components of at least ``exact_below`` nodes that already had communities are
    updated in place: their nodes keep their communities, new nodes that form groups
    among themselves get communities of their own (Leiden on those nodes), a lone new
    node joins the community it is most strongly linked to, and a community that
    outgrows ``max_cluster_size`` is split, and merged back once it fits again (the ids
    of such splits are kept in ``split_parents``). Removing what an insert added
    therefore gives back the communities from before it. Smaller components, and all of
    them when ``exact_below`` is None, are clustered from scratch, so their communities
    depend only on the graph; ids are kept where membership overlaps.
    """
    ids = _CommunityIds(max((c for p in old_paths.values() for c in p), default=-1) + 1)
    components = sorted((sorted(c) for c in _components(adjacency, set(adjacency)) if len(c) > 1),
                        key=lambda c: c[0])
    in_place, from_scratch = [], []
    for component in components:
        old = {n: old_paths[n] for n in component if old_paths.get(n)}
        if exact_below is not None and len(component) >= exact_below and old:
            in_place.append((component, old))
            ids.taken.update(c for p in old.values() for c in p)
        else:
            from_scratch.append((component, old))
    paths: dict[str, list[int]] = {}
    for component, old in in_place:
        paths.update(_place_incrementally(adjacency, component, old, ids, max_cluster_size, seed, split_parents))
    for component, old in from_scratch:
        for membership in leiden_partitions(adjacency, max_cluster_size, seed, nodes=component):
            paths.update(ids.match(membership, old))
    return paths


def membership_path(node: str, raw: str) -> Optional[list[int]]:
    """A node's stored ``clusters`` text as its community id per level (None if it has none,
    or an unreadable one)."""
    clusters = _memberships([(node, {"clusters": raw})]).get(node)
    return [c["cluster"] for c in sorted(clusters, key=lambda c: c["level"])] if clusters else None


def _memberships(nodes: list[tuple[str, dict]]) -> dict[str, list[dict[str, int]]]:
    out = {}
    for node, data in nodes:
        raw = data.get("clusters")
        if raw:
            try:
                out[node] = json.loads(raw)
            except ValueError:
                logger.warning("Ignoring unreadable cluster membership of node %r", node)
    return out


async def cluster_graph(graph: BaseGraphStorage, algorithm: str = "leiden", full: bool = False,
                        touched: Optional[Collection[str]] = None) -> Optional[set[str]]:
    """Assign every node that has an edge to a community at each level. Returns the communities
    a node joined or left when only the graph around ``touched`` was read, else None.

    Large components are updated in place (see :func:`community_paths`), so one
    document changes only the communities it touches; ``full=True`` re-runs Leiden
    over every component from scratch, keeping ids where membership overlaps.
    ``touched``: the nodes a write changed (with the edges at them), when only those did;
    then only the graph around them is read (``operators/clustering_nearby.py``), for the
    same memberships.
    """
    if algorithm != "leiden":
        raise ValueError(f"unknown graph clustering algorithm {algorithm!r}; only 'leiden' is available")
    config = graph.global_config
    split_parents = {int(k): v for k, v in json.loads(await graph.get_graph_attribute(SPLIT_ATTRIBUTE) or "{}").items()}
    settings = json.dumps([config.max_graph_cluster_size, config.graph_cluster_seed, config.exact_clustering_below])
    same_settings = await graph.get_graph_attribute(SETTINGS_ATTRIBUTE) == settings
    if touched is not None and not full and len(touched) <= NEAR_AT_MOST and same_settings:
        from .clustering_nearby import paths_near

        splits = dict(split_parents)
        changes = await paths_near(graph, set(touched), splits, max_cluster_size=config.max_graph_cluster_size,
                                   seed=config.graph_cluster_seed, exact_below=config.exact_clustering_below)
        if changes is not None:
            # Every community named here still has members: only a deletion could take one
            # away, and paths_near leaves those with split communities to the whole graph.
            await graph.set_graph_attribute(SPLIT_ATTRIBUTE, json.dumps(
                {str(k): v for k, v in sorted(splits.items())}))
            moved = await communities_of(graph, changes)
            moved.update(str(c) for raw in changes.values() for c in membership_path("", raw) or ())
            await graph.update_node_clusters(changes)
            logger.info("Clustered around %d touched nodes: %d memberships changed", len(touched), len(changes))
            return moved
    stored = await graph.get_nodes_attributes(("clusters",))
    old_paths = {
        node: [c["cluster"] for c in sorted(clusters, key=lambda c: c["level"])]
        for node, clusters in _memberships(stored).items()
    }
    adjacency = await graph.get_adjacency()

    def run() -> dict[str, list[int]]:
        return community_paths(adjacency, old_paths, config.max_graph_cluster_size,
                               config.graph_cluster_seed, exact_below=None if full else config.exact_clustering_below,
                               split_parents=split_parents)

    # In a worker thread, so that LLM calls in flight (description summaries) are served
    # meanwhile. They only replace attribute values of existing nodes and edges, which
    # neither resizes the adjacency (it may be the store's live one) nor changes weights.
    paths = await asyncio.to_thread(run)
    present = {c for p in paths.values() for c in p}
    await graph.set_graph_attribute(SPLIT_ATTRIBUTE, json.dumps(
        {str(k): v for k, v in sorted(split_parents.items()) if k in present}))
    if not same_settings:
        await graph.set_graph_attribute(SETTINGS_ATTRIBUTE, settings)
    clusters = {node: json.dumps([{"level": level, "cluster": cluster} for level, cluster in enumerate(path)])
                for node, path in paths.items()}
    # Most memberships come out as they were: a database rewrites only the others.
    await graph.update_node_clusters({node: clusters.get(node, "") for node, data in stored
                                      if (data.get("clusters") or "") != clusters.get(node, "")})
    logger.info("Clustered %d nodes into %d communities (%s)", len(paths), len(present),
                "full" if full else "incremental")
    return None


def community_ids(nodes: Iterable[tuple[str, dict]]) -> set[str]:
    """The communities these ``(name, data)`` nodes are in, by their ``clusters`` attribute."""
    return {str(c["cluster"]) for clusters in _memberships(list(nodes)).values() for c in clusters}


async def communities_of(graph: BaseGraphStorage, nodes: Collection[str]) -> set[str]:
    """The communities these nodes are in, as stored."""
    return community_ids(await graph.get_nodes_attributes_of(sorted(nodes), ("clusters",)))


async def cluster_after_write(graph: BaseGraphStorage, touched: Collection[str], were_in: set[str],
                              algorithm: str = "leiden") -> tuple[dict[str, CommunitySchema], Optional[set[str]]]:
    """Cluster after a write that changed only the nodes ``touched`` (which were in the
    communities ``were_in`` before it), and return the schema of the communities that may have
    changed with which those are; (every community's schema, None) when that is not known.

    A community none of whose members was touched or moved has the same nodes, edges and
    chunks as before, so only the others are read: a small write into a large index reads
    a part of it proportional to what it changed.
    """
    moved = await graph.update_clustering(touched, algorithm)
    if moved is None or not _default(graph, "community_schema"):
        return await graph.community_schema(), None
    changed = moved | were_in | await communities_of(graph, touched)
    return await graph.community_schema(only=changed), changed


def _default(graph: BaseGraphStorage, method: str) -> bool:
    """Whether ``graph`` uses the contract's own ``method`` (a nano-graphrag storage class may
    bring its own clustering and schema)."""
    from graphrag.storage.base import BaseGraphStorage

    return getattr(getattr(graph, method), "__func__", None) is getattr(BaseGraphStorage, method)


async def community_schema(graph: BaseGraphStorage, only: Optional[Collection[str]] = None
                           ) -> dict[str, CommunitySchema]:
    """Each community's level, nodes, internal edges, source chunks and sub-communities; with
    ``only``, just those communities, reading only their members and the edges at them (a
    community with no members left is not there). Occurrence is relative to the largest
    community read (see ``operators/community_index.py``)."""
    results: dict[str, dict[str, Any]] = {}
    if only is None:
        nodes = await graph.get_nodes_attributes(("clusters", "source_id"))
    else:
        wanted = sorted({int(c) for c in only})
        members = [node for node, data in await graph.nodes_in_clusters(wanted)
                   if not set(map(str, membership_path(node, data.get("clusters") or "") or ())).isdisjoint(only)]
        nodes = await graph.get_nodes_attributes_of(members, ("clusters", "source_id"))
    memberships = _memberships(nodes)
    for node, data in nodes:
        clusters = memberships.get(node)
        if not clusters:
            continue
        chunk_ids = [c for c in str(data.get("source_id", "")).split(GRAPH_FIELD_SEP) if c]
        ordered = sorted(clusters, key=lambda c: c["level"])
        for depth, c in enumerate(ordered):
            key = str(c["cluster"])
            if only is not None and key not in only:
                continue
            entry = results.setdefault(
                key,
                {"level": c["level"], "title": f"Cluster {key}", "nodes": set(), "edges": set(),
                 "chunk_ids": set(), "sub_communities": set()},
            )
            entry["nodes"].add(node)
            entry["chunk_ids"].update(chunk_ids)
            if depth + 1 < len(ordered):
                entry["sub_communities"].add(str(ordered[depth + 1]["cluster"]))
    # One pass over the edges: an edge is internal to each community both ends share.
    paths = {node: [str(c["cluster"]) for c in sorted(clusters, key=lambda c: c["level"])]
             for node, clusters in memberships.items()}
    edges = (await graph.get_edges_attributes(()) if only is None
             else await graph.get_edges_at([node for node, _ in nodes], ()))
    for a, b, _ in edges:
        path_a, path_b = paths.get(a), paths.get(b)
        if path_a and path_b:
            pair = edge_key(a, b)
            for community_a, community_b in zip(path_a, path_b):
                if community_a == community_b and community_a in results:
                    results[community_a]["edges"].add(pair)
    max_chunks = max((len(e["chunk_ids"]) for e in results.values()), default=1) or 1
    return {
        key: CommunitySchema(
            level=e["level"],
            title=e["title"],
            nodes=sorted(e["nodes"]),
            edges=[list(edge) for edge in sorted(e["edges"])],
            chunk_ids=sorted(e["chunk_ids"]),
            occurrence=len(e["chunk_ids"]) / max_chunks,
            sub_communities=sorted(e["sub_communities"], key=int),
        )
        for key, e in results.items()
    }
