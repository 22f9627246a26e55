"""Point reads of a GraphML file without parsing all of it.

A local query needs a few dozen entities and their neighbourhoods, yet parsing the
GraphML of a 2-million-token corpus takes over a second. So every commit also writes
a small binary index beside the GraphML: per node, where its element lies in the file,
its degree and its neighbours (in the order a full parse would give them), and per
edge, where its element lies. A reader maps both files and parses only the elements it
is asked for; opening costs the same whatever the size of the graph.

The index names the exact GraphML it describes by the seal :func:`write_graphml`
ends the file with, and its size; one that does not match (the GraphML was rewritten
by another tool, or by a writer killed before it wrote the index) is ignored, and the
GraphML is parsed whole as before.

Nodes are kept in a :class:`KeyTable` by name; edges are found by the table slots
of their two ends.

The commits since the GraphML was last written whole sit in the graph's journal
(``storage/journal.py``); :class:`JournaledLookup` answers through their net changes
(:class:`GraphChanges`) laid over the index, so the index and the walk file are written
only when the GraphML is.
"""
from __future__ import annotations

import logging
import mmap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, TypeVar

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

from .capabilities import WalkLinks
from .graphml import GraphMLLayout, element_data, key_decoders, read_seal
from .journal import REMOVED
from .lookup_index import KeyTable, open_index, pack

logger = logging.getLogger(__name__)

_MAGIC = b"graphrag-graph-lookup 1\n"
_ARRAYS = ("key_hash", "key_start", "key_bytes", "node_offset", "node_length", "node_degree", "neighbour_start",
           "neighbours", "edge_key", "edge_offset", "edge_length")


def build_lookup_index(layout: GraphMLLayout) -> bytes:
    """The index of the GraphML file :func:`write_graphml` wrote (described by its ``layout``)."""
    names = layout.node_names
    order, key_arrays = KeyTable.build(names)  # slot -> position in the file
    slot = np.empty(len(names), dtype=np.int64)
    slot[order] = np.arange(len(names))
    ends = slot[np.array(layout.edge_ends, dtype=np.int64).reshape(-1, 2)]
    edge_count = len(ends)

    # A full parse (read_graphml) gives each node its neighbours in the order their edges
    # come in the file: sort (node, edge) pairs by node, then edge. A self-loop is one
    # neighbour but, as networkx counts it, two degrees.
    edge_number = np.arange(edge_count)
    from_slot = np.concatenate([ends[:, 0], ends[:, 1]])
    to_slot = np.concatenate([ends[:, 1], ends[:, 0]])
    degree = np.bincount(from_slot, minlength=len(names))
    keep = np.concatenate([np.ones(edge_count, bool), ends[:, 0] != ends[:, 1]])
    from_slot, to_slot = from_slot[keep], to_slot[keep]
    by_node = np.lexsort((np.concatenate([edge_number, edge_number])[keep], from_slot))
    neighbour_count = np.bincount(from_slot, minlength=len(names))

    # Edges are found by their two ends' slots, which need no hash: (low << 32) | high.
    low, high = ends.min(axis=1).astype(np.uint64), ends.max(axis=1).astype(np.uint64)
    edge_key = (low << np.uint64(32)) | high
    edge_order = np.argsort(edge_key, kind="stable")

    return pack(_MAGIC, {"seal": layout.seal, "graphml_size": layout.size, "attribute_keys": layout.keys}, {
        **key_arrays,
        "node_offset": np.array(layout.node_offsets, dtype="<u8")[order],
        "node_length": np.array(layout.node_lengths, dtype="<u4")[order],
        "node_degree": degree.astype("<u4"),
        "neighbour_start": np.concatenate([[0], np.cumsum(neighbour_count)]).astype("<u8"),
        "neighbours": to_slot[by_node].astype("<u4"),
        "edge_key": edge_key[edge_order].astype("<u8"),
        "edge_offset": np.array(layout.edge_offsets, dtype="<u8")[edge_order],
        "edge_length": np.array(layout.edge_lengths, dtype="<u4")[edge_order],
    })


