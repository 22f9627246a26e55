"""Incremental clustering that reads the graph only around the nodes a write touched.

The whole-graph update (:func:`graphrag.operators.clustering.community_paths`) handles each
connected component on its own, and a component the write did not touch comes out exactly as
it was stored. So only the touched components need reading, and of a large component updated
in place only the new nodes, their neighbours and the communities they join. This module
reads that much through the graph contract (``get_edges_at``, ``get_nodes_attributes_of``,
``nodes_in_clusters``, ``node_with_highest_cluster``) and gives the same memberships as the
whole-graph update, or None where it cannot prove that (the caller then reads everything):
two large components touched at once, a split community losing members down to its size
before the split (or whose lost members are not known), or a community found to reach beyond
what was read.
"""
from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Collection, Iterable, Optional

from .leiden_paths import CommunityIds, edge_weight, leiden_partitions, membership_path, place_incrementally

if TYPE_CHECKING:
    from graphrag.storage.capabilities import ClusterMemberships

logger = logging.getLogger(__name__)

# A community id in a node's stored memberships text (JSON written by the clustering operator).
_CLUSTER_ID = re.compile(r'"cluster":\s*(\d+)')


class _Unsure(Exception):
    """What was read cannot settle the result alone; the whole graph must be read."""


class _Neighbourhood:
    """The part of the graph read so far: full neighbour maps of expanded nodes, and the stored
    memberships (raw and as paths) of every node seen."""

    def __init__(self, graph: ClusterMemberships) -> None:
        self.graph = graph
        self.adjacency: dict[str, dict[str, dict[str, Any]]] = {}
        self.raw: dict[str, str] = {}  # node -> its stored clusters text ("" if none)
        self.paths: dict[str, list[int]] = {}  # readable memberships only, as the whole-graph read
        self.found: set[str] = set()  # nodes that exist

    async def expand(self, nodes: Iterable[str]) -> None:
        """Read every edge of ``nodes`` and the memberships of their neighbours."""
        todo = sorted(n for n in set(nodes) if n not in self.adjacency)
        if not todo:
            return
        for node in todo:
            self.adjacency[node] = {}
        for a, b, data in await self.graph.get_edges_at(todo, ("weight",)):
            if a in self.adjacency:
                self.adjacency[a][b] = data
            if b in self.adjacency:
                self.adjacency[b][a] = data
        await self.read({n for node in todo for n in self.adjacency[node]} | set(todo))

    async def read(self, nodes: Iterable[str]) -> None:
        todo = sorted(n for n in set(nodes) if n not in self.raw)
        for node in todo:
            self.raw[node] = ""
        for node, data in await self.graph.get_nodes_attributes_of(todo, ("clusters",)):
            self.found.add(node)
            self.add(node, data)

    def add(self, node: str, data: dict) -> None:
        self.raw[node] = data.get("clusters") or ""
        path = membership_path(node, self.raw[node])
        if path:
            self.paths[node] = path

    def linked(self) -> dict[str, set[str]]:
        """Every edge read, from both ends (a node not expanded has the edges read from the other end)."""
        links: dict[str, set[str]] = {}
        for a, neighbours in self.adjacency.items():
            for b in neighbours:
                links.setdefault(a, set()).add(b)
                links.setdefault(b, set()).add(a)
        return links


async def paths_near(graph: ClusterMemberships, touched: set[str], split_parents: dict[int, int], *,
                     max_cluster_size: int, seed: int, exact_below: int,
                     were_in: Optional[Collection[str]] = None) -> Optional[dict[str, str]]:
    """The membership changes (node -> clusters text, "" for none) that the whole-graph
    incremental update would make after a write that touched ``touched``; ``split_parents``
    is updated in place. ``were_in``: the communities the touched nodes were in before the
    write (a deleted node's are known only there), needed when the write deleted nodes while
    some communities are split. None when only the whole graph can tell."""
    try:
        return await _paths_near(graph, touched, split_parents, max_cluster_size, seed, exact_below, were_in)
    except _Unsure as why:
        logger.info("Clustering reads the whole graph: %s", why)
        return None


