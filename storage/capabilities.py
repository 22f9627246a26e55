"""The graph contract's optional capabilities, which a backend declares by subclassing them
(``storage/base.py`` holds the core and re-exports these). Apart from the core so that the
engine's clustering, which the core's default ``clustering()`` runs, can name them without
importing the contract back."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

# What the hybrid walk reads of a graph: every node as ``(name, source_id)`` and every edge's two ends.
WalkLinks = tuple[list[tuple[str, str]], list[tuple[str, str]]]


class GraphAttributes(ABC):
    """Capability: string attributes of the graph itself (clustering keeps its split
    communities and settings there; a database its change token)."""

    @abstractmethod
    async def get_graph_attribute(self, name: str) -> Optional[str]:
        """The attribute, None if never set."""

    @abstractmethod
    async def set_graph_attribute(self, name: str, value: str) -> None:
        ...


class ClusterMemberships(GraphAttributes):
    """Capability: the engine's clustering keeps communities in this graph, a node's in its
    ``clusters`` attribute (``operators/clustering.py``), reading only around the nodes a write
    touched. Every method has a default on the core contract; a database answers each from an
    index. Needs graph attributes."""

    # ``self: Any``: a BaseGraphStorage, whose module (storage/base.py) imports this one.
    async def get_nodes_attributes_of(self: Any, node_ids: list[str], names: tuple[str, ...]
                                      ) -> list[tuple[str, dict]]:
        """``get_nodes_attributes`` for these nodes only (unknown ones are left out)."""
        return [(node, {k: data[k] for k in names if k in data})
                for node, data in zip(node_ids, await self.get_nodes_batch(node_ids)) if data is not None]

    async def get_edges_at(self: Any, node_ids: list[str], names: tuple[str, ...]) -> list[tuple[str, str, dict]]:
        """Every edge at one of these nodes, once, with only the attributes ``names`` it has."""
        pairs = list(dict.fromkeys(tuple(sorted(e)) for edges in await self.get_nodes_edges_batch(node_ids)
                                   for e in edges))
        return [(a, b, {k: data[k] for k in names if k in data})
                for (a, b), data in zip(pairs, await self.get_edges_batch(pairs)) if data is not None]

    async def nodes_in_clusters(self: Any, cluster_ids: list[int]) -> list[tuple[str, dict]]:
        """The nodes whose ``clusters`` attribute names one of these communities, with that
        attribute. May return more nodes (this default returns every node with memberships):
        callers read the memberships themselves."""
        return [(node, data) for node, data in await self.get_nodes_attributes(("clusters",)) if data.get("clusters")]

    async def node_with_highest_cluster(self) -> Optional[list[tuple[str, dict]]]:
        """``[(node, {"clusters": ...})]`` for a node whose memberships name the highest community
        id (``[]`` if no node has any); None when the store cannot tell without reading every
        node's memberships, as this default."""
        return None

    async def set_node_clusters(self: Any, clusters: dict[str, str]) -> None:
        """Set the ``clusters`` attribute of each node in ``clusters``; every other node loses its own."""
        await self.upsert_nodes({node: {"clusters": clusters.get(node, "")}  # upserts merge: "" means none
                                 for node, data in await self.get_nodes_attributes(("clusters",))
                                 if node in clusters or data.get("clusters")})

    async def update_node_clusters(self: Any, changes: dict[str, str]) -> None:
        """Set the ``clusters`` attribute of just these nodes ("": none); every other node keeps
        its own. A database writes only these; this default rewrites them all through
        ``set_node_clusters``, as a whole clustering does."""
        clusters = {node: data["clusters"] for node, data in await self.get_nodes_attributes(("clusters",))
                    if data.get("clusters")}
        clusters.update(changes)
        await self.set_node_clusters({node: value for node, value in clusters.items() if value})


class KeepsWalkLinks(ABC):
    """Capability: a copy of what the hybrid walk reads (:data:`WalkLinks`), cheaper than the
    whole-graph reads it is otherwise built from (the GraphML store writes one at each commit)."""

    @abstractmethod
    async def get_walk_links(self) -> WalkLinks:
        ...
