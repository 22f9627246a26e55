"""What the hybrid walk reads of a GraphML graph, kept beside it so a query need not parse it.

The walk (``operators/walk_graph.py``) needs every node's name and ``source_id`` (the chunks
that mention it) and every edge's two ends: at HotpotQA scale, parsing the whole GraphML for
them took over a second of a process's first local or hybrid query. Every commit writes
them to ``graph_{namespace}.graphml.walk`` beside the GraphML and its lookup index; like
that index, the file names the exact GraphML it was derived from (its seal and size), and
one that does not match is ignored (the graph is then read whole, as before).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from .base import WalkLinks
from .graphml import GraphMLLayout
from .lookup_index import pack, unpack

if TYPE_CHECKING:
    import networkx as nx

_MAGIC = b"graphrag-graph-walk 1\n"


def build_walk_file(graph: nx.Graph, layout: GraphMLLayout) -> bytes:
    """The walk's links of ``graph`` (a networkx graph) as :func:`write_graphml` just wrote it."""
    nodes = graph.nodes
    sources = [str(nodes[name].get("source_id") or "") for name in layout.node_names]
    ends = np.array(layout.edge_ends, dtype="<u4").reshape(-1)
    return pack(_MAGIC, {"seal": layout.seal, "graphml_size": layout.size, "nodes": layout.node_names,
                         "source_ids": sources}, {"edge_ends": ends})


def read_walk_file(path: str, seal: str, graphml_size: int) -> Optional[WalkLinks]:
    """``(nodes as (name, source_id), edges as (end, end))`` from the file at ``path`` if it
    describes the GraphML sealed ``seal``; None otherwise."""
    unpacked = unpack(path, _MAGIC)
    if unpacked is None:
        return None
    header, arrays = unpacked
    names, sources = header.get("nodes"), header.get("source_ids")
    if (header.get("seal") != seal or header.get("graphml_size") != graphml_size or "edge_ends" not in arrays
            or not isinstance(names, list) or not isinstance(sources, list) or len(names) != len(sources)):
        return None
    ends = arrays["edge_ends"].tolist()
    return list(zip(names, sources)), [(names[a], names[b]) for a, b in zip(ends[::2], ends[1::2])]