async def _paths_near(graph: ClusterMemberships, touched: set[str], split_parents: dict[int, int],
                      max_cluster_size: int, seed: int, exact_below: int,
                      were_in: Optional[Collection[str]]) -> dict[str, str]:
    near = _Neighbourhood(graph)
    await near.expand(touched)
    present = touched & near.found
    # A split community that lost members may merge back (``place_incrementally``): those a
    # deleted node was in are among the touched nodes' former communities.
    shrunk: list[int] = []
    if touched - present and split_parents:
        if were_in is None:
            raise _Unsure("nodes were deleted while some communities are split")
        shrunk = sorted(c for c in split_parents if str(c) in were_in)

    # Regions: from each touched node, breadth first, until its component is read whole or
    # it is known to be large (at least ``exact_below`` nodes, some of them clustered).
    region_of: dict[str, int] = {}
    regions: list[set[str]] = []
    large: list[int] = []
    for start in sorted(present):
        if start in region_of:
            continue
        index = len(regions)
        region, frontier, joined = {start}, [start], None
        while frontier and joined is None:
            await near.expand(frontier)
            following = []
            for node in frontier:
                for neighbour in near.adjacency[node]:
                    if neighbour in region_of:
                        joined = region_of[neighbour]  # a large region read from another start
                    elif neighbour not in region:
                        region.add(neighbour)
                        following.append(neighbour)
            frontier = following
            if frontier and len(region) >= exact_below and any(n in near.paths for n in region):
                break
        if joined is not None:
            regions[joined] |= region
            region_of.update(dict.fromkeys(region, joined))
            continue
        regions.append(region)
        region_of.update(dict.fromkeys(region, index))
        if frontier:
            large.append(index)
    if len(large) > 1:
        raise _Unsure("several large components touched")
    if shrunk:
        await _check_not_merging_back(near, shrunk, split_parents, regions[large[0]] if large else None)

    top = await graph.node_with_highest_cluster()
    if top is None:  # the store cannot tell: every membership, by the ids their text names
        named = [(max(map(int, found)), n, d) for n, d in await graph.get_nodes_attributes(("clusters",))
                 if (found := _CLUSTER_ID.findall(d.get("clusters") or ""))]
        top = [max(named, key=lambda t: t[0])[1:]] if named else []
    highest = [max(p) for n, d in top if (p := membership_path(n, d.get("clusters") or ""))]
    if len(highest) < len(top):  # the whole-graph update would skip it, and maybe find a lower id
        raise _Unsure("an unreadable membership")
    ids = CommunityIds(max(highest, default=-1) + 1)

    closed = sorted((sorted(regions[i]) for i in range(len(regions)) if i not in large and len(regions[i]) > 1),
                    key=lambda c: c[0])
    in_place = [c for c in closed if len(c) >= exact_below and any(n in near.paths for n in c)]
    from_scratch = [c for c in closed if c not in in_place]
    if large and in_place:
        raise _Unsure("a large component and another clustered in place")  # their order is unknown
    paths: dict[str, list[int]] = {}

    if large:
        region = regions[large[0]]
        ids.taken.update(c for n in region for c in near.paths.get(n, ()))
        paths.update(await _place_in_large(near, region, ids, split_parents, max_cluster_size, seed))
    for component in in_place:
        old = {n: near.paths[n] for n in component if n in near.paths}
        ids.taken.update(c for p in old.values() for c in p)
        paths.update(place_incrementally(near.adjacency, component, old, ids, max_cluster_size, seed, split_parents))
    # A component clustered afresh must hold its communities alone (one read for all of them).
    held: dict[int, int] = {}  # community id -> index of the component holding it
    for index, component in enumerate(from_scratch):
        held.update(dict.fromkeys((c for n in component for c in near.paths.get(n, ())), index))
    if set(held) & set(split_parents):
        raise _Unsure("a split community in a component clustered afresh")
    if held:
        inside = {n: i for i, component in enumerate(from_scratch) for n in component}
        for node, data in _holding(await graph.nodes_in_clusters(sorted(held)), sorted(held)):
            for c in membership_path(node, data.get("clusters") or "") or ():
                if c in held and inside.get(node) != held[c]:
                    raise _Unsure("a community reaching beyond its component")
    for component in from_scratch:
        old = {n: near.paths[n] for n in component if n in near.paths}
        for membership in leiden_partitions(near.adjacency, max_cluster_size, seed, nodes=component):
            paths.update(ids.match(membership, old))

    # Touched nodes left without edges lose their memberships.
    for node in present:
        if len(regions[region_of[node]]) == 1 and near.paths.get(node):
            if set(near.paths[node]) & set(split_parents):
                raise _Unsure("a split community lost a member")
            paths.setdefault(node, [])
    changes = {}
    for node, path in paths.items():
        text = json.dumps([{"level": level, "cluster": cluster} for level, cluster in enumerate(path)]) if path else ""
        if text != near.raw.get(node, ""):
            changes[node] = text
    return changes


