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

Layout: a magic line, a little-endian u64 header length, a JSON header (the seal,
the GraphML size, the attribute keys and where each array lies), then the arrays,
each 8-byte aligned. Nodes are sorted by a 64-bit hash of their name and found by
binary search; their names are kept too, so a hash collision is told apart.
"""
from __future__ import annotations

import json
import logging
import mmap
from typing import Any, BinaryIO, Optional

import numpy as np
import xxhash

from .graphml import GraphMLLayout, element_data, key_decoders, read_seal

logger = logging.getLogger(__name__)

_MAGIC = b"graphrag-graph-lookup 1\n"


def _hash(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


def build_lookup_index(layout: GraphMLLayout) -> bytes:
    """The index of the GraphML file :func:`write_graphml` wrote (described by its ``layout``)."""
    names = layout.node_names
    node_hash = np.fromiter(map(_hash, names), dtype="<u8", count=len(names))
    order = np.argsort(node_hash, kind="stable")  # slot -> position in the file
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

    encoded = [names[i].encode("utf-8") for i in order]
    arrays = {
        "node_hash": node_hash[order],
        "node_offset": np.array(layout.node_offsets, dtype="<u8")[order],
        "node_length": np.array(layout.node_lengths, dtype="<u4")[order],
        "node_degree": degree.astype("<u4"),
        "name_start": np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype("<u8"),
        "names": np.frombuffer(b"".join(encoded), dtype="u1"),
        "neighbour_start": np.concatenate([[0], np.cumsum(neighbour_count)]).astype("<u8"),
        "neighbours": to_slot[by_node].astype("<u4"),
        "edge_key": edge_key[edge_order].astype("<u8"),
        "edge_offset": np.array(layout.edge_offsets, dtype="<u8")[edge_order],
        "edge_length": np.array(layout.edge_lengths, dtype="<u4")[edge_order],
    }
    placed: dict[str, list[Any]] = {}
    offset = 0
    for name, array in arrays.items():
        placed[name] = [array.dtype.str, offset, int(array.size)]
        offset += -(-array.nbytes // 8) * 8
    header = json.dumps({"seal": layout.seal, "graphml_size": layout.size, "keys": layout.keys,
                         "arrays": placed}).encode("utf-8")
    start = len(_MAGIC) + 8 + len(header)
    start += -start % 8
    out = bytearray(start + offset)
    out[:len(_MAGIC)] = _MAGIC
    out[len(_MAGIC):len(_MAGIC) + 8] = len(header).to_bytes(8, "little")
    out[len(_MAGIC) + 8:len(_MAGIC) + 8 + len(header)] = header
    for name, array in arrays.items():
        at = start + placed[name][1]
        out[at:at + array.nbytes] = array.tobytes()
    return bytes(out)


class GraphLookup:
    """Nodes, edges, degrees and neighbours read from a GraphML file through its index.

    Both files stay mapped, so the answers keep describing the version opened even
    after a writer replaces them.
    """

    def __init__(self, graphml: mmap.mmap, index: mmap.mmap, header: dict[str, Any], start: int) -> None:
        self.graphml = graphml
        self._index = index
        self._keys = key_decoders({k: tuple(v) for k, v in header["keys"].items()})
        arrays = {name: np.frombuffer(index, dtype=dtype, count=count, offset=start + offset)
                  for name, (dtype, offset, count) in header["arrays"].items()}
        self._node_hash, self._node_offset = arrays["node_hash"], arrays["node_offset"]
        self._node_length, self._node_degree = arrays["node_length"], arrays["node_degree"]
        self._name_start, self._names = arrays["name_start"], arrays["names"]
        self._neighbour_start, self._neighbours = arrays["neighbour_start"], arrays["neighbours"]
        self._edge_key, self._edge_offset, self._edge_length = (
            arrays["edge_key"], arrays["edge_offset"], arrays["edge_length"])

    @classmethod
    def open(cls, graphml_file: BinaryIO, index_path: str) -> Optional[GraphLookup]:
        """The lookup for the open GraphML file, or None when ``index_path`` does not describe it."""
        try:
            with open(index_path, "rb") as f:
                index = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            graphml = mmap.mmap(graphml_file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # no index yet, or an empty file
            return None
        try:
            if index[:len(_MAGIC)] != _MAGIC:
                raise ValueError("not a graph lookup index")
            length = int.from_bytes(index[len(_MAGIC):len(_MAGIC) + 8], "little")
            header = json.loads(index[len(_MAGIC) + 8:len(_MAGIC) + 8 + length])
            if header["graphml_size"] != len(graphml) or header["seal"] != read_seal(graphml[-128:]):
                logger.info("Graph lookup index %s describes another version of the graph; ignoring it",
                            index_path)
                return None
            start = len(_MAGIC) + 8 + length
            return cls(graphml, index, header, start + -start % 8)
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("Ignoring unreadable graph lookup index %s (%s)", index_path, exc)
            return None

    def __len__(self) -> int:
        return len(self._node_hash)

    def _name(self, slot: int) -> str:
        start, end = self._name_start[slot], self._name_start[slot + 1]
        return self._names[start:end].tobytes().decode("utf-8")

    def _slot(self, name: str) -> Optional[int]:
        wanted = _hash(name)
        slot = int(np.searchsorted(self._node_hash, np.uint64(wanted)))
        while slot < len(self._node_hash) and int(self._node_hash[slot]) == wanted:
            if self._name(slot) == name:
                return slot
            slot += 1
        return None

    def _edge_slot(self, a: str, b: str) -> Optional[int]:
        ends = self._slot(a), self._slot(b)
        if ends[0] is None or ends[1] is None:
            return None
        wanted = np.uint64((min(ends) << 32) | max(ends))
        slot = int(np.searchsorted(self._edge_key, wanted))
        return slot if slot < len(self._edge_key) and self._edge_key[slot] == wanted else None

    def _element(self, offset: Any, length: Any) -> dict[str, Any]:
        return element_data(self.graphml[int(offset):int(offset) + int(length)], self._keys)

    def has_node(self, name: str) -> bool:
        return self._slot(name) is not None

    def node(self, name: str) -> Optional[dict[str, Any]]:
        slot = self._slot(name)
        return None if slot is None else self._element(self._node_offset[slot], self._node_length[slot])

    def degree(self, name: str) -> int:
        slot = self._slot(name)
        return 0 if slot is None else int(self._node_degree[slot])

    def node_edges(self, name: str) -> Optional[list[tuple[str, str]]]:
        """``graph.edges(name)`` of the fully parsed graph, in the same order."""
        slot = self._slot(name)
        if slot is None:
            return None
        start, end = self._neighbour_start[slot], self._neighbour_start[slot + 1]
        return [(name, self._name(int(other))) for other in self._neighbours[start:end]]

    def has_edge(self, a: str, b: str) -> bool:
        return self._edge_slot(a, b) is not None

    def edge(self, a: str, b: str) -> Optional[dict[str, Any]]:
        slot = self._edge_slot(a, b)
        return None if slot is None else self._element(self._edge_offset[slot], self._edge_length[slot])
