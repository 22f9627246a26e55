"""Entity graph kept in ``graph_{namespace}.graphml``, clustered with hierarchical Leiden."""
from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable, Iterator, Optional, Union
from xml.etree.ElementTree import ParseError

import networkx as nx

from graphrag.schema import GRAPH_FIELD_SEP, CommunitySchema

from .base import BaseGraphStorage
from .files import SingleFileStore, StorageFileError, atomic_write_bytes, atomic_write_via
from .graph_lookup import GraphLookup, build_lookup_index
from .graphml import GraphMLLayout, read_graphml, safe_attrs, write_graphml, xml_safe
from .lookup_index import ParsedOnDemand

logger = logging.getLogger(__name__)

def leiden_partitions(graph: nx.Graph, max_cluster_size: int, seed: int,
                      nodes: Optional[Iterable[str]] = None) -> list[dict[str, list[int]]]:
    """Hierarchical Leiden run on each connected component (of the subgraph ``nodes``
    induces; default the whole graph) on its own.

    Each component's result depends only on that component, so a change in one part
    of the graph leaves the communities of the others exactly as they were, and every
    component (not only the largest) gets communities. Returns, per component, a map
    node -> [local cluster at level 0, level 1, ...].
    """
    from graspologic_native import hierarchical_leiden

    adjacency = graph.adj  # read directly: networkx subgraph views filter every step
    keep = set(graph) if nodes is None else set(nodes)
    results = []
    for component in sorted((sorted(c) for c in _components(adjacency, keep)), key=lambda c: c[0]):
        if len(component) < 2:
            continue  # an isolated node has no relation to summarise
        if len(component) == 2:
            results.append({n: [0] for n in component})
            continue
        edges = sorted((a, b, float(d.get("weight", 1.0) or 1.0))
                       for a in component for b, d in adjacency[a].items() if a <= b and b in keep)
        membership: dict[str, list[int]] = defaultdict(list)
        for entry in sorted(hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed),
                            key=lambda e: (e.node, e.level)):
            membership[entry.node].append(entry.cluster)
        results.append(dict(membership))
    return results


def _components(adjacency: Any, keep: set[str]) -> Iterator[list[str]]:
    """Connected components of the subgraph ``keep`` induces."""
    seen: set[str] = set()
    for start in keep:
        if start in seen:
            continue
        seen.add(start)
        group, frontier = [start], [start]
        while frontier:
            for neighbour in adjacency[frontier.pop()]:
                if neighbour in keep and neighbour not in seen:
                    seen.add(neighbour)
                    group.append(neighbour)
                    frontier.append(neighbour)
        yield group


class _CommunityIds:
    """Hands out community ids: old ones where a community is recognisably the same, else fresh."""

    def __init__(self, old_paths: dict[str, list[int]]) -> None:
        self.next_id = max((c for p in old_paths.values() for c in p), default=-1) + 1
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


def _place_incrementally(component: nx.Graph, old_paths: dict[str, list[int]], ids: _CommunityIds,
                         max_cluster_size: int, seed: int, split_parents: dict[int, int]) -> dict[str, list[int]]:
    """Keep old paths; give new nodes communities without disturbing the old ones.

    ``split_parents`` maps each community this function split (because it outgrew
    ``max_cluster_size``) to its size before it grew; it is updated in place so the
    split is undone once the community is back to that size.
    """
    paths = {n: list(p) for n, p in old_paths.items()}
    unplaced = sorted(n for n in component if n not in paths)
    for membership in leiden_partitions(component, max_cluster_size, seed, nodes=unplaced):
        paths.update(ids.number(membership))
    for node in unplaced:
        if node in paths:
            continue
        weights: dict[tuple[int, ...], float] = defaultdict(float)
        for neighbour, data in component[node].items():
            if neighbour in paths:
                weights[tuple(paths[neighbour])] += float(data.get("weight", 1.0) or 1.0)
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
            for membership in leiden_partitions(component, max_cluster_size, seed, nodes=group):
                if len({p[0] for p in membership.values()}) > 1:
                    for node, tail in ids.number(membership).items():
                        paths[node].extend(tail)
                    split_parents[prefix[-1]] = max(len(before.get(prefix, ())), max_cluster_size)
    return paths


