"""Entity graph kept in ``graph_{namespace}.graphml``, clustered with hierarchical Leiden."""
from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional, Union
from xml.etree.ElementTree import ParseError
from xml.parsers import expat
from xml.sax.saxutils import escape, quoteattr

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


_GRAPHML_TYPES = {bool: "boolean", int: "long", float: "double", str: "string"}


def _scalars(data: dict[str, Any]) -> dict[str, Any]:
    # Like networkx's reader/writer pair: only scalar attributes travel in GraphML.
    return {k: v for k, v in data.items() if type(v) in _GRAPHML_TYPES}


def _attribute_types(items: Any) -> dict[str, type]:
    types: dict[str, type] = {}
    for data in items:
        for name, value in _scalars(data).items():
            seen = types.setdefault(name, type(value))
            if seen is not type(value):
                types[name] = float if {seen, type(value)} <= {int, float} else str
    return types


def write_graphml(graph: nx.Graph, path: str) -> None:
    """Write GraphML as networkx does, streamed instead of built as an XML tree (~4x faster).

    The whole file is rewritten at every commit, so on large graphs this is on the
    critical path of each insert. ``nx.read_graphml`` reads the result unchanged.
    """
    scopes = {"graph": _attribute_types([graph.graph]),
              "node": _attribute_types(d for _, d in graph.nodes(data=True)),
              "edge": _attribute_types(d for _, _, d in graph.edges(data=True))}
    keys = {(scope, name): f"d{i}" for i, (scope, name) in
            enumerate((scope, name) for scope, types in scopes.items() for name in types)}

    def data(scope: str, attrs: dict[str, Any]) -> str:
        types = scopes[scope]
        return "".join(
            f'<data key="{keys[(scope, name)]}">'
            f'{("true" if value else "false") if types[name] is bool else escape(str(value))}</data>'
            for name, value in _scalars(attrs).items()
        )

    with open(path, "w", encoding="utf-8") as f:
        f.write("<?xml version='1.0' encoding='utf-8'?>\n"
                '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
                'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
                'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n')
        for (scope, name), key in keys.items():
            f.write(f'  <key id="{key}" for="{scope}" attr.name={quoteattr(name)} '
                    f'attr.type="{_GRAPHML_TYPES[scopes[scope][name]]}" />\n')
        f.write(f'  <graph edgedefault="undirected">{data("graph", graph.graph)}\n')
        for node, attrs in graph.nodes(data=True):
            f.write(f'    <node id={quoteattr(str(node))}>{data("node", attrs)}</node>\n')
        for a, b, attrs in graph.edges(data=True):
            f.write(f'    <edge source={quoteattr(str(a))} target={quoteattr(str(b))}>{data("edge", attrs)}</edge>\n')
        f.write("  </graph>\n</graphml>\n")


_BOOLEANS = {"true": True, "false": False, "0": False, "1": True}
_DECODERS: dict[str, Any] = {"boolean": lambda text: _BOOLEANS[text.lower()], "int": int, "integer": int,
                             "long": int, "float": float, "double": float, "string": str}


class _NotPlainGraphML(Exception):
    """A GraphML feature the fast reader leaves to networkx."""


