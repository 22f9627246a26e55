"""The three storage contracts (KV, vector, graph) every backend implements.

Each lists every method the engine calls. The abstract ones are those nano-graphrag's
base classes have, so a storage class written for nano-graphrag still works; every
other method has a default built on them (a batch read loops the single read, a count
lists the keys...), which a backend overrides where it can do better, or raises
``NotImplementedError`` where no default can exist (the engine then cannot use that
feature with that class, e.g. deleting documents from a store that cannot delete).
The graph's optional parts are capabilities a backend declares (see ``BaseGraphStorage``).

The lifecycle and the transaction the engine expects of every store
--------------------------------------------------------------------
A write (insert, delete, recluster) runs under the working dir's writer lock:

1. ``index_start_callback()``: bring the store up to what the last commit holds
   (another process may have committed since this instance read it).
2. Reads and writes through the methods below. Nothing written may become visible
   to other readers yet.
3. ``index_done_callback()``: persist. The engine calls it on every store of the
   write, inside one commit (``Stores.transaction()``); the file stores' files
   appear together at its end, or not at all. Then ``prepare_commit()``: a database
   store says how the commit can be finished or judged after a crash (``PreparedWrite``),
   which the engine writes ahead into the working dir before anything commits.

4. ``index_commit_callback()``: the commit ends; every store's writes become visible
   together. A store that writes through (a database) commits its transaction here;
   stores sharing one database share that transaction, so the first call commits it.

If the write fails anywhere before the commit completes, the engine calls
``index_abort_callback()`` (a database rolls back), abandons the store instances and
opens new ones; those must see the previous commit, whatever the abandoned instances
had written. ``write_ahead()`` may persist early, but only into the commit in progress.
A store holding connections releases them in ``close()`` (the end of a synchronous
call's event loop).

Queries take no lock: ``query_done_callback()`` runs after each; a store may persist
what a query cached (the LLM response cache), never anything of an index.
"""
from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Collection, Generic, Mapping, Optional, TypeVar, Union

from graphrag.config import GraphRAGConfig
from graphrag.schema import CommunitySchema

from .capabilities import ClusterMemberships, GraphAttributes, KeepsWalkLinks, WalkLinks

if TYPE_CHECKING:
    from graphrag.embedding_func import EmbeddingFunc

T = TypeVar("T")
logger = logging.getLogger(__name__)


@dataclass
class StorageNameSpace(ABC):
    namespace: str
    global_config: GraphRAGConfig

    @property
    def working_dir(self) -> str:
        return self.global_config.working_dir

    def path_for(self, filename: str) -> str:
        return os.path.join(self.working_dir, filename)

    async def reachable(self) -> None:
        """Raise ``StoreUnavailableError`` when the server this store lives on does not answer
        (the server's ``/health``); a store of files has no server: nothing to check, nothing read."""

    reachable.checks_nothing = True  # type: ignore[attr-defined]  (a class that overrides it has a server)

    @classmethod
    def options_for(cls, *, read_by_record: bool = False, durable_upserts: bool = False) -> dict[str, Any]:
        """Constructor keywords that suit a store used this way; ``{}`` where the class has none.

        ``read_by_record``: queries read a few records by id (reports, chunks), so opening
        the store should not read all of it. ``durable_upserts``: each upsert must survive
        a killed process before the commit (the LLM response cache: answers paid for).
        """
        return {}

    async def index_start_callback(self) -> None:
        """Called before a write, with the writer lock held: reload what another process committed."""

    async def index_done_callback(self) -> None:
        """Called at the end of a write, inside the commit: persist."""

    async def index_commit_callback(self) -> None:
        """Called once every store of the write is persisted: make the write visible."""

    async def index_abort_callback(self) -> None:
        """Called when the write failed before its commit completed: discard what it wrote."""

    async def query_done_callback(self) -> None:
        """Called after every query."""

    async def close(self) -> None:
        """Release connections opened on the running event loop (a file store holds none)."""

    async def write_ahead(self) -> None:
        """Persist now, into the commit in progress, what the rest of the write will not change
        (so the commit has less left to do); a later change is persisted at the commit."""

    async def prepare_commit(self, commit_id: str) -> Optional["PreparedWrite"]:
        """Called after ``index_done_callback``, before anything commits: how a database store
        finishes this write if the process dies during the commit (see ``PreparedWrite``);
        None for a store with nothing to commit outside the files (a file store, or no change)."""
        return None

    def finish_commit(self, commit_id: str, redo: Optional[bytes]) -> bool:
        """Recovery, in a later process, of a commit whose manifest this store is named in:
        apply ``redo`` again (a store that returned one), or say whether the transaction stamped
        ``commit_id`` committed (one that did not). True when the store holds the write."""
        return True

    def reload_if_changed(self) -> bool:
        """Re-read the store if another process committed since it was read; True if it did.
        A store that reads its backend live (a database) has nothing to do."""
        return False


