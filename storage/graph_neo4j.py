"""The graph in a database speaking Cypher over Bolt (Neo4j, FalkorDB, Memgraph), through the
official ``neo4j`` driver.

A workspace's graph is the nodes of one label (``graphrag_<workspace>_<namespace>``, the
entity name in ``_id``, indexed) and ``RELATED`` relationships between them, each undirected
edge stored once from its smaller end to its larger; graph attributes are nodes of a second
label. Labels are built from validated names; every value travels as a query parameter.

The transaction contract: a write is kept in memory (:class:`PendingGraph`, over
``db_common.PendingRecords``), every read
answers through it, and ``index_commit_callback`` applies it in one driver transaction of
batched ``UNWIND`` statements; an abort drops it. Neo4j makes that one transaction atomic;
FalkorDB runs each statement atomically but has no multi-statement transactions over Bolt,
so there a crash in the middle of the commit's few statements can leave part of it.

The Cypher used is what Neo4j and FalkorDB both accept (no ``shortestPath``, no
``IF NOT EXISTS`` that FalkorDB rejects: index creation tries each dialect in turn).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, TypeVar, Union, cast

from graphrag.config import GraphRAGConfig
from graphrag.errors import StorageError, StoreUnavailableError

from .base import CHANGE_ATTRIBUTE, BaseGraphStorage, ClusterMemberships, PreparedWrite
from .db_common import PendingRecords, require_extra, validated_name, workspace_of

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

logger = logging.getLogger(__name__)

J = TypeVar("J", bound="JSONValue")

URI_ENV, USER_ENV, PASSWORD_ENV, DATABASE_ENV = (
    "GRAPHRAG_NEO4J_URI", "GRAPHRAG_NEO4J_USER", "GRAPHRAG_NEO4J_PASSWORD", "GRAPHRAG_NEO4J_DATABASE")
# Bytes of rows per UNWIND statement. FalkorDB's Bolt listener (4.16) crashes on a message
# over about 4 KB, so statements stay under that and longer strings are sent in pieces.
MESSAGE_BUDGET = 3000
PIECE = 240  # characters of a long string per statement (at most 12 bytes each as \\u escapes)
_PROPERTY_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Pair = tuple[str, str]


def _ends(a: str, b: str) -> Pair:
    return (a, b) if a <= b else (b, a)


def _size(value: JSONValue) -> int:
    return len(json.dumps(value))  # as ASCII escapes: the larger of the two forms sent


def _batches(rows: list) -> Iterable[list]:
    """``rows`` in consecutive batches of at most ``MESSAGE_BUDGET`` bytes (a larger row alone)."""
    batch: list = []
    size = 0
    for row in rows:
        row_size = _size(row)
        if batch and size + row_size > MESSAGE_BUDGET:
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += row_size
    if batch:
        yield batch


def _mapped(value: JSONValue, strings: Callable[[str], str]) -> JSONValue:
    if isinstance(value, str):
        return strings(value)
    if isinstance(value, dict):
        return {k: _mapped(v, strings) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mapped(v, strings) for v in value]
    return value


def _escaped(value: J) -> J:
    """Strings as FalkorDB's Bolt listener needs them (see ``_escapes_strings``): stored as ASCII
    (``\\u`` escapes, per character, so pieces of a string concatenate to the whole), then
    escaped for the quoted literal the listener splices them into."""
    return cast(J, _mapped(value, lambda s: json.dumps(s)[1:-1].replace("\\", "\\\\").replace("'", "\\'")))


def _unescaped(value: J) -> J:
    # Stored strings are JSON string bodies: one without a backslash is its own value (most are).
    return cast(J, _mapped(value, lambda s: json.loads(f'"{s}"') if "\\" in s else s))  # same shape


def _split_long_strings(data: dict) -> tuple[dict, list[tuple[str, str]]]:
    """``data`` with each long string cut to its first piece, and the (key, piece) appends that
    rebuild them (keys must be plain identifiers: they are written into the statement)."""
    head, rest = dict(data), []
    for key, value in data.items():
        if isinstance(value, str) and len(value) > PIECE:
            if not _PROPERTY_KEY.fullmatch(key):
                raise StorageError(f"attribute name {key!r} cannot hold a value this long in the graph store")
            head[key] = value[:PIECE]
            rest += [(key, value[i : i + PIECE]) for i in range(PIECE, len(value), PIECE)]
    return head, rest


class PendingGraph:
    """A write not yet committed: what it changed, read back over what is stored (nodes and
    edges each a :class:`PendingRecords`). ``wiped`` nodes were deleted in this write, so none
    of their stored edges count."""

    def __init__(self) -> None:
        self.nodes: PendingRecords[str] = PendingRecords()
        self.edges: PendingRecords[Pair] = PendingRecords()
        self.edges_at: dict[str, set[Pair]] = {}
        self.wiped: set[str] = set()
        self.attributes: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self.nodes or self.edges or self.attributes)

    def upsert_node(self, node: str, data: dict) -> None:
        self.nodes.upsert(node, data)

    def delete_node(self, node: str) -> None:
        self.nodes.delete(node)
        self.wiped.add(node)
        for pair in self.edges_at.pop(node, set()):
            self.edges.delete(pair)

    def upsert_edge(self, pair: Pair, data: dict) -> None:
        for node in pair:
            if self.nodes.entries.get(node) is None:  # an edge's ends exist
                self.nodes.upsert(node, {})
            self.edges_at.setdefault(node, set()).add(pair)
        self.edges.upsert(pair, data, replace_stored=pair[0] in self.wiped or pair[1] in self.wiped)

    def delete_edge(self, pair: Pair) -> None:
        self.edges.delete(pair)
        for node in pair:
            self.edges_at.setdefault(node, set()).add(pair)

    def keeps_edges_at(self, node: str) -> bool:
        """Whether the node's stored edges are all it has: no edge at it changed, no node deleted."""
        return not self.wiped and node not in self.edges_at

    def node(self, node: str, stored: Optional[dict]) -> Optional[dict]:
        return self.nodes.read(node, stored)

    def edge(self, pair: Pair, stored: Optional[dict]) -> Optional[dict]:
        if pair not in self.edges and (pair[0] in self.wiped or pair[1] in self.wiped):
            return None
        return self.edges.read(pair, stored)

    def neighbours(self, node: str, stored: Iterable[str]) -> list[str]:
        found = {m for m in stored if self.edge(_ends(node, m), {}) is not None}
        for pair in self.edges_at.get(node, ()):
            if self.edges.read(pair, {}) is not None:
                found.add(pair[1] if pair[0] == node else pair[0])
        return sorted(found)


