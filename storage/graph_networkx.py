"""Entity graph kept in ``graph_{namespace}.graphml``, clustered with hierarchical Leiden."""
from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional, Union
from xml.etree.ElementTree import ParseError

import networkx as nx

from graphrag.schema import GRAPH_FIELD_SEP, CommunitySchema

from .base import BaseGraphStorage
from .files import SingleFileStore, StorageFileError, atomic_write_via, file_signature

logger = logging.getLogger(__name__)

# Characters XML 1.0 cannot carry at all; LLM output sometimes holds them.
_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    return _XML_INVALID.sub("", text) if _XML_INVALID.search(text) else text


def _safe_attrs(data: dict[str, Any]) -> dict[str, Any]:
    return {k: xml_safe(v) if isinstance(v, str) else v for k, v in data.items()}


def leiden_partitions(graph: nx.Graph, max_cluster_size: int, seed: int) -> list[dict[str, list[int]]]:
    """Hierarchical Leiden run on each connected component on its own.

    Each component's result depends only on that component, so a change in one part
    of the graph leaves the communities of the others exactly as they were, and every
    component (not only the largest) gets communities. Returns, per component, a map
    node -> [local cluster at level 0, level 1, ...].
    """
    from graspologic_native import hierarchical_leiden

    results = []
    for component in sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: c[0]):
        if len(component) < 2:
            continue  # an isolated node has no relation to summarise
        if len(component) == 2:
            results.append({n: [0] for n in component})
            continue
        sub = graph.subgraph(component)
        edges = sorted(
            (min(a, b), max(a, b), float(d.get("weight", 1.0) or 1.0)) for a, b, d in sub.edges(data=True)
        )
        membership: dict[str, list[int]] = defaultdict(list)
        for entry in sorted(hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed),
                            key=lambda e: (e.node, e.level)):
            membership[entry.node].append(entry.cluster)
        results.append(dict(membership))
    return results


def _match_ids(
    new_groups: dict[int, dict[tuple, set[str]]], old_groups: dict[int, dict[int, set[str]]]
) -> dict[tuple, int]:
    """Give each new community the id of the old one at its level it overlaps most.

    Matching is greedy by overlap (Jaccard >= 0.5), so an unchanged community keeps its
    id and its report; unmatched communities get fresh ids above every id seen.
    """
    used = {cid for groups in old_groups.values() for cid in groups}
    next_id = max(used, default=-1) + 1
    assigned: dict[tuple, int] = {}
    for level in sorted(new_groups):
        olds = old_groups.get(level, {})
        node_to_old: dict[str, set[int]] = defaultdict(set)
        for cid, members in olds.items():
            for n in members:
                node_to_old[n].add(cid)
        candidates = []
        for key, members in new_groups[level].items():
            for cid in set().union(*(node_to_old.get(n, set()) for n in members)):
                overlap = len(members & olds[cid])
                jaccard = overlap / len(members | olds[cid])
                if jaccard >= 0.5:
                    candidates.append((-jaccard, cid, sorted(members)[0], key))
        taken: set[int] = set()
        for _, cid, _, key in sorted(candidates, key=lambda c: (c[0], c[1], c[2])):
            if key not in assigned and cid not in taken:
                assigned[key] = cid
                taken.add(cid)
        for key in sorted((k for k in new_groups[level] if k not in assigned), key=lambda k: sorted(new_groups[level][k])[0]):
            assigned[key] = next_id
            next_id += 1
    return assigned