class GraphLookup:
    """Nodes, edges, degrees and neighbours read from a GraphML file through its index.

    Both files stay mapped, so the answers keep describing the version opened even
    after a writer replaces them.
    """

    def __init__(self, graphml: mmap.mmap, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.graphml = graphml
        self.seal: str = header["seal"]
        self._attributes = key_decoders({k: tuple(v) for k, v in header["attribute_keys"].items()})
        self._nodes = KeyTable(arrays)
        self._node_offset, self._node_length = arrays["node_offset"], arrays["node_length"]
        self._node_degree = arrays["node_degree"]
        self._neighbour_start, self._neighbours = arrays["neighbour_start"], arrays["neighbours"]
        self._edge_key, self._edge_offset, self._edge_length = (
            arrays["edge_key"], arrays["edge_offset"], arrays["edge_length"])
        # Queries about neighbouring entities read the same elements again; like the parsed
        # graph, this hands out the same attribute dicts each time (callers only read them).
        # What a lookup answers never changes (it maps one version of the files), so the
        # answers to the calls each query repeats are kept too, bounded like the elements.
        # Plain dicts, not ``lru_cache`` over bound methods: those would refer back to the
        # lookup, so a replaced version's maps would stay open until a full collection.
        self._elements: dict[tuple[int, int], dict[str, Any]] = {}
        self._edges: dict[tuple[str, str], Optional[dict[str, Any]]] = {}
        self._neighbour_lists: dict[str, Optional[tuple[str, ...]]] = {}

    @classmethod
    def open(cls, graphml_file: BinaryIO, index_path: str) -> Optional[GraphLookup]:
        """The lookup for the open GraphML file, or None when ``index_path`` does not describe it."""
        opened = open_index(index_path, _MAGIC, graphml_file, _ARRAYS, lambda header, graphml, _: (
            header.get("graphml_size") == len(graphml) and header.get("seal") == read_seal(graphml[-128:])))
        if opened is None:
            return None
        header, arrays, graphml = opened
        try:
            return cls(graphml, header, arrays)
        except (KeyError, TypeError, ValueError) as exc:  # attribute keys it cannot decode
            logger.warning("Ignoring unreadable graph lookup index %s (%s)", index_path, exc)
            return None

    def __len__(self) -> int:
        return len(self._nodes)

    def _edge_slot(self, a: str, b: str) -> Optional[int]:
        ends = self._nodes.find(a), self._nodes.find(b)
        if ends[0] is None or ends[1] is None:
            return None
        wanted = np.uint64((min(ends) << 32) | max(ends))
        slot = int(np.searchsorted(self._edge_key, wanted))
        return slot if slot < len(self._edge_key) and self._edge_key[slot] == wanted else None

    def _element(self, offset: int, length: int) -> dict[str, Any]:
        found = self._elements.get((offset, length))
        if found is None:
            found = _kept(self._elements, (offset, length), 1 << 14,
                          element_data(self.graphml[offset:offset + length], self._attributes))
        return found

    def has_node(self, name: str) -> bool:
        return self._nodes.find(name) is not None

    def node(self, name: str) -> Optional[dict[str, Any]]:
        slot = self._nodes.find(name)
        return None if slot is None else self._element(int(self._node_offset[slot]), int(self._node_length[slot]))

    def degree(self, name: str) -> int:
        slot = self._nodes.find(name)
        return 0 if slot is None else int(self._node_degree[slot])

    def _read_neighbours(self, name: str) -> Optional[tuple[str, ...]]:
        slot = self._nodes.find(name)
        if slot is None:
            return None
        start, end = self._neighbour_start[slot], self._neighbour_start[slot + 1]
        return tuple(self._nodes.keys_of(self._neighbours[start:end].tolist()))

    def node_edges(self, name: str) -> Optional[list[tuple[str, str]]]:
        """``graph.edges(name)`` of the fully parsed graph, in the same order."""
        if name in self._neighbour_lists:
            neighbours = self._neighbour_lists[name]
        else:  # a hub's list is long: fewer are kept
            neighbours = _kept(self._neighbour_lists, name, 1 << 12, self._read_neighbours(name))
        return None if neighbours is None else [(name, other) for other in neighbours]

    def has_edge(self, a: str, b: str) -> bool:
        return self._edge_slot(a, b) is not None

    def _read_edge(self, a: str, b: str) -> Optional[dict[str, Any]]:
        slot = self._edge_slot(a, b)
        return None if slot is None else self._element(int(self._edge_offset[slot]), int(self._edge_length[slot]))

    def edge(self, a: str, b: str) -> Optional[dict[str, Any]]:
        if (a, b) in self._edges:
            return self._edges[a, b]
        return _kept(self._edges, (a, b), 1 << 14, self._read_edge(a, b))


K = TypeVar("K")
V = TypeVar("V")


def _kept(cache: dict[K, V], key: K, limit: int, value: V) -> V:
    """``value``, kept in ``cache`` under ``key``; a full cache starts over (the answers a
    query repeats come back within a few calls)."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value
    return value


# A graph journal's entry keys name what a change is to: a node, an edge (its ends in sorted
# order, as the graph is undirected) or a graph attribute. The separator is a character XML 1.0
# cannot carry, so no node name holds it (``graphml.xml_safe`` drops it).
_SEP = "\x1f"


def node_entry(name: str) -> str:
    return f"n{_SEP}{name}"


def edge_entry(a: str, b: str) -> str:
    return f"e{_SEP}{min(a, b)}{_SEP}{max(a, b)}"


def attribute_entry(name: str) -> str:
    return f"g{_SEP}{name}"


def _replace(data: dict[str, Any], new: dict[str, Any]) -> None:
    data.clear()
    data.update(new)


@dataclass
class GraphChanges:
    """A graph journal's net changes (``journal.net_changes``): each changed node's and edge's
    attributes, whole (an upsert in the journal is the element's state at its commit, not a
    merge), or ``REMOVED``, and the graph attributes set. A node's removal also lists its edges."""

    nodes: dict[str, Any] = field(default_factory=dict)
    edges: dict[tuple[str, str], Any] = field(default_factory=dict)  # (low end, high end)
    attributes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, changes: dict[str, Any]) -> GraphChanges:
        parsed = cls()
        for key, value in changes.items():
            kind, _, rest = key.partition(_SEP)
            if kind == "n":
                parsed.nodes[rest] = value
            elif kind == "e":
                a, _, b = rest.partition(_SEP)
                parsed.edges[(a, b)] = value
            elif kind == "g":
                parsed.attributes[rest] = value
        return parsed

    def __bool__(self) -> bool:
        return bool(self.nodes or self.edges or self.attributes)

    def apply(self, graph: nx.Graph) -> None:
        """Bring a graph read from the GraphML to the journal's last commit."""
        for name, data in self.nodes.items():
            if data is REMOVED:
                if name in graph:
                    graph.remove_node(name)
            elif name in graph:
                _replace(graph.nodes[name], data)
            else:
                graph.add_node(name, **data)
        for (a, b), data in self.edges.items():
            if data is REMOVED:
                if graph.has_edge(a, b):
                    graph.remove_edge(a, b)
            elif graph.has_edge(a, b):
                _replace(graph.edges[a, b], data)
            else:
                graph.add_edge(a, b, **data)
        for name, value in self.attributes.items():
            if value is REMOVED:
                graph.graph.pop(name, None)
            else:
                graph.graph[name] = value