class _Connection:
    """One driver per server, user and database for the whole process, as the driver is meant
    to be used: its pool keeps connections open across calls and event loops (the synchronous
    driver, run off the loop, belongs to none). It also spares FalkorDB's Bolt listener
    (4.16) the closed connections after which it crashes."""

    def __init__(self, uri: str, auth: Optional[tuple[str, str]], database: Optional[str]) -> None:
        require_extra("neo4j", "neo4j")
        from neo4j import GraphDatabase

        self.database = database
        self.driver = GraphDatabase.driver(uri, auth=auth)  # auth is a secret: never logged
        self.indexed: set[str] = set()
        self._escape: Optional[bool] = None
        self._probe_lock = threading.Lock()

    def _escapes_strings(self) -> bool:
        """Whether strings must be escaped: FalkorDB's Bolt listener (4.16) splices string parameters
        into a quoted literal unescaped (``'`` breaks the statement, ``\\b`` becomes a backspace)
        and garbles long non-ASCII strings it returns. It reports itself as Neo4j, so a probe
        tells: does a parameter come back as sent?"""
        with self._probe_lock:
            if self._escape is None:
                probe = "a\\'b"
                with self.driver.session(database=self.database) as session:
                    self._escape = session.run("RETURN $probe", {"probe": probe}).single()[0] != probe
            return self._escape

    def run(self, statements: list[tuple[str, dict]], write: bool = False) -> list[list[Any]]:
        """Run statements in one session (one transaction if ``write``); every read's rows, in order
        (a batched read is one call: one thread hop and one session, not one per batch)."""
        from neo4j.exceptions import ServiceUnavailable, SessionExpired

        try:
            escape = self._escapes_strings()
            if escape:
                statements = [(query, _escaped(params)) for query, params in statements]
            with self.driver.session(database=self.database) as session:
                if not write:
                    rows = []
                    for query, params in statements:
                        result = session.run(query, params)
                        rows += result.values()
                    return _unescaped(rows) if escape else rows
                with session.begin_transaction() as tx:
                    for query, params in statements:
                        tx.run(query, params).consume()
                    tx.commit()
                return []
        except (ServiceUnavailable, SessionExpired, OSError):
            # Names no host or user: the URI may carry credentials.
            raise StoreUnavailableError(f"cannot reach the graph database for the graph store; check {URI_ENV} or "
                                        "storage_options['neo4j_uri']", store="graph") from None


