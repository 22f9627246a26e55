"""Community detection over any graph store: incremental hierarchical Leiden and the community schema.

Works through the graph contract only (``get_nodes_attributes``, ``get_edges_attributes``, ``get_adjacency``,
and the ``ClusterMemberships`` capability: ``update_node_clusters``, graph attributes...), so every
backend that declares it gets the same communities.
A node's memberships live in its ``clusters`` attribute, as nano-graphrag keeps them:
JSON ``[{"level": 0, "cluster": 7}, {"level": 1, "cluster": 12}, ...]``.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Collection, Iterable, Optional

from graphrag.schema import GRAPH_FIELD_SEP, CommunitySchema, edge_key
from graphrag.storage.capabilities import ClusterMemberships

from .clustering_nearby import paths_near
from .leiden_paths import community_paths, membership_path, read_memberships

logger = logging.getLogger(__name__)

# Graph attribute: communities the incremental update split, and their size before
# (see leiden_paths.place_incrementally).
SPLIT_ATTRIBUTE = "split_communities"
# Graph attribute: the settings the stored memberships were made with. Reading only around the
# touched nodes keeps every other component as stored, which is right only under the same settings.
SETTINGS_ATTRIBUTE = "clustering_settings"

# A write touching more nodes than this (a large insert) is clustered over the whole graph
# directly: reading around that many nodes costs more than one pass over everything.
NEAR_AT_MOST = 1000


async def cluster_graph(graph: ClusterMemberships, algorithm: str = "leiden", full: bool = False,
                        touched: Optional[Collection[str]] = None,
                        were_in: Optional[Collection[str]] = None) -> Optional[set[str]]:
    """Assign every node that has an edge to a community at each level. Returns the communities
    a node joined or left after a small write (``touched`` given, at most ``NEAR_AT_MOST``
    nodes, the settings unchanged), else None.

    Large components are updated in place (see :func:`community_paths`), so one
    document changes only the communities it touches; ``full=True`` re-runs Leiden
    over every component from scratch, keeping ids where membership overlaps.
    ``touched``: the nodes a write changed (with the edges at them), when only those did;
    then only the graph around them is read (``operators/clustering_nearby.py``), for the
    same memberships, where that can be proven (else the whole graph is, as without it);
    ``were_in``: the communities those nodes were in before the write, which that proof needs
    when the write deleted nodes while some communities are split.
    """
    if algorithm != "leiden":
        raise ValueError(f"unknown graph clustering algorithm {algorithm!r}; only 'leiden' is available")
    if not isinstance(graph, ClusterMemberships):
        raise NotImplementedError(f"{type(graph).__name__} declares no ClusterMemberships (storage/capabilities.py): the "
                                  "engine cannot keep communities in it; give it clustering() and community_schema()")
    config = graph.global_config
    split_parents = {int(k): v for k, v in json.loads(await graph.get_graph_attribute(SPLIT_ATTRIBUTE) or "{}").items()}
    settings = json.dumps([config.max_graph_cluster_size, config.graph_cluster_seed, config.exact_clustering_below])
    same_settings = await graph.get_graph_attribute(SETTINGS_ATTRIBUTE) == settings
    small_write = touched is not None and not full and len(touched) <= NEAR_AT_MOST and same_settings
    if small_write:
        splits = dict(split_parents)
        changes = await paths_near(graph, set(touched), splits, max_cluster_size=config.max_graph_cluster_size,
                                   seed=config.graph_cluster_seed, exact_below=config.exact_clustering_below,
                                   were_in=were_in)
        if changes is not None:
            # Every community named here still has members: only a deletion could take one
            # away, and paths_near leaves a split one losing that many to the whole graph.
            await graph.set_graph_attribute(SPLIT_ATTRIBUTE, json.dumps(
                {str(k): v for k, v in sorted(splits.items())}))
            moved = await communities_of(graph, changes)
            moved.update(str(c) for raw in changes.values() for c in membership_path("", raw) or ())
            await graph.update_node_clusters(changes)
            logger.info("Clustered around %d touched nodes: %d memberships changed", len(touched), len(changes))
            return moved
    stored = await graph.get_nodes_attributes(("clusters",))
    old_paths = {
        node: [c["cluster"] for c in sorted(clusters, key=lambda c: c["level"])]
        for node, clusters in read_memberships(stored).items()
    }
    adjacency = await graph.get_adjacency()

    def run() -> dict[str, list[int]]:
        return community_paths(adjacency, old_paths, config.max_graph_cluster_size,
                               config.graph_cluster_seed, exact_below=None if full else config.exact_clustering_below,
                               split_parents=split_parents)

    # In a worker thread, so that LLM calls in flight (description summaries) are served
    # meanwhile. They only replace attribute values of existing nodes and edges, which
    # neither resizes the adjacency (it may be the store's live one) nor changes weights.
    paths = await asyncio.to_thread(run)
    present = {c for p in paths.values() for c in p}
    await graph.set_graph_attribute(SPLIT_ATTRIBUTE, json.dumps(
        {str(k): v for k, v in sorted(split_parents.items()) if k in present}))
    if not same_settings:
        await graph.set_graph_attribute(SETTINGS_ATTRIBUTE, settings)
    # The members of a community share its path: each distinct path is written out once.
    texts: dict[tuple[int, ...], str] = {}
    clusters = {}
    for node, path in paths.items():
        key = tuple(path)
        text = texts.get(key)
        if text is None:
            text = texts[key] = json.dumps([{"level": level, "cluster": cluster} for level, cluster in enumerate(path)])
        clusters[node] = text
    # Most memberships come out as they were: a database rewrites only the others.
    changes = {node: clusters.get(node, "") for node, data in stored
               if (data.get("clusters") or "") != clusters.get(node, "")}
    await graph.update_node_clusters(changes)
    logger.info("Clustered %d nodes into %d communities (%s)", len(paths), len(present),
                "full" if full else "incremental")
    if not small_write:  # a large write or new settings change most communities: read them all
        return None
    # A small write the nearby read could not settle: a community no member joined or left is
    # still as it was (the same set paths_near's answer gives), so the caller need not read it.
    return {str(c) for node in changes for path in (old_paths.get(node), paths.get(node)) for c in path or ()}


def community_ids(nodes: Iterable[tuple[str, dict]]) -> set[str]:
    """The communities these ``(name, data)`` nodes are in, by their ``clusters`` attribute."""
    return {str(c["cluster"]) for clusters in read_memberships(list(nodes)).values() for c in clusters}


async def communities_of(graph: ClusterMemberships, nodes: Collection[str]) -> set[str]:
    """The communities these nodes are in, as stored."""
    return community_ids(await graph.get_nodes_attributes_of(sorted(nodes), ("clusters",)))


async def cluster_after_write(graph: ClusterMemberships, touched: Collection[str], were_in: set[str],
                              algorithm: str = "leiden") -> tuple[dict[str, CommunitySchema], Optional[set[str]]]:
    """Cluster after a write that changed only the nodes ``touched`` (which were in the
    communities ``were_in`` before it), and return the schema of the communities that may have
    changed with which those are; (every community's schema, None) when that is not known.

    A community none of whose members was touched or moved has the same nodes, edges and
    chunks as before, so only the others are read: a small write into a large index reads
    a part of it proportional to what it changed.
    """
    if _default(graph, "clustering"):
        moved = await cluster_graph(graph, algorithm, touched=touched, were_in=were_in)
    else:  # a class with its own clustering: told nothing of what was touched
        await graph.clustering(algorithm)
        moved = None
    if moved is None or not _default(graph, "community_schema"):
        return await graph.community_schema(), None
    changed = moved | were_in | await communities_of(graph, touched)
    return await graph.community_schema(only=changed), changed


def _default(graph: ClusterMemberships, method: str) -> bool:
    """Whether ``graph`` uses the contract's own ``method`` (a nano-graphrag storage class may
    bring its own clustering and schema)."""
    return getattr(getattr(graph, method), "engine_default", False)


async def community_schema(graph: ClusterMemberships, only: Optional[Collection[str]] = None
                           ) -> dict[str, CommunitySchema]:
    """Each community's level, nodes, internal edges, source chunks and sub-communities; with
    ``only``, just those communities, reading only their members and the edges at them (a
    community with no members left is not there). Occurrence is relative to the largest
    community read (see ``operators/community_index.py``)."""
    results: dict[str, dict[str, Any]] = {}
    if only is None:
        nodes = await graph.get_nodes_attributes(("clusters", "source_id"))
    else:
        wanted = sorted({int(c) for c in only})
        candidates = [node for node, _ in await graph.nodes_in_clusters(wanted)]
        nodes = await graph.get_nodes_attributes_of(candidates, ("clusters", "source_id"))
    memberships = read_memberships(nodes)
    if only is not None:  # a member by its memberships as read now, each parsed once
        nodes = [(node, data) for node, data in nodes
                 if not {str(c["cluster"]) for c in memberships.get(node) or ()}.isdisjoint(only)]
        memberships = {node: memberships[node] for node, _ in nodes}
    for node, data in nodes:
        clusters = memberships.get(node)
        if not clusters:
            continue
        chunk_ids = [c for c in str(data.get("source_id", "")).split(GRAPH_FIELD_SEP) if c]
        ordered = sorted(clusters, key=lambda c: c["level"])
        for depth, c in enumerate(ordered):
            key = str(c["cluster"])
            if only is not None and key not in only:
                continue
            entry = results.setdefault(
                key,
                {"level": c["level"], "title": f"Cluster {key}", "nodes": set(), "edges": set(),
                 "chunk_ids": set(), "sub_communities": set()},
            )
            entry["nodes"].add(node)
            entry["chunk_ids"].update(chunk_ids)
            if depth + 1 < len(ordered):
                entry["sub_communities"].add(str(ordered[depth + 1]["cluster"]))
    # One pass over the edges: an edge is internal to each community both ends share. (Paths
    # as tuples of strings, which the collector stops tracking: thousands of lists living
    # through the stage would reach its oldest generation and bring on a full collection.)
    paths = {node: tuple([str(c["cluster"]) for c in sorted(clusters, key=lambda c: c["level"])])
             for node, clusters in memberships.items()}
    edges = (await graph.get_edges_attributes(()) if only is None
             else await graph.get_edges_at([node for node, _ in nodes], ()))
    for a, b, _ in edges:
        path_a, path_b = paths.get(a), paths.get(b)
        if path_a and path_b:
            pair = edge_key(a, b)
            for community_a, community_b in zip(path_a, path_b):
                if community_a == community_b and community_a in results:
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