async def _place_in_large(near: _Neighbourhood, region: set[str], ids: CommunityIds, split_parents: dict[int, int],
                          max_cluster_size: int, seed: int) -> dict[str, list[int]]:
    """``place_incrementally`` on a large component of which only ``region`` was read: the
    new nodes are placed and the communities they join checked for size, as there."""
    unplaced = sorted(n for n in region if n not in near.paths)
    await near.expand(unplaced)
    for node in unplaced:
        region.update(near.adjacency[node])
    paths = {n: list(near.paths[n]) for n in region if n in near.paths}
    fresh_from = ids.next_id
    for membership in leiden_partitions(near.adjacency, max_cluster_size, seed, nodes=unplaced):
        paths.update(ids.number(membership))
    for node in unplaced:
        if node in paths:
            continue
        weights: dict[tuple[int, ...], float] = defaultdict(float)
        for neighbour, data in near.adjacency[node].items():
            if neighbour in paths:
                weights[tuple(paths[neighbour])] += edge_weight(data)
        paths[node] = list(min(weights.items(), key=lambda kv: (-kv[1], kv[0]))[0])

    # Only a community a new node joined may need splitting, and only at its full path (at any
    # shorter prefix the new node itself is a child). Nothing left, so nothing merges back.
    prefixes = sorted({tuple(paths[n]) for n in unplaced}, key=lambda p: (len(p), p))
    joined = sorted({p[-1] for p in prefixes if p[-1] < fresh_from})
    if joined:
        found = _holding(await near.graph.nodes_in_clusters(joined), joined)
        for node, data in found:
            if node not in near.raw:
                near.found.add(node)
                near.add(node, data)
        members = [n for n, _ in found if set(near.paths.get(n, ())) & set(joined)]
        await near.expand(members)
        _check_inside(near, region, members)
        for node in members:
            paths.setdefault(node, list(near.paths[node]))
    changed: dict[str, list[int]] = {n: paths[n] for n in unplaced}
    for prefix in prefixes:
        group = sorted(n for n, p in paths.items() if tuple(p[: len(prefix)]) == prefix)
        if any(len(paths[n]) > len(prefix) for n in group) or len(group) <= max_cluster_size:
            continue
        before = [n for n in group if n in near.paths and tuple(near.paths[n][: len(prefix)]) == prefix]
        for membership in leiden_partitions(near.adjacency, max_cluster_size, seed, nodes=group):
            if len({p[0] for p in membership.values()}) > 1:
                for node, tail in ids.number(membership).items():
                    paths[node].extend(tail)
                    changed[node] = paths[node]
                split_parents[prefix[-1]] = max(len(before), max_cluster_size)
    return changed


async def _check_not_merging_back(near: _Neighbourhood, shrunk: list[int], split_parents: dict[int, int],
                                  large: Optional[set[str]]) -> None:
    """Each split community of ``shrunk`` (which may have lost members to a deletion) must keep
    more members than its size before the split, all in the large component ``large`` when
    one was touched: there the whole-graph update sees them together, they only gain new
    nodes, so it merges none back, and ``_place_in_large`` (which merges nothing back) agrees.
    A component read whole is updated by ``place_incrementally`` itself, merging back as the
    whole-graph update does; the count also keeps a community without members from staying
    listed as split (the whole-graph update drops it)."""
    found = _holding(await near.graph.nodes_in_clusters(shrunk), shrunk)
    for node, data in found:
        if node not in near.raw:
            near.found.add(node)
            near.add(node, data)
    members: dict[int, list[str]] = {c: [] for c in shrunk}
    for node, _ in found:
        for c in near.paths.get(node, ()):
            if c in members:
                members[c].append(node)
    for c, nodes in members.items():
        if len(nodes) <= split_parents[c]:
            raise _Unsure("a split community lost members down to its size before the split")
    if large is not None:
        inside = sorted({n for nodes in members.values() for n in nodes})
        await near.expand(inside)
        _check_inside(near, large, inside)


def _holding(found: list[tuple[str, dict]], ids: list[int]) -> list[tuple[str, dict]]:
    """The nodes of ``found`` whose memberships text names one of ``ids`` (a store may return
    more; this spares parsing those)."""
    wanted = {str(i) for i in ids}
    return [(n, d) for n, d in found if wanted.intersection(_CLUSTER_ID.findall(d.get("clusters") or ""))]


def _check_inside(near: _Neighbourhood, region: set[str], nodes: list[str]) -> None:
    """Every one of ``nodes`` must be linked to ``region`` by edges read (so be in its
    component): after a split of a component, a community may reach into another one, and
    there the whole-graph update sees only its part in this one."""
    links = near.linked()
    reached, frontier = set(region), list(region)
    while frontier:
        for neighbour in links.get(frontier.pop(), ()):
            if neighbour not in reached:
                reached.add(neighbour)
                frontier.append(neighbour)
    if not set(nodes) <= reached:
        raise _Unsure("a community reaching beyond what was read")