def community_paths(graph: nx.Graph, old_paths: dict[str, list[int]], max_cluster_size: int, seed: int,
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
    ids = _CommunityIds(old_paths)
    components = sorted((sorted(c) for c in nx.connected_components(graph) if len(c) > 1), key=lambda c: c[0])
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
        paths.update(_place_incrementally(graph.subgraph(component), old, ids, max_cluster_size, seed,
                                          split_parents))
    for component, old in from_scratch:
        for membership in leiden_partitions(graph, max_cluster_size, seed, nodes=component):
            paths.update(ids.match(membership, old))
    return paths


@dataclass
class NetworkXStorage(ParsedOnDemand, SingleFileStore, BaseGraphStorage):
    """The graph, parsed whole only when something needs all of it (an insert, clustering,
    ``.graph``). Until then, the point reads a query makes go through a lookup index
    written beside the GraphML (see ``graph_lookup``), or parse the whole file where
    there is none."""

    _parsed: Optional[nx.Graph] = field(default=None, init=False, repr=False)
    _lookup: Optional[GraphLookup] = field(default=None, init=False, repr=False)
    _dirty: bool = field(default=False, init=False, repr=False)
    _loaded_signature: Optional[tuple[int, ...]] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._file_name = self.path_for(f"graph_{self.namespace}.graphml")
        self._index_name = self.path_for(f"graph_{self.namespace}.graphml.index")
        self._load()

    def _parse(self, source: Union[str, BinaryIO]) -> nx.Graph:
        try:
            return read_graphml(source)
        except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError) as exc:
            raise StorageFileError(
                f"graph file {self._file_name!r} is corrupt ({exc}). It was left untouched: restore it or delete it."
            ) from exc

    def _load(self) -> None:
        self._dirty = False
        self._lookup = None
        try:
            f = open(self._file_name, "rb")
        except FileNotFoundError:
            self._loaded_signature, self._parsed = None, nx.Graph()
            return
        with f:
            st = os.fstat(f.fileno())
            self._loaded_signature = (st.st_mtime_ns, st.st_size, st.st_ino)
            self._lookup = GraphLookup.open(f, self._index_name)
            self._parsed = None if self._lookup is not None else self._parse(f)
        logger.debug("Opened graph %s: %s", self.namespace,
                     f"{len(self._lookup)} nodes, indexed" if self._lookup is not None else
                     f"{self._graph.number_of_nodes()} nodes, {self._graph.number_of_edges()} edges")

    def _parse_mapped(self, lookup: GraphLookup) -> nx.Graph:
        lookup.graphml.seek(0)
        return self._parse(lookup.graphml)  # type: ignore[arg-type]

    @property
    def _graph(self) -> nx.Graph:
        return self._whole()

    def _write_files(self) -> None:
        graph = self._graph
        layouts: list[GraphMLLayout] = []
        atomic_write_via(self._file_name, lambda tmp: layouts.append(write_graphml(graph, tmp)))
        # Inside the commit's transaction both files appear together; outside one, a
        # reader between the two renames sees an index that does not match and ignores it.
        atomic_write_bytes(self._index_name, build_lookup_index(layouts[0]))
        self._remember_committed_file()

    @property
    def graph(self) -> nx.Graph:
        """The live graph, for read-only analysis (notebooks, stats)."""
        return self._graph

    async def has_node(self, node_id: str) -> bool:
        node_id, lookup = xml_safe(node_id), self._points()
        return lookup.has_node(node_id) if lookup is not None else self._graph.has_node(node_id)

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        a, b = xml_safe(source_node_id), xml_safe(target_node_id)
        lookup = self._points()
        return lookup.has_edge(a, b) if lookup is not None else self._graph.has_edge(a, b)

    async def node_degree(self, node_id: str) -> int:
        node_id = xml_safe(node_id)
        lookup = self._points()
        if lookup is not None:
            return lookup.degree(node_id)
        return self._graph.degree(node_id) if self._graph.has_node(node_id) else 0

    async def edge_degree(self, src_id: str, tgt_id: str) -> int:
        return await self.node_degree(src_id) + await self.node_degree(tgt_id)

    async def get_node(self, node_id: str) -> Union[dict, None]:
        node_id, lookup = xml_safe(node_id), self._points()
        return lookup.node(node_id) if lookup is not None else self._graph.nodes.get(node_id)

    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        a, b = xml_safe(source_node_id), xml_safe(target_node_id)
        lookup = self._points()
        return lookup.edge(a, b) if lookup is not None else self._graph.edges.get((a, b))

    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        source_node_id = xml_safe(source_node_id)
        lookup = self._points()
        if lookup is not None:
            return lookup.node_edges(source_node_id)
        if not self._graph.has_node(source_node_id):
            return None
        return list(self._graph.edges(source_node_id))

    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        self._graph.add_node(xml_safe(node_id), **safe_attrs(node_data))
        self._dirty = True

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        self._graph.add_edge(xml_safe(source_node_id), xml_safe(target_node_id), **safe_attrs(edge_data))
        self._dirty = True

    async def delete_node(self, node_id: str) -> None:
        node_id = xml_safe(node_id)
        if self._graph.has_node(node_id):
            self._graph.remove_node(node_id)
            self._dirty = True

    async def delete_edge(self, source_node_id: str, target_node_id: str) -> None:
        a, b = xml_safe(source_node_id), xml_safe(target_node_id)
        if self._graph.has_edge(a, b):
            self._graph.remove_edge(a, b)
            self._dirty = True

    def _memberships(self) -> dict[str, list[dict[str, int]]]:
        out = {}
        for node, data in self._graph.nodes(data=True):
            raw = data.get("clusters")
            if raw:
                try:
                    out[node] = json.loads(raw)
                except ValueError:
                    logger.warning("Ignoring unreadable cluster membership of node %r", node)
        return out

    async def clustering(self, algorithm: str = "leiden", full: bool = False) -> None:
        """Assign every node that has an edge to a community at each level.

        Large components are updated in place (see :func:`community_paths`), so one
        document changes only the communities it touches; ``full=True`` re-runs Leiden
        over every component from scratch, keeping ids where membership overlaps.
        """
        if algorithm != "leiden":
            raise ValueError(f"unknown graph clustering algorithm {algorithm!r}; only 'leiden' is available")
        config = self.global_config
        old_paths = {
            node: [c["cluster"] for c in sorted(clusters, key=lambda c: c["level"])]
            for node, clusters in self._memberships().items()
        }
        split_parents = {int(k): v for k, v in json.loads(self._graph.graph.get("split_communities", "{}")).items()}
        # In a worker thread, so that LLM calls in flight (description summaries) are served
        # meanwhile. They only replace attribute values of existing nodes and edges, which
        # neither resizes what Leiden iterates over nor changes what it reads.
        paths = await asyncio.to_thread(
            community_paths, self._graph, old_paths, config.max_graph_cluster_size, config.graph_cluster_seed,
            exact_below=None if full else config.exact_clustering_below, split_parents=split_parents)
        present = {c for p in paths.values() for c in p}
        self._graph.graph["split_communities"] = json.dumps(
            {str(k): v for k, v in sorted(split_parents.items()) if k in present})
        for node in self._graph.nodes:
            self._graph.nodes[node].pop("clusters", None)
        for node, path in paths.items():
            self._graph.nodes[node]["clusters"] = json.dumps(
                [{"level": level, "cluster": cluster} for level, cluster in enumerate(path)]
            )
        self._dirty = True
        logger.info("Clustered %d nodes into %d communities (%s)", len(paths),
                    len({c for p in paths.values() for c in p}), "full" if full else "incremental")

    async def community_schema(self) -> dict[str, CommunitySchema]:
        results: dict[str, dict[str, Any]] = {}
        memberships = self._memberships()
        for node, clusters in memberships.items():
            data = self._graph.nodes[node]
            chunk_ids = [c for c in str(data.get("source_id", "")).split(GRAPH_FIELD_SEP) if c]
            ordered = sorted(clusters, key=lambda c: c["level"])
            for depth, c in enumerate(ordered):
                key = str(c["cluster"])
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
        for a, b in self._graph.edges():
            path_a, path_b = paths.get(a), paths.get(b)
            if path_a and path_b:
                pair = (a, b) if a <= b else (b, a)
                for community_a, community_b in zip(path_a, path_b):
                    if community_a == community_b:
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

    async def drop(self) -> None:
        self._parsed, self._lookup = nx.Graph(), None
        self._dirty = True