class _GraphMLHandlers:
    """expat callbacks collecting keys, nodes, edges and graph data in document order."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, Any]] = {}
        self.defaults: dict[str, dict[str, Any]] = {"node": {}, "edge": {}}
        self.graph_data: dict[str, Any] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: list[tuple[str, str, dict[str, Any]]] = []
        self.graphs = 0
        self._item: Optional[dict[str, Any]] = None  # the node's or edge's data being read
        self._key: Optional[dict[str, str]] = None  # the <key> being read
        self._data_key: Optional[str] = None
        self._text: list[str] = []
        self._in_value = False

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if self._in_value:
            raise _NotPlainGraphML("an element inside <data> or <default> (yfiles)")
        if tag == "data":
            self._data_key, self._text, self._in_value = attrs.get("key"), [], True
        elif tag == "node":
            if self._item is not None or not self.graphs:
                raise _NotPlainGraphML("nested node")
            self._item = self.nodes.setdefault(attrs.get("id"), {})  # type: ignore[arg-type]
        elif tag == "edge":
            if self._item is not None or not self.graphs or "id" in attrs or attrs.get("directed") == "true":
                raise _NotPlainGraphML("edge id, direction or nesting")
            self._item = {}
            self.edges.append((attrs.get("source"), attrs.get("target"), self._item))  # type: ignore[arg-type]
        elif tag == "graph":
            self.graphs += 1
            if self.graphs > 1 or self._item is not None or attrs.get("edgedefault") == "directed":
                raise _NotPlainGraphML("nested, several or directed graphs")
        elif tag == "key":
            decode = _DECODERS.get(attrs.get("attr.type", "string"))
            if decode is None or "yfiles.type" in attrs:
                raise _NotPlainGraphML("key type")
            self._key = attrs
            self.keys[attrs.get("id", "")] = (attrs.get("attr.name", ""), decode)
        elif tag == "default":
            self._text, self._in_value = [], True
        elif tag != "graphml":
            raise _NotPlainGraphML(tag)

    def end(self, tag: str) -> None:
        if tag == "data":
            self._in_value = False
            owner = self._item if self._item is not None else self.graph_data if self.graphs else None
            if owner is None:
                raise _NotPlainGraphML("data outside graph, node and edge")
            data_name, decode = self.keys[self._data_key]  # type: ignore[index]  # KeyError: as networkx
            # networkx reads an empty element as "", whatever the key's type.
            owner[data_name] = decode("".join(self._text)) if self._text else ""
        elif tag == "default":
            self._in_value = False
            if self._key is not None and self._key.get("for") in self.defaults:
                data_name, decode = self.keys[self._key.get("id", "")]
                self.defaults[self._key["for"]][data_name] = decode("".join(self._text))
        elif tag in ("node", "edge"):
            self._item = None
        elif tag == "key":
            self._key = None

    def text(self, data: str) -> None:
        if self._in_value:
            self._text.append(data)


def read_graphml(path: str) -> nx.Graph:
    """An undirected GraphML file as ``nx.Graph(nx.read_graphml(path))`` reads it, ~3x faster.

    The parse dominated opening a large working dir. The plain GraphML that
    :func:`write_graphml` and networkx write is read in one expat pass; anything else
    (directed or nested graphs, ports, yfiles, edge ids, parallel edges) goes to networkx.
    """
    handlers = _GraphMLHandlers()
    parser = expat.ParserCreate()  # GraphML's default namespace: tags arrive bare
    parser.buffer_text = True
    parser.StartElementHandler = handlers.start
    parser.EndElementHandler = handlers.end
    parser.CharacterDataHandler = handlers.text
    try:
        with open(path, "rb") as f:
            parser.ParseFile(f)
        nodes = handlers.nodes
        # networkx adds every node, then every edge, to a multigraph and converts that to a
        # Graph node by node; its neighbour order (which clustering sees) is rebuilt the same way.
        neighbours: dict[str, dict[str, dict[str, Any]]] = {node: {} for node in nodes}
        for source, target, data in handlers.edges:
            for end in (source, target):
                if end not in nodes:
                    nodes[end] = {}
                    neighbours[end] = {}
            if target in neighbours[source]:
                raise _NotPlainGraphML("parallel edges")
            neighbours[source][target] = neighbours[target][source] = data
    except _NotPlainGraphML:
        return nx.Graph(nx.read_graphml(path))
    except expat.ExpatError as exc:
        raise ParseError(str(exc)) from exc
    graph = nx.Graph()
    graph.graph.update({"node_default": handlers.defaults["node"], "edge_default": handlers.defaults["edge"]})
    graph.add_nodes_from(nodes.items())
    for node, adjacent in neighbours.items():
        for other, data in adjacent.items():
            if not graph.has_edge(node, other):
                graph.add_edge(node, other, **data)
    graph.graph.update(handlers.graph_data)
    return graph


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
    for membership in leiden_partitions(component.subgraph(unplaced), max_cluster_size, seed):
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
            for membership in leiden_partitions(component.subgraph(sorted(group)), max_cluster_size, seed):
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
        for membership in leiden_partitions(graph.subgraph(component), max_cluster_size, seed):
            paths.update(ids.match(membership, old))
    return paths


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
            return read_graphml(file_name)
        except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError) as exc:
            raise StorageFileError(
                f"graph file {file_name!r} is corrupt ({exc}). It was left untouched: restore it or delete it."
            ) from exc

    def _load(self) -> None:
        self._loaded_signature = file_signature(self._file_name)
        graph = self.load_nx_graph(self._file_name)
        self._graph = graph if graph is not None else nx.Graph()
        self._dirty = False
        logger.debug("Loaded graph %s: %d nodes, %d edges", self.namespace,
                     self._graph.number_of_nodes(), self._graph.number_of_edges())

    async def index_done_callback(self) -> None:
        if not self._dirty:
            return
        atomic_write_via(self._file_name, lambda tmp: write_graphml(self._graph, tmp))
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
        self._graph = nx.Graph()
        self._dirty = True