@dataclass
class NetworkXStorage(SingleFileStore, BaseGraphStorage):
    _graph: nx.Graph = field(default_factory=nx.Graph, init=False, repr=False)
    _dirty: bool = field(default=False, init=False, repr=False)
    _loaded_signature: Optional[tuple[int, ...]] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._file_name = self.path_for(f"graph_{self.namespace}.graphml")
        self._load()

    @staticmethod
    def load_nx_graph(file_name: str) -> Optional[nx.Graph]:
        """Read a GraphML file (None when absent), naming the file if it is corrupt."""
        if file_signature(file_name) is None:
            return None
        try:
            return nx.read_graphml(file_name)
        except (ParseError, nx.NetworkXError, ValueError, KeyError) as exc:
            raise StorageFileError(
                f"graph file {file_name!r} is corrupt ({exc}). It was left untouched: restore it or delete it."
            ) from exc

    def _load(self) -> None:
        self._loaded_signature = file_signature(self._file_name)
        graph = self.load_nx_graph(self._file_name)
        self._graph = nx.Graph(graph) if graph is not None else nx.Graph()
        self._dirty = False
        logger.debug("Loaded graph %s: %d nodes, %d edges", self.namespace,
                     self._graph.number_of_nodes(), self._graph.number_of_edges())

    async def index_done_callback(self) -> None:
        if not self._dirty:
            return
        atomic_write_via(self._file_name, lambda tmp: nx.write_graphml(self._graph, tmp))
        self._dirty = False
        self._remember_committed_file()

    @property
    def graph(self) -> nx.Graph:
        """The live graph, for read-only analysis (notebooks, stats)."""
        return self._graph

    async def has_node(self, node_id: str) -> bool:
        return self._graph.has_node(xml_safe(node_id))

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        return self._graph.has_edge(xml_safe(source_node_id), xml_safe(target_node_id))

    async def node_degree(self, node_id: str) -> int:
        node_id = xml_safe(node_id)
        return self._graph.degree(node_id) if self._graph.has_node(node_id) else 0

    async def edge_degree(self, src_id: str, tgt_id: str) -> int:
        return await self.node_degree(src_id) + await self.node_degree(tgt_id)

    async def get_node(self, node_id: str) -> Union[dict, None]:
        return self._graph.nodes.get(xml_safe(node_id))

    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        return self._graph.edges.get((xml_safe(source_node_id), xml_safe(target_node_id)))

    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        source_node_id = xml_safe(source_node_id)
        if not self._graph.has_node(source_node_id):
            return None
        return list(self._graph.edges(source_node_id))

    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        self._graph.add_node(xml_safe(node_id), **_safe_attrs(node_data))
        self._dirty = True

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        self._graph.add_edge(xml_safe(source_node_id), xml_safe(target_node_id), **_safe_attrs(edge_data))
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

    async def clustering(self, algorithm: str = "leiden") -> None:
        if algorithm != "leiden":
            raise ValueError(f"unknown graph clustering algorithm {algorithm!r}; only 'leiden' is available")
        old_groups: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        for node, clusters in self._memberships().items():
            for c in clusters:
                old_groups[c["level"]][c["cluster"]].add(node)

        config = self.global_config
        partitions = leiden_partitions(self._graph, config.max_graph_cluster_size, config.graph_cluster_seed)
        new_groups: dict[int, dict[tuple, set[str]]] = defaultdict(lambda: defaultdict(set))
        for index, membership in enumerate(partitions):
            for node, path in membership.items():
                for level, local in enumerate(path):
                    new_groups[level][(index, local)].add(node)
        ids = _match_ids(new_groups, old_groups)

        for node in self._graph.nodes:
            self._graph.nodes[node].pop("clusters", None)
        for index, membership in enumerate(partitions):
            for node, path in membership.items():
                self._graph.nodes[node]["clusters"] = json.dumps(
                    [{"level": level, "cluster": ids[(index, local)]} for level, local in enumerate(path)]
                )
        self._dirty = True
        logger.info("Clustered %d nodes into %d communities over %d levels",
                    sum(len(m) for m in partitions), len(ids), len(new_groups))

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
        for entry in results.values():
            members = entry["nodes"]
            entry["edges"] = {
                (min(a, b), max(a, b)) for n in members for a, b in self._graph.edges(n) if a in members and b in members
            }
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
        self._graph = nx.Graph()
        self._dirty = True
