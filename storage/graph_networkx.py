"""Entity graph kept in ``graph_{namespace}.graphml``, with the commits since it was last written
whole in ``graph_{namespace}.journal.jsonl``."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Mapping, Optional, Union
from xml.etree.ElementTree import ParseError

if TYPE_CHECKING:
    import networkx as nx

from .base import BaseGraphStorage, ClusterMemberships, KeepsWalkLinks, WalkLinks, walk_links_from_graph
from .files import StorageFileError, atomic_write_bytes, atomic_write_via
from .graph_lookup import (
    GraphChanges,
    GraphLookup,
    JournaledLookup,
    attribute_entry,
    build_lookup_index,
    edge_entry,
    node_entry,
)
from .graph_walk import build_walk_file, read_walk_file
from .graphml import GraphMLLayout, read_graphml, safe_attrs, scalar_attrs, write_graphml, xml_safe
from .journal import REMOVED, JournaledFile, change_lines, journal_for, net_changes, read_journal
from .lookup_index import ParsedOnDemand

logger = logging.getLogger(__name__)


@dataclass
class NetworkXStorage(ParsedOnDemand, JournaledFile, BaseGraphStorage, ClusterMemberships, KeepsWalkLinks):
    """The graph, parsed whole only when something needs all of it (an insert, clustering,
    ``.graph``). Until then, the point reads a query makes go through a lookup index
    written beside the GraphML (see ``graph_lookup``), or parse the whole file where
    there is none.

    A commit into a large GraphML appends the nodes, edges and graph attributes it changed
    (each whole, or its removal) to the journal instead of rewriting the GraphML, its index
    and its walk file, by the rules of :class:`storage.journal.JournaledFile` (folded at a
    share of the file, at ``close()`` and at interpreter exit); opening lays the journal over
    the index (:class:`graph_lookup.JournaledLookup`) or applies it to the parsed graph."""

    _parsed: Optional[nx.Graph] = field(default=None, init=False, repr=False)
    _lookup: Optional[JournaledLookup] = field(default=None, init=False, repr=False)
    _dirty: bool = field(default=False, init=False, repr=False)
    _loaded_signature: Optional[tuple[Any, ...]] = field(default=None, init=False, repr=False)
    # What changed since the last commit: entry key (``graph_lookup.node_entry`` ...) -> the
    # live attribute dict (or value) to journal at the commit, or REMOVED.
    _changed: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _must_fold: bool = field(default=False, init=False, repr=False)
    # The journal's net changes read at load, applied when the graph is parsed from the GraphML.
    _replayed: GraphChanges = field(default_factory=GraphChanges, init=False, repr=False)
    # Community id -> nodes whose ``clusters`` named it since the graph was read: a superset
    # (entries go stale, never missing), so a small write finds a community's members without
    # reading every node. Built on first use; None until then.
    _members: Optional[dict[int, set[str]]] = field(default=None, init=False, repr=False)
    # Whether a node's ``clusters`` text noted in ``_members`` could not be read.
    _unreadable_member: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._file_name = self.path_for(f"graph_{self.namespace}.graphml")
        self._index_name = self.path_for(f"graph_{self.namespace}.graphml.index")
        self._walk_name = self.path_for(f"graph_{self.namespace}.graphml.walk")
        self._journal_name = journal_for(self._file_name)
        self._load()

    def _parse(self, source: Union[str, BinaryIO]) -> nx.Graph:
        import networkx as nx  # on first use: a process that never reads the graph never loads it

        try:
            return read_graphml(source)
        except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError) as exc:
            raise StorageFileError(
                f"graph file {self._file_name!r} is corrupt ({exc}). It was left untouched: restore it or delete it."
            ) from exc

    def _load(self) -> None:
        self._dirty, self._must_fold, self._changed = False, False, {}
        self._lookup, self._members = None, None
        # The file, then the journal, as the KV store: a fold by another process in between
        # leaves an older state, noticed by the signature at the next ``reload_if_changed``.
        self._loaded_signature = self._signature()
        try:
            f = open(self._file_name, "rb")
        except FileNotFoundError:
            f = None
        if f is None:
            import networkx as nx

            self._parsed, lookup = nx.Graph(), None
        else:
            with f:
                lookup = GraphLookup.open(f, self._index_name)
                self._parsed = None if lookup is not None else self._parse(f)
        entries = read_journal(self._journal_name)
        changes = GraphChanges.parse(net_changes(entries))
        if lookup is not None:
            self._lookup = JournaledLookup(lookup, changes)
        else:
            changes.apply(self._graph)
            # A GraphML with no index that describes it (written by another tool): the next
            # commit writes it whole with one, or every reader would go on parsing it whole.
            self._must_fold = f is not None
        self._dirty = bool(entries)  # a small file takes the journal in at the next commit
        logger.debug("Opened graph %s: %s (%d journal entries)", self.namespace,
                     f"{len(self._lookup)} nodes, indexed" if self._lookup is not None else
                     f"{self._graph.number_of_nodes()} nodes, {self._graph.number_of_edges()} edges", len(entries))

    def _parse_mapped(self, lookup: JournaledLookup) -> nx.Graph:
        lookup.graphml.seek(0)
        graph = self._parse(lookup.graphml)  # type: ignore[arg-type]
        lookup.changes.apply(graph)
        return graph

    @property
    def _graph(self) -> nx.Graph:
        return self._whole()

    def _write_whole(self) -> None:
        graph = self._graph
        layouts: list[GraphMLLayout] = []
        atomic_write_via(self._file_name, lambda tmp: layouts.append(write_graphml(graph, tmp)))
        # Inside the commit's transaction both files appear together; outside one, a
        # reader between the two renames sees an index that does not match and ignores it.
        atomic_write_bytes(self._index_name, build_lookup_index(layouts[0]))
        atomic_write_bytes(self._walk_name, build_walk_file(graph, layouts[0]))

    def _journal_line(self) -> bytes:
        # The changed elements' attributes as they are now (what GraphML would carry), whole.
        return change_lines({key: value if value is REMOVED or not isinstance(value, dict) else scalar_attrs(value)
                             for key, value in self._changed.items()})

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
        return (await self.node_degrees_batch([node_id]))[0]

    async def get_node(self, node_id: str) -> Union[dict, None]:
        return (await self.get_nodes_batch([node_id]))[0]

    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        return (await self.get_edges_batch([(source_node_id, target_node_id)]))[0]

    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        source_node_id = xml_safe(source_node_id)
        lookup = self._points()
        if lookup is not None:
            return lookup.node_edges(source_node_id)
        if not self._graph.has_node(source_node_id):
            return None
        return list(self._graph.edges(source_node_id))

    # The batches a query reads (~100 edges and 200 degrees a local query), answered in one
    # pass over the lookup or the graph rather than one coroutine per element.

    async def get_nodes_batch(self, node_ids: list[str]) -> list[Union[dict, None]]:
        lookup = self._points()
        if lookup is not None:
            return [lookup.node(xml_safe(n)) for n in node_ids]
        nodes = self._graph.nodes
        return [nodes.get(xml_safe(n)) for n in node_ids]

    async def get_edges_batch(self, pairs: list[tuple[str, str]]) -> list[Union[dict, None]]:
        lookup = self._points()
        if lookup is not None:
            return [lookup.edge(xml_safe(a), xml_safe(b)) for a, b in pairs]
        edges = self._graph.edges
        return [edges.get((xml_safe(a), xml_safe(b))) for a, b in pairs]

    async def node_degrees_batch(self, node_ids: list[str]) -> list[int]:
        lookup = self._points()
        if lookup is not None:
            return [lookup.degree(xml_safe(n)) for n in node_ids]
        graph = self._graph
        return [graph.degree(n) if graph.has_node(n) else 0 for n in map(xml_safe, node_ids)]

    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        node_id, graph = xml_safe(node_id), self._graph
        graph.add_node(node_id, **safe_attrs(node_data))
        self._changed[node_entry(node_id)] = graph.nodes[node_id]
        self._note_members(node_id, node_data.get("clusters"))
        self._dirty = True

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        a, b, graph = xml_safe(source_node_id), xml_safe(target_node_id), self._graph
        for end in (a, b):
            if end not in graph:  # added by the edge, as networkx's add_edge would
                graph.add_node(end)
                self._changed[node_entry(end)] = graph.nodes[end]
        graph.add_edge(a, b, **safe_attrs(edge_data))
        self._changed[edge_entry(a, b)] = graph.edges[a, b]
        self._dirty = True

    async def delete_node(self, node_id: str) -> None:
        node_id, graph = xml_safe(node_id), self._graph
        if graph.has_node(node_id):
            # Its edges go with it: each is journaled as removed, so a reader of the index
            # (which lists them) needs no rule for it.
            self._changed.update(dict.fromkeys((edge_entry(node_id, other) for other in graph.adj[node_id]), REMOVED))
            self._changed[node_entry(node_id)] = REMOVED
            graph.remove_node(node_id)
            self._dirty = True

    async def delete_edge(self, source_node_id: str, target_node_id: str) -> None:
        a, b = xml_safe(source_node_id), xml_safe(target_node_id)
        if self._graph.has_edge(a, b):
            self._graph.remove_edge(a, b)
            self._changed[edge_entry(a, b)] = REMOVED
            self._dirty = True

    # Read through the public iterators that hand out networkx's own attribute dicts
    # (``nodes(data=True)``, ``adjacency()``): its mapping views cost a call per item, which is
    # most of a whole-graph pass such as clustering.

    async def get_all_nodes(self) -> list[tuple[str, dict]]:
        return list(self._graph.nodes(data=True))

    async def get_all_edges(self) -> list[tuple[str, str, dict]]:
        """In ``graph.edges`` order."""
        edges, seen = [], set()
        for a, neighbours in self._graph.adjacency():
            edges.extend((a, b, data) for b, data in neighbours.items() if b not in seen)
            seen.add(a)
        return edges

    async def get_walk_links(self) -> WalkLinks:
        """From the walk file written with the GraphML while the graph is not parsed (a query
        process); from the parsed graph otherwise, or where the file is missing or stale."""
        lookup = self._points()
        links = read_walk_file(self._walk_name, lookup.seal, len(lookup.graphml)) if lookup is not None else None
        return lookup.walk_links(links) if lookup is not None and links is not None else await walk_links_from_graph(self)

    async def get_adjacency(self) -> Mapping[str, Mapping[str, dict]]:
        return dict(self._graph.adjacency())

    async def count_nodes(self) -> int:
        return self._graph.number_of_nodes()

    async def count_edges(self) -> int:
        return self._graph.number_of_edges()

    async def set_node_clusters(self, clusters: dict[str, str]) -> None:
        for node in self._graph.nodes:
            self._graph.nodes[node].pop("clusters", None)
        for node, value in clusters.items():
            self._graph.nodes[node]["clusters"] = value
        self._members = None
        self._must_fold = self._dirty = True  # every node changes: the GraphML is written whole

    async def update_node_clusters(self, changes: dict[str, str]) -> None:
        """Only these nodes' memberships are written ("": none), not every node's."""
        nodes = self._graph.nodes
        for node, value in changes.items():
            if value:
                nodes[node]["clusters"] = value
                self._note_members(node, value)
            else:
                nodes[node].pop("clusters", None)
            self._changed[node_entry(node)] = nodes[node]
        self._dirty = True

    def _members_map(self) -> dict[int, set[str]]:
        if self._members is None:
            self._members, self._unreadable_member = {}, False
            for node, raw in self._graph.nodes(data="clusters"):
                self._note_members(node, raw)
        return self._members

    async def nodes_in_clusters(self, cluster_ids: list[int]) -> list[tuple[str, dict]]:
        """From the community -> members map (built once per graph read), each node checked
        against its current memberships by the caller."""
        members = self._members_map()
        nodes = self._graph.nodes
        found = sorted({node for c in cluster_ids for node in members.get(int(c), ())})
        return [(node, {"clusters": nodes[node]["clusters"]}) for node in found
                if node in nodes and nodes[node].get("clusters")]

    async def node_with_highest_cluster(self) -> Optional[list[tuple[str, dict]]]:
        """From the community -> members map: the highest id a node's current memberships name,
        not every node's memberships read. None (the caller reads them all) while the map has
        met an unreadable membership, which the whole read may find naming a higher id."""
        if self._points() is not None:
            return None
        members = self._members_map()
        if self._unreadable_member:
            return None
        nodes = self._graph.nodes
        for cluster in sorted(members, reverse=True):
            for node in sorted(members[cluster]):  # entries may be stale: checked against the node now
                raw = nodes[node].get("clusters") if node in nodes else None
                try:
                    if raw and cluster in {int(c["cluster"]) for c in json.loads(raw)}:
                        return [(node, {"clusters": raw})]
                except (ValueError, TypeError, KeyError):
                    return None
        return []

    async def get_edges_at(self, node_ids: list[str], names: tuple[str, ...]) -> list[tuple[str, str, dict]]:
        """As the contract's default (same edges, same order), read off the adjacency at once
        rather than one lookup per edge."""
        if self._points() is not None:
            return await super().get_edges_at(node_ids, names)
        adjacency, seen = self._graph.adj, set()
        edges = []
        for node in map(xml_safe, node_ids):
            for other, data in adjacency.get(node, {}).items():
                pair = (node, other) if node <= other else (other, node)
                if pair not in seen:
                    seen.add(pair)
                    edges.append((*pair, {k: data[k] for k in names if k in data} if names else {}))
        return edges

    def _note_members(self, node: str, raw: Optional[str]) -> None:
        if self._members is None or not raw:
            return
        try:
            ids = {int(c["cluster"]) for c in json.loads(raw)}
        except (ValueError, TypeError, KeyError):
            self._unreadable_member = True
            return  # unreadable: callers skip it too
        for c in ids:
            self._members.setdefault(c, set()).add(node)

    async def get_graph_attribute(self, name: str) -> Optional[str]:
        return self._graph.graph.get(name)

    async def set_graph_attribute(self, name: str, value: str) -> None:
        self._graph.graph[name] = value
        self._changed[attribute_entry(name)] = value
        self._dirty = True

    async def drop(self) -> None:
        import networkx as nx

        self._parsed, self._lookup, self._members = nx.Graph(), None, None
        self._must_fold = self._dirty = True