@dataclass
class PreparedWrite:
    """What ``prepare_commit`` returns for a database store taking part in a commit.

    ``redo``: the whole write as bytes that ``finish_commit`` applies again (a store with no
    transaction, which applies its write at ``index_commit_callback``; applying it twice must
    give the same state). None: the store commits in a transaction that also records
    ``commit_id`` (``index_commit_callback``), which ``finish_commit`` looks for.
    """

    redo: Optional[bytes] = None


def cut_to_fields(record: Any, fields: Collection[str]) -> Any:
    """``record`` with only ``fields``, as ``get_by_ids(..., fields)`` returns it; a value
    that is not a record, as it is."""
    return {k: v for k, v in record.items() if k in fields} if isinstance(record, dict) else record


@dataclass
class BaseKVStorage(StorageNameSpace, Generic[T]):
    @abstractmethod
    async def all_keys(self) -> list[str]:
        ...

    @abstractmethod
    async def get_by_id(self, id: str) -> Optional[T]:
        ...

    @abstractmethod
    async def upsert(self, data: dict[str, T]) -> None:
        """Insert or replace whole records."""

    async def get_by_ids(self, ids: list[str], fields: Optional[set[str]] = None) -> list[Optional[T]]:
        """Records in the order of ``ids`` (None where absent), cut to ``fields`` if given."""
        records = [await self.get_by_id(i) for i in ids]
        if fields is None:
            return records
        return [cut_to_fields(r, fields) if r is not None else None for r in records]

    async def filter_keys(self, keys: list[str]) -> set[str]:
        """The keys not stored yet."""
        return {k for k, r in zip(keys, await self.get_by_ids(keys)) if r is None}

    async def count(self) -> int:
        return len(await self.all_keys())

    async def delete(self, ids: list[str]) -> None:
        """Remove these records; unknown ids are ignored."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete records")

    async def drop(self) -> None:
        """Remove every record."""
        await self.delete(await self.all_keys())


@dataclass
class BaseVectorStorage(StorageNameSpace):
    embedding_func: Optional[EmbeddingFunc] = None
    meta_fields: set[str] = field(default_factory=set)

    @abstractmethod
    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        """The ``top_k`` records nearest ``query``, nearest first: each its ``meta_fields``,
        ``id`` and ``distance`` (a similarity: larger is nearer)."""

    @abstractmethod
    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        """Embed each record's ``content`` and store it with its ``meta_fields``."""

    async def delete(self, ids: list[str]) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot delete vectors")

    async def get_ids(self) -> set[str]:
        """Every stored id (the integrity checks compare them with the graph and KV stores)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its ids")

    async def count(self) -> int:
        return len(await self.get_ids())

    async def drop(self) -> None:
        await self.delete(list(await self.get_ids()))

    @classmethod
    def check_compatible(cls, global_config: GraphRAGConfig, namespace: str, embedding_dim: int) -> None:
        """Refuse, before the store is opened, one built with another embedding model."""

    @classmethod
    def describe_stored(cls, global_config: GraphRAGConfig, namespace: str) -> Optional[dict[str, int]]:
        """``{"vectors": count, "dim": dimension}`` of what is stored, read without an embedding
        function or loading the vectors (``graphrag stats``); None if nothing was ever stored
        or the class cannot tell."""
        return None


async def catch_up_keys(kept: set[str], current: set[str], skip: set[str],
                        delete: Callable[[list[str]], Awaitable[None]], what: str) -> list[str]:
    """Bring a derived store kept only while an option is on (``kept``: its keys) back to the
    keys of what it derives from (``current``), those in ``skip`` apart (this write's own
    changes, which the write applies itself): ``delete`` the records whose source went while
    the option was off, and return, sorted, the keys written meanwhile, to derive again.
    Compares key lists only, so a store already current costs no record read."""
    stale = sorted(kept - current - skip)
    if stale:
        logger.info("Dropping the %s of %d records deleted while they were not kept", what, len(stale))
        await delete(stale)
    missing = sorted(current - kept - skip)
    if missing:
        logger.info("Embedding the %s of %d records written while they were not kept", what, len(missing))
    return missing


# Graph attribute a database graph store sets to a fresh value in every write that changed it
# (see ``BaseGraphStorage.change_token``).
CHANGE_ATTRIBUTE = "last_change"



@dataclass
class BaseGraphStorage(StorageNameSpace):
    """The core graph contract: an undirected graph of named nodes and edges, each with a dict of
    scalar attributes, which every query mode and the insert pipeline read and write.

    ``upsert_*`` merge: the given attributes replace those of the same name, the others
    stay (community memberships survive a node's update). An edge is found from either end.
    Callers read and write in batches (``get_nodes_batch``, ``upsert_nodes``...); the defaults
    loop over the single methods, which a database backend overrides with one round trip.

    What not every graph can do is a capability a backend declares by also subclassing it
    (:class:`GraphAttributes`, :class:`ClusterMemberships`, :class:`KeepsWalkLinks`); callers
    check with :func:`capabilities` or ``isinstance``.
    """

    @abstractmethod
    async def has_node(self, node_id: str) -> bool:
        ...

    @abstractmethod
    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        ...

    @abstractmethod
    async def node_degree(self, node_id: str) -> int:
        """Edges at the node (0 for an unknown node)."""

    @abstractmethod
    async def get_node(self, node_id: str) -> Union[dict, None]:
        ...

    @abstractmethod
    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        ...

    @abstractmethod
    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        """``(node, neighbour)`` per edge at the node; None for an unknown node."""

    @abstractmethod
    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        ...

    @abstractmethod
    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        ...

    # Batches: what callers use.

    async def upsert_nodes(self, nodes: Mapping[str, dict[str, Any]]) -> None:
        """``upsert_node`` for each; a database backend writes them in one statement."""
        for node, data in nodes.items():
            await self.upsert_node(node, data)

    async def upsert_edges(self, edges: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        """``upsert_edge`` for each ``(end, end) -> attributes``."""
        for (a, b), data in edges.items():
            await self.upsert_edge(a, b, data)

    async def get_nodes_batch(self, node_ids: list[str]) -> list[Union[dict, None]]:
        return [await self.get_node(n) for n in node_ids]

    async def get_edges_batch(self, pairs: list[tuple[str, str]]) -> list[Union[dict, None]]:
        return [await self.get_edge(a, b) for a, b in pairs]

    async def node_degrees_batch(self, node_ids: list[str]) -> list[int]:
        return [await self.node_degree(n) for n in node_ids]

    async def edge_degree(self, src_id: str, tgt_id: str) -> int:
        return (await self.edge_degrees_batch([(src_id, tgt_id)]))[0]

    async def edge_degrees_batch(self, pairs: list[tuple[str, str]]) -> list[int]:
        """An edge's rank: its two ends' degrees added (nano-graphrag's), from one batch read."""
        ends = list(dict.fromkeys(n for pair in pairs for n in pair))
        degrees = dict(zip(ends, await self.node_degrees_batch(ends)))
        return [degrees[a] + degrees[b] for a, b in pairs]

    async def get_nodes_edges_batch(self, node_ids: list[str]) -> list[list[tuple[str, str]]]:
        return [await self.get_node_edges(n) or [] for n in node_ids]

    async def delete_node(self, node_id: str) -> None:
        """Remove the node and its edges; an unknown node is ignored."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete nodes")

    async def delete_edge(self, source_node_id: str, target_node_id: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot delete edges")

    # Whole-graph reads: what clustering, the community schema and ``graphrag stats`` need.
    # Callers only read what these return.

    async def get_all_nodes(self) -> list[tuple[str, dict]]:
        raise NotImplementedError(f"{type(self).__name__} cannot list its nodes")

    async def get_all_edges(self) -> list[tuple[str, str, dict]]:
        """Each edge once, as ``(one end, other end, attributes)``."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its edges")

    async def get_nodes_attributes(self, names: tuple[str, ...]) -> list[tuple[str, dict]]:
        """Every node with only the attributes ``names`` it has: what clustering and the community
        schema read of each node, without its description (a database sends less)."""
        return [(node, {k: data[k] for k in names if k in data}) for node, data in await self.get_all_nodes()]

    async def get_edges_attributes(self, names: tuple[str, ...]) -> list[tuple[str, str, dict]]:
        """``get_all_edges`` with only the attributes ``names`` each edge has."""
        return [(a, b, {k: data[k] for k in names if k in data}) for a, b, data in await self.get_all_edges()]

    async def get_adjacency(self) -> Mapping[str, Mapping[str, dict]]:
        """Every node -> {neighbour: edge attributes}, each edge seen from both ends."""
        adjacency: dict[str, dict[str, dict]] = {node: {} for node, _ in await self.get_nodes_attributes(())}
        for a, b, data in await self.get_all_edges():
            adjacency[a][b] = adjacency[b][a] = data
        return adjacency

    async def count_nodes(self) -> int:
        return len(await self.get_all_nodes())

    async def count_edges(self) -> int:
        return len(await self.get_all_edges())

    async def change_token(self) -> Optional[str]:
        """A value that differs after any process committed a change to this graph, for caches
        built from it (the hybrid walk's matrices). None, this default, suits a store whose view
        changes only when this process reloads it (the file store: ``Stores.version`` moves then);
        a database store, read live, returns what its last write recorded (``CHANGE_ATTRIBUTE``)."""
        return None

    # Communities, as nano-graphrag's graph classes have them. These defaults run the engine's
    # clustering (``graphrag.operators.clustering``), which needs :class:`ClusterMemberships`;
    # a class with its own clustering overrides both.

    async def clustering(self, algorithm: str = "leiden", full: bool = False) -> None:
        """Assign communities."""
        from graphrag.operators.clustering import cluster_graph

        await cluster_graph(self, algorithm, full=full)

    clustering.engine_default = True  # type: ignore[attr-defined]  (told apart from a class's own)

    async def community_schema(self, only: Optional[Collection[str]] = None) -> dict[str, CommunitySchema]:
        """Every community's schema, or those of the communities ``only``."""
        from graphrag.operators.clustering import community_schema

        return await community_schema(self, only)

    community_schema.engine_default = True  # type: ignore[attr-defined]


CAPABILITIES: dict[str, type] = {
    "graph_attributes": GraphAttributes,
    "cluster_memberships": ClusterMemberships,
    "walk_links": KeepsWalkLinks,
}


def capabilities(store: object) -> frozenset[str]:
    """The names (keys of :data:`CAPABILITIES`) of the capabilities ``store`` declares."""
    return frozenset(name for name, capability in CAPABILITIES.items() if isinstance(store, capability))


async def walk_links(graph: BaseGraphStorage) -> WalkLinks:
    """What the hybrid walk reads of the whole graph: every node as ``(name, source_id)`` (the
    chunks mentioning it, joined by ``GRAPH_FIELD_SEP``) and every edge's two ends; the store's
    own copy where it keeps one."""
    if isinstance(graph, KeepsWalkLinks):
        return await graph.get_walk_links()
    return await walk_links_from_graph(graph)


async def walk_links_from_graph(graph: BaseGraphStorage) -> WalkLinks:
    """:func:`walk_links` from the core whole-graph reads."""
    nodes = [(n, str(d.get("source_id") or "")) for n, d in await graph.get_nodes_attributes(("source_id",))]
    return nodes, [(a, b) for a, b, _ in await graph.get_edges_attributes(())]