def _source(data: dict[str, Any]) -> str:
    return str(data.get("source_id") or "")


class JournaledLookup:
    """:class:`GraphLookup`'s answers about the GraphML's version brought to the journal's last
    commit: a changed node or edge is answered from the changes, the rest from the index; a
    node's neighbours are the index's less the removed edges, then the added ones (the order a
    parse of the graph with the changes applied gives them)."""

    def __init__(self, base: GraphLookup, changes: GraphChanges) -> None:
        self.base, self.changes = base, changes
        self.graphml, self.seal = base.graphml, base.seal
        self._added: dict[str, list[str]] = {}  # node -> ends of edges the GraphML lacks
        for (a, b), data in changes.edges.items():
            if data is not REMOVED and not base.has_edge(a, b):
                self._added.setdefault(a, []).append(b)
                if a != b:
                    self._added.setdefault(b, []).append(a)
        # The nodes whose edges the changes can touch: the changed nodes, the ends of the changed
        # edges and the GraphML neighbours of the removed nodes. Any other node's edges and degree
        # are the index's, read without going through its edges (a hub has hundreds).
        self._touched: set[str] = set(changes.nodes).union(*changes.edges)
        for name, data in changes.nodes.items():
            if data is REMOVED:
                self._touched.update(other for _, other in base.node_edges(name) or ())

    def __len__(self) -> int:
        return len(self.base) + sum((data is not REMOVED) - self.base.has_node(name)
                                    for name, data in self.changes.nodes.items())

    def _edge_change(self, a: str, b: str) -> Any:
        """The edge's change; ``REMOVED`` also where an end was removed; None if unchanged."""
        change = self.changes.edges.get((min(a, b), max(a, b)))
        if change is None and REMOVED in (self.changes.nodes.get(a), self.changes.nodes.get(b)):
            return REMOVED
        return change

    def has_node(self, name: str) -> bool:
        change = self.changes.nodes.get(name)
        return self.base.has_node(name) if change is None else change is not REMOVED

    def node(self, name: str) -> Optional[dict[str, Any]]:
        change = self.changes.nodes.get(name)
        if change is None:
            return self.base.node(name)
        return None if change is REMOVED else change

    def node_edges(self, name: str) -> Optional[list[tuple[str, str]]]:
        if name not in self._touched:
            return self.base.node_edges(name)
        if not self.has_node(name):
            return None
        kept = [(a, b) for a, b in self.base.node_edges(name) or () if self._edge_change(a, b) is not REMOVED]
        return kept + [(name, other) for other in self._added.get(name, ())]

    def degree(self, name: str) -> int:
        if name not in self._touched:
            return self.base.degree(name)
        return sum(2 if a == b else 1 for a, b in self.node_edges(name) or ())

    def has_edge(self, a: str, b: str) -> bool:
        change = self._edge_change(a, b)
        return self.base.has_edge(a, b) if change is None else change is not REMOVED

    def edge(self, a: str, b: str) -> Optional[dict[str, Any]]:
        change = self._edge_change(a, b)
        if change is None:
            return self.base.edge(a, b)
        return None if change is REMOVED else change

    def walk_links(self, links: WalkLinks) -> WalkLinks:
        """The walk file's links (of the GraphML) with the changes applied."""
        if not self.changes:
            return links
        node_changes = self.changes.nodes
        nodes = [(name, source if (change := node_changes.get(name)) is None else _source(change))
                 for name, source in links[0] if node_changes.get(name) is not REMOVED]
        nodes += [(name, _source(data)) for name, data in node_changes.items()
                  if data is not REMOVED and not self.base.has_node(name)]
        edges = [(a, b) for a, b in links[1] if self._edge_change(a, b) is not REMOVED]
        edges += [(a, b) for (a, b), data in self.changes.edges.items()
                  if data is not REMOVED and not self.base.has_edge(a, b)]
        return nodes, edges