_connections: dict[tuple, _Connection] = {}
_connections_lock = threading.Lock()


def connection_for(config: GraphRAGConfig) -> _Connection:
    options = config.storage_options
    user = options.get("neo4j_user") or os.environ.get(USER_ENV)
    password = options.get("neo4j_password") or os.environ.get(PASSWORD_ENV) or ""
    uri = options.get("neo4j_uri") or os.environ.get(URI_ENV) or "bolt://localhost:7687"
    database = options.get("neo4j_database") or os.environ.get(DATABASE_ENV) or None
    key = (uri, user, hashlib.sha256(password.encode()).hexdigest(), database)
    with _connections_lock:
        if key not in _connections:
            _connections[key] = _Connection(uri, (user, password) if user else None, database)
        return _connections[key]


@dataclass
class Neo4jGraphStorage(BaseGraphStorage, ClusterMemberships):
    def __post_init__(self) -> None:
        self._connection = connection_for(self.global_config)
        suffix = f"{workspace_of(self.global_config)}_{validated_name('namespace', self.namespace)}"
        self._node_label = f"graphrag_{suffix}"
        self._attribute_label = f"graphragattrs_{suffix}"  # no workspace name can make this a node label
        self._pending = PendingGraph()
        self._prepared: Optional[list[tuple[str, dict]]] = None  # the statements prepare_commit built

    # ---------------------------------------------------------------- Cypher

    def _cypher(self, query: str) -> str:
        """``$N`` and ``$A`` in a statement are the node and attribute labels (no parameter is so named)."""
        return query.replace("$N", f"`{self._node_label}`").replace("$A", f"`{self._attribute_label}`")

    async def reachable(self) -> None:
        await asyncio.to_thread(self._connection.run, [("RETURN 1", {})])

    async def _run(self, query: str, **params: Any) -> list[list[Any]]:
        """Rows of one read; a statement over ``$rows`` runs once per batch of them."""
        await self._ensure_indexes()
        if "rows" not in params:
            return await asyncio.to_thread(self._connection.run, [(self._cypher(query), params)])
        rows = params.pop("rows")
        if not rows:
            return []
        return await asyncio.to_thread(self._connection.run, [
            (self._cypher(query), {**params, "rows": batch}) for batch in _batches(rows)])

    async def _ensure_indexes(self) -> None:
        """An index on entity names and attribute names, created once per process. Neo4j takes
        ``IF NOT EXISTS``; FalkorDB only the bare form (an error if it exists); Memgraph its own."""
        if self._node_label in self._connection.indexed:
            return
        from neo4j.exceptions import Neo4jError

        for label, key in ((self._node_label, "_id"), (self._attribute_label, "name")):
            for statement in (f"CREATE INDEX IF NOT EXISTS FOR (n:`{label}`) ON (n.{key})",
                              f"CREATE INDEX FOR (n:`{label}`) ON (n.{key})",
                              f"CREATE INDEX ON :`{label}`({key})"):
                try:
                    await asyncio.to_thread(self._connection.run, [(statement, {})])
                    break
                except Neo4jError:
                    continue  # another dialect, or the index exists already
        self._connection.indexed.add(self._node_label)  # not before: a server down meanwhile is asked again

    # ---------------------------------------------------------------- stored reads

    async def _stored_nodes(self, ids: list[str]) -> dict[str, dict]:
        rows = await self._run("UNWIND $rows AS id MATCH (n:$N {_id: id}) RETURN id, properties(n)", rows=ids)
        return {id: _attributes(props) for id, props in rows}

    async def _stored_neighbours(self, ids: list[str]) -> dict[str, set[str]]:
        # One direction per statement: FalkorDB answers an undirected pattern over many rows
        # ~10x slower than the two directed ones.
        found: dict[str, set[str]] = {n: set() for n in ids}
        if not ids:
            return found
        await self._ensure_indexes()
        statements = [(self._cypher(query), {"rows": batch}) for query in (
            "UNWIND $rows AS id MATCH (n:$N {_id: id})-[:RELATED]->(m:$N) RETURN id, m._id",
            "UNWIND $rows AS id MATCH (m:$N)-[:RELATED]->(n:$N {_id: id}) RETURN id, m._id",
        ) for batch in _batches(ids)]
        for node, other in await asyncio.to_thread(self._connection.run, statements):
            found[node].add(other)
        return found

    async def _stored_edges(self, pairs: list[Pair]) -> dict[Pair, dict]:
        # The far end is matched by a filter after the traversal: FalkorDB does not look up
        # both ends by index from one UNWIND row (slower per pair).
        rows = await self._run("UNWIND $rows AS p MATCH (a:$N {_id: p[0]})-[r:RELATED]->(b:$N) WHERE b._id = p[1] "
                               "RETURN a._id, b._id, properties(r)", rows=[list(p) for p in pairs])
        return {(a, b): props for a, b, props in rows}

    # ---------------------------------------------------------------- reads (through the write)

    async def has_node(self, node_id: str) -> bool:
        return await self.get_node(node_id) is not None

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        return await self.get_edge(source_node_id, target_node_id) is not None

    async def get_node(self, node_id: str) -> Union[dict, None]:
        return (await self.get_nodes_batch([node_id]))[0]

    async def get_nodes_batch(self, node_ids: list[str]) -> list[Union[dict, None]]:
        if not node_ids:
            return []
        stored = await self._stored_nodes(list(dict.fromkeys(node_ids)))
        return [self._pending.node(n, stored.get(n)) for n in node_ids]

    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        return (await self.get_edges_batch([(source_node_id, target_node_id)]))[0]

    async def get_edges_batch(self, pairs: list[tuple[str, str]]) -> list[Union[dict, None]]:
        if not pairs:
            return []
        ends = [_ends(a, b) for a, b in pairs]
        stored = await self._stored_edges(list(dict.fromkeys(ends)))
        return [self._pending.edge(e, stored.get(e)) for e in ends]

    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        if not await self.has_node(source_node_id):
            return None
        return (await self.get_nodes_edges_batch([source_node_id]))[0]

    async def get_nodes_edges_batch(self, node_ids: list[str]) -> list[list[tuple[str, str]]]:
        if not node_ids:
            return []
        unique = list(dict.fromkeys(node_ids))
        stored = await self._stored_neighbours([n for n in unique if n not in self._pending.wiped])
        edges = {n: [(n, m) for m in self._pending.neighbours(n, stored.get(n, ()))] for n in unique}
        return [edges[n] for n in node_ids]

    async def node_degree(self, node_id: str) -> int:
        return (await self.node_degrees_batch([node_id]))[0]

    async def node_degrees_batch(self, node_ids: list[str]) -> list[int]:
        if not node_ids:
            return []
        unique = list(dict.fromkeys(node_ids))
        # Counted by the server, except where the write changed edges (their lists are merged).
        counted = [n for n in unique if self._pending.keeps_edges_at(n)]
        degrees = dict(await self._run("UNWIND $rows AS id MATCH (n:$N {_id: id})-[r:RELATED]-() RETURN id, count(r)",
                                       rows=counted))
        changed = [n for n in unique if not self._pending.keeps_edges_at(n)]
        degrees.update((n, len(edges)) for n, edges in zip(changed, await self.get_nodes_edges_batch(changed)))
        return [degrees.get(n, 0) for n in node_ids]

    async def get_all_nodes(self) -> list[tuple[str, dict]]:
        stored = {id: _attributes(props) for id, props in await self._run("MATCH (n:$N) RETURN n._id, properties(n)")}
        names = list(stored) + [n for n in self._pending.nodes.entries if n not in stored]
        return [(n, data) for n in names if (data := self._pending.node(n, stored.get(n))) is not None]

    async def get_all_edges(self) -> list[tuple[str, str, dict]]:
        rows = await self._run("MATCH (a:$N)-[r:RELATED]->(b:$N) RETURN a._id, b._id, properties(r)")
        stored = {(a, b): props for a, b, props in rows}
        pairs = list(stored) + [p for p in self._pending.edges.entries if p not in stored]
        return [(a, b, data) for a, b in pairs if (data := self._pending.edge((a, b), stored.get((a, b)))) is not None]

    async def get_nodes_attributes(self, names: tuple[str, ...]) -> list[tuple[str, dict]]:
        """Only the named properties travel (clustering reads no descriptions)."""
        rows = await self._run(f"MATCH (n:$N) RETURN n._id, {_projection('n', names)}")
        stored = {node: _present(names, values) for node, values in rows}
        nodes = list(stored) + [n for n in self._pending.nodes.entries if n not in stored]
        return [(n, {k: v for k, v in data.items() if k in names}) for n in nodes
                if (data := self._pending.node(n, stored.get(n))) is not None]

    async def nodes_in_clusters(self, cluster_ids: list[int]) -> list[tuple[str, dict]]:
        """The server keeps the nodes whose memberships text names one of the communities (as
        the clustering writes it, JSON with or without spaces; callers parse what comes back),
        so only their members travel, not every node's memberships; this write's nodes are
        read back over them."""
        if not cluster_ids:
            return []
        texts = [f'"cluster":{gap}{int(i)}}}' for i in cluster_ids for gap in ("", " ")]
        rows = await self._run("MATCH (n:$N) WHERE any(t IN $texts WHERE n.clusters CONTAINS t) "
                               "RETURN n._id, n.clusters", texts=texts)
        stored = {node: {"clusters": clusters} for node, clusters in rows}
        nodes = list(stored) + [n for n in self._pending.nodes.entries if n not in stored]
        return [(n, {"clusters": data["clusters"]}) for n in nodes
                if (data := self._pending.node(n, stored.get(n))) is not None and data.get("clusters")]

    async def get_edges_attributes(self, names: tuple[str, ...]) -> list[tuple[str, str, dict]]:
        rows = await self._run(f"MATCH (a:$N)-[r:RELATED]->(b:$N) RETURN a._id, b._id, {_projection('r', names)}")
        stored = {(a, b): _present(names, values) for a, b, values in rows}
        pairs = list(stored) + [p for p in self._pending.edges.entries if p not in stored]
        return [(a, b, {k: v for k, v in data.items() if k in names}) for a, b in pairs
                if (data := self._pending.edge((a, b), stored.get((a, b)))) is not None]

    async def count_nodes(self) -> int:
        if self._pending:
            return len(await self.get_all_nodes())
        return (await self._run("MATCH (n:$N) RETURN count(n)"))[0][0]

    async def count_edges(self) -> int:
        if self._pending:
            return len(await self.get_all_edges())
        return (await self._run("MATCH (:$N)-[r:RELATED]->(:$N) RETURN count(r)"))[0][0]

    async def get_graph_attribute(self, name: str) -> Optional[str]:
        if name in self._pending.attributes:
            return self._pending.attributes[name]
        rows = await self._run("MATCH (g:$A {name: $name}) RETURN g.value", name=name)
        return rows[0][0] if rows else None

    # ---------------------------------------------------------------- writes (kept until the commit)

    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        self._pending.upsert_node(node_id, {k: v for k, v in node_data.items() if k != "_id"})

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        self._pending.upsert_edge(_ends(source_node_id, target_node_id), dict(edge_data))

    async def delete_node(self, node_id: str) -> None:
        self._pending.delete_node(node_id)

    async def delete_edge(self, source_node_id: str, target_node_id: str) -> None:
        self._pending.delete_edge(_ends(source_node_id, target_node_id))

    async def set_node_clusters(self, clusters: dict[str, str]) -> None:
        """Only the memberships that change are written (a re-clustering mostly keeps them)."""
        for node, data in await self.get_nodes_attributes(("clusters",)):
            wanted = clusters.get(node, "")
            if (data.get("clusters") or "") != wanted:
                await self.upsert_node(node, {"clusters": wanted})

    async def update_node_clusters(self, changes: dict[str, str]) -> None:
        for node, value in changes.items():
            await self.upsert_node(node, {"clusters": value})

    async def set_graph_attribute(self, name: str, value: str) -> None:
        self._pending.attributes[name] = value

    async def change_token(self) -> Optional[str]:
        return await self.get_graph_attribute(CHANGE_ATTRIBUTE)

    async def prepare_commit(self, commit_id: str) -> Optional[PreparedWrite]:
        """The write's statements as a redo record: FalkorDB has no multi-statement transaction,
        so a commit killed midway is finished by running them again (they give the same graph
        when run twice: deletions, then merges that set values, long strings from their head)."""
        self._prepared = self._statements(self._pending) if self._pending else None
        return PreparedWrite(redo=json.dumps(self._prepared).encode("utf-8")) if self._prepared else None

    async def index_commit_callback(self) -> None:
        """Apply the write in one transaction: deletions first, then nodes, edges, attributes."""
        pending, self._pending = self._pending, PendingGraph()
        statements, self._prepared = self._prepared, None
        if not pending:
            return
        await self._ensure_indexes()
        await asyncio.to_thread(self._connection.run, statements or self._statements(pending), True)

    def finish_commit(self, commit_id: str, redo: Optional[bytes]) -> bool:
        if redo is not None:
            self._connection.run([tuple(statement) for statement in json.loads(redo)], True)  # type: ignore[misc]
        return True

    def _statements(self, pending: PendingGraph) -> list[tuple[str, dict]]:
        """The statements that apply ``pending``, in order."""
        pending.attributes[CHANGE_ATTRIBUTE] = uuid.uuid4().hex
        gone = [list(p) for p in pending.edges.gone() if p[0] not in pending.wiped and p[1] not in pending.wiped]
        appends: list[tuple[str, dict]] = []  # the rest of long strings, after their first piece

        def cut(data: dict, match: str, **where: str) -> dict:
            head, rest = _split_long_strings(data)
            appends.extend((f"{match} SET x.`{key}` = x.`{key}` + $piece", {**where, "piece": piece})
                           for key, piece in rest)
            return head

        nodes = [{"id": n, "data": cut(data, "MATCH (x:$N {_id: $id})", id=n)}
                 for n, _, data in pending.nodes.written()]
        edges = [{"a": a, "b": b, "data": cut(data, "MATCH (:$N {_id: $a})-[x:RELATED]->(:$N {_id: $b})", a=a, b=b)}
                 for (a, b), _, data in pending.edges.written()]
        attributes = [{"name": name, "value": cut({"value": value}, "MATCH (x:$A {name: $name})", name=name)["value"]}
                      for name, value in pending.attributes.items()]
        statements = [
            ("UNWIND $rows AS id MATCH (n:$N {_id: id}) DETACH DELETE n", sorted(pending.wiped)),
            ("UNWIND $rows AS p MATCH (:$N {_id: p[0]})-[r:RELATED]->(:$N {_id: p[1]}) DELETE r", gone),
            ("UNWIND $rows AS row MERGE (n:$N {_id: row.id}) SET n += row.data", nodes),
            ("UNWIND $rows AS row MATCH (a:$N {_id: row.a}) MATCH (b:$N {_id: row.b}) "
             "MERGE (a)-[r:RELATED]->(b) SET r += row.data", edges),
            ("UNWIND $rows AS row MERGE (g:$A {name: row.name}) SET g.value = row.value", attributes),
        ]
        return [
            *((self._cypher(statement), {"rows": batch}) for statement, rows in statements for batch in _batches(rows)),
            *((self._cypher(statement), params) for statement, params in appends),
        ]

    async def index_abort_callback(self) -> None:
        self._pending = PendingGraph()
        self._prepared = None


def _attributes(properties: dict) -> dict:
    return {k: v for k, v in properties.items() if k != "_id"}


def _projection(variable: str, names: tuple[str, ...]) -> str:
    """A list of the named properties of ``variable`` (names are checked identifiers, written into
    the statement: Cypher takes no property name as a parameter)."""
    for name in names:
        if not _PROPERTY_KEY.fullmatch(name) or name == "_id":
            raise StorageError(f"attribute name {name!r} cannot be read by name from the graph store")
    return "[" + ", ".join(f"{variable}.`{name}`" for name in names) + "]"


def _present(names: tuple[str, ...], values: list) -> dict:
    return {k: v for k, v in zip(names, values) if v is not None}
