"""Community paths from an adjacency: hierarchical Leiden per connected component, and the
incremental placement that keeps old communities (what :mod:`.clustering` runs over the whole
graph and :mod:`.clustering_nearby` over the part around a write). Pure functions over plain
maps: no store.
"""
from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any, Iterable, Iterator, Mapping, Optional

logger = logging.getLogger(__name__)

# node -> {neighbour: edge attributes}, each edge seen from both ends (the graph contract's get_adjacency).
Adjacency = Mapping[str, Mapping[str, dict[str, Any]]]


def edge_weight(data: dict[str, Any]) -> float:
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
    for component in sorted((sorted(c) for c in connected_components(adjacency, keep)), key=lambda c: c[0]):
        if len(component) < 2:
            continue  # an isolated node has no relation to summarise
        if len(component) == 2:
            results.append({n: [0] for n in component})
            continue
        edges = sorted((a, b, edge_weight(d)) for a in component for b, d in adjacency[a].items() if a <= b and b in keep)
        membership: dict[str, list[int]] = defaultdict(list)
        for entry in sorted(hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed),
                            key=lambda e: (e.node, e.level)):
            membership[entry.node].append(entry.cluster)
        results.append(dict(membership))
    return results


def connected_components(adjacency: Adjacency, keep: set[str]) -> Iterator[list[str]]:
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


class CommunityIds:
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


def place_incrementally(adjacency: Adjacency, component: list[str], old_paths: dict[str, list[int]],
                         ids: CommunityIds, max_cluster_size: int, seed: int,
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
                weights[tuple(paths[neighbour])] += edge_weight(data)
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
    ids = CommunityIds(max((c for p in old_paths.values() for c in p), default=-1) + 1)
    components = sorted((sorted(c) for c in connected_components(adjacency, set(adjacency)) if len(c) > 1),
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
        paths.update(place_incrementally(adjacency, component, old, ids, max_cluster_size, seed, split_parents))
    for component, old in from_scratch:
        for membership in leiden_partitions(adjacency, max_cluster_size, seed, nodes=component):
            paths.update(ids.match(membership, old))
    return paths


def membership_path(node: str, raw: str) -> Optional[list[int]]:
    """A node's stored ``clusters`` text as its community id per level (None if it has none,
    or an unreadable one)."""
    clusters = read_memberships([(node, {"clusters": raw})]).get(node)
    return [c["cluster"] for c in sorted(clusters, key=lambda c: c["level"])] if clusters else None


# Parsed ``clusters`` texts by text: the members of one community mostly store the same text,
# and a small write reads the memberships of every member of the communities it changed.
# Bounded by a count, cleared whole past it.
_PARSED: dict[str, list[dict[str, int]]] = {}
_PARSED_MAX = 1 << 16


def read_memberships(nodes: list[tuple[str, dict]]) -> dict[str, list[dict[str, int]]]:
    """Each node's stored ``clusters`` JSON, parsed (an unreadable one is logged and left out).
    Nodes storing the same text share one parsed list: callers only read it."""
    if len(_PARSED) > _PARSED_MAX:
        _PARSED.clear()
    out = {}
    for node, data in nodes:
        raw = data.get("clusters")
        if raw:
            parsed = _PARSED.get(raw)
            if parsed is None:
                try:
                    parsed = _PARSED[raw] = json.loads(raw)
                except ValueError:
                    logger.warning("Ignoring unreadable cluster membership of node %r", node)
                    continue
            out[node] = parsed
    return out
