"""The graph in PostgreSQL: a node table, an edge table (each undirected edge once, its ends
in sorted order, indexed from both ends for neighbour and degree lookups) and a table of
graph attributes."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from .base import CHANGE_ATTRIBUTE, BaseGraphStorage, ClusterMemberships
from .postgres import PostgresStore, dumps


# Immutable (they read only their argument), as an index expression must be. A regular
# expression rather than a JSON parse: an unreadable value must not fail a write; callers
# parse what they find, as they would have read it whole.
_CLUSTER_REGEX = r"""'"cluster":\s*(\d{1,18})\M'"""
_CLUSTER_FUNCTIONS = [
    "CREATE OR REPLACE FUNCTION graphrag_cluster_ids(clusters text) RETURNS bigint[] "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$ SELECT coalesce(array_agg(m[1]::bigint), "
    f"'{{}}') FROM regexp_matches(clusters, {_CLUSTER_REGEX}, 'g') AS m $$",
    "CREATE OR REPLACE FUNCTION graphrag_max_cluster(clusters text) RETURNS bigint "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$ SELECT max(m[1]::bigint) "
    f"FROM regexp_matches(clusters, {_CLUSTER_REGEX}, 'g') AS m $$",
]


# The attributes named by the first parameter that the row's data has, as one object (or NULL).
_PICK = "(SELECT jsonb_object_agg(n, data->n) FROM unnest(%s::text[]) AS n WHERE data ? n)"


def _ends(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass
class PostgresGraphStorage(PostgresStore, BaseGraphStorage, ClusterMemberships):
    store_kind = "graph"

    def __post_init__(self) -> None:
        self._names = {kind: self.db.table(self.namespace, kind) for kind in ("nodes", "edges", "attrs")}
        self._use_tables(**self._names)
        self._ddl: Optional[list[Any]] = None
        self._changed = False  # this write changed the graph

    async def _ready(self) -> None:
        if self._ddl is None:  # composed once: this runs before every statement
            self._ddl = self._tables_ddl()
        await self.db.ensure_table(self._names["edges"], self._ddl)

    def _tables_ddl(self) -> list[Any]:
        from psycopg import sql

        t = self._tables
        return [
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, data jsonb NOT NULL)").format(t["nodes"]),
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (src text NOT NULL, tgt text NOT NULL, data jsonb NOT NULL, "
                    "PRIMARY KEY (src, tgt))").format(t["edges"]),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (tgt)").format(
                self.db.identifier(self._names["edges"] + "_tgt"), t["edges"]),
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, value text NOT NULL)").format(t["attrs"]),
            # The community ids a node's memberships name (the JSON text nano-graphrag keeps), so
            # that an incremental clustering finds a community's members and the highest id by index.
            *(sql.SQL(statement) for statement in _CLUSTER_FUNCTIONS),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (graphrag_cluster_ids(data->>'clusters'))").format(
                self.db.identifier(self._names["nodes"] + "_clusters"), t["nodes"]),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (graphrag_max_cluster(data->>'clusters'))").format(
                self.db.identifier(self._names["nodes"] + "_max_cluster"), t["nodes"]),
        ]

    # ---------------------------------------------------------------- reads

    async def has_node(self, node_id: str) -> bool:
        return bool(await self._rows("SELECT 1 FROM {nodes} WHERE id = %s", (node_id,)))

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        return bool(await self._rows("SELECT 1 FROM {edges} WHERE src = %s AND tgt = %s",
                                     _ends(source_node_id, target_node_id)))

    async def node_degree(self, node_id: str) -> int:
        return (await self.node_degrees_batch([node_id]))[0]

    async def node_degrees_batch(self, node_ids: list[str]) -> list[int]:
        if not node_ids:
            return []
        rows = await self._rows(
            "SELECT id, count(*) FROM (SELECT src AS id FROM {edges} WHERE src = ANY(%s) "
            "UNION ALL SELECT tgt FROM {edges} WHERE tgt = ANY(%s)) AS ends GROUP BY id", (node_ids, node_ids))
        degrees = dict(rows)
        return [degrees.get(n, 0) for n in node_ids]

    async def get_node(self, node_id: str) -> Union[dict, None]:
        return (await self.get_nodes_batch([node_id]))[0]

    async def get_nodes_batch(self, node_ids: list[str]) -> list[Union[dict, None]]:
        if not node_ids:
            return []
        found = dict(await self._rows("SELECT id, data FROM {nodes} WHERE id = ANY(%s)", (node_ids,)))
        return [found.get(n) for n in node_ids]

    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        return (await self.get_edges_batch([(source_node_id, target_node_id)]))[0]

    async def get_edges_batch(self, pairs: list[tuple[str, str]]) -> list[Union[dict, None]]:
        if not pairs:
            return []
        ends = [_ends(a, b) for a, b in pairs]
        rows = await self._rows(
            "SELECT e.src, e.tgt, e.data FROM {edges} e JOIN unnest(%s::text[], %s::text[]) AS p(src, tgt) "
            "ON e.src = p.src AND e.tgt = p.tgt", ([a for a, _ in ends], [b for _, b in ends]))
        found = {(a, b): data for a, b, data in rows}
        return [found.get(e) for e in ends]

    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        if not await self.has_node(source_node_id):
            return None
        return (await self.get_nodes_edges_batch([source_node_id]))[0]

    async def get_nodes_edges_batch(self, node_ids: list[str]) -> list[list[tuple[str, str]]]:
        if not node_ids:
            return []
        rows = await self._rows("SELECT src, tgt FROM {edges} WHERE src = ANY(%s) UNION "
                                "SELECT src, tgt FROM {edges} WHERE tgt = ANY(%s)", (node_ids, node_ids))
        wanted = set(node_ids)
        edges: dict[str, list[tuple[str, str]]] = {n: [] for n in wanted}
        for a, b in rows:
            if a in wanted:
                edges[a].append((a, b))
            if b in wanted and b != a:
                edges[b].append((b, a))
        return [edges[n] for n in node_ids]

    async def get_all_nodes(self) -> list[tuple[str, dict]]:
        return [(n, data) for n, data in await self._rows("SELECT id, data FROM {nodes}")]

    async def get_all_edges(self) -> list[tuple[str, str, dict]]:
        return [(a, b, data) for a, b, data in await self._rows("SELECT src, tgt, data FROM {edges}")]

    # One JSON object per row with just the attributes asked for (decoding is most of a
    # whole-graph read's cost); none at all when no attribute is asked for.

    async def get_nodes_attributes(self, names: tuple[str, ...]) -> list[tuple[str, dict]]:
        if not names:
            return [(node, {}) for (node,) in await self._rows("SELECT id FROM {nodes}")]
        rows = await self._rows(f"SELECT id, {_PICK} FROM {{nodes}}", (list(names),))
        return [(node, picked or {}) for node, picked in rows]

    async def get_edges_attributes(self, names: tuple[str, ...]) -> list[tuple[str, str, dict]]:
        if not names:
            return [(a, b, {}) for a, b in await self._rows("SELECT src, tgt FROM {edges}")]
        rows = await self._rows(f"SELECT src, tgt, {_PICK} FROM {{edges}}", (list(names),))
        return [(a, b, picked or {}) for a, b, picked in rows]

    async def get_nodes_attributes_of(self, node_ids: list[str], names: tuple[str, ...]) -> list[tuple[str, dict]]:
        if not node_ids:
            return []
        rows = await self._rows(f"SELECT id, {_PICK} FROM {{nodes}} WHERE id = ANY(%s)", (list(names), list(node_ids)))
        return [(node, picked or {}) for node, picked in rows]

    async def get_edges_at(self, node_ids: list[str], names: tuple[str, ...]) -> list[tuple[str, str, dict]]:
        if not node_ids:
            return []
        rows = await self._rows(f"SELECT src, tgt, {_PICK} FROM {{edges}} WHERE src = ANY(%s) OR tgt = ANY(%s)",
                                (list(names), list(node_ids), list(node_ids)))
        return [(a, b, picked or {}) for a, b, picked in rows]

    async def nodes_in_clusters(self, cluster_ids: list[int]) -> list[tuple[str, dict]]:
        if not cluster_ids:
            return []
        rows = await self._rows("SELECT id, data->'clusters' FROM {nodes} "
                                "WHERE graphrag_cluster_ids(data->>'clusters') && %s::bigint[]", (list(cluster_ids),))
        return [(node, {"clusters": clusters}) for node, clusters in rows]

    async def node_with_highest_cluster(self) -> Optional[list[tuple[str, dict]]]:
        rows = await self._rows("SELECT id, data->'clusters' FROM {nodes} WHERE graphrag_max_cluster(data->>'clusters') "
                                "IS NOT NULL ORDER BY graphrag_max_cluster(data->>'clusters') DESC LIMIT 1")
        return [(node, {"clusters": clusters}) for node, clusters in rows]

    async def count_nodes(self) -> int:
        return (await self._rows("SELECT count(*) FROM {nodes}"))[0][0]

    async def count_edges(self) -> int:
        return (await self._rows("SELECT count(*) FROM {edges}"))[0][0]

    async def get_graph_attribute(self, name: str) -> Optional[str]:
        rows = await self._rows("SELECT value FROM {attrs} WHERE name = %s", (name,))
        return rows[0][0] if rows else None

    async def change_token(self) -> Optional[str]:
        return await self.get_graph_attribute(CHANGE_ATTRIBUTE)

    async def _execute(self, query: str, params: tuple = (), upsert: bool = False) -> None:
        await super()._execute(query, params, upsert)
        self._changed = True

    async def index_done_callback(self) -> None:
        if self._changed:
            await self.set_graph_attribute(CHANGE_ATTRIBUTE, uuid.uuid4().hex)
            self._changed = False

    async def index_abort_callback(self) -> None:
        self._changed = False
        await super().index_abort_callback()

    # ---------------------------------------------------------------- writes

    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        await self._execute("INSERT INTO {nodes} (id, data) VALUES (%s, %s::jsonb) "
                            "ON CONFLICT (id) DO UPDATE SET data = {nodes}.data || EXCLUDED.data",
                            (node_id, dumps(node_data)))

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        await self._execute("INSERT INTO {edges} (src, tgt, data) VALUES (%s, %s, %s::jsonb) "
                            "ON CONFLICT (src, tgt) DO UPDATE SET data = {edges}.data || EXCLUDED.data",
                            (*_ends(source_node_id, target_node_id), dumps(edge_data)))

    async def upsert_nodes(self, nodes: Mapping[str, dict[str, Any]]) -> None:
        """One statement for them all."""
        if nodes:
            await self._execute("INSERT INTO {nodes} (id, data) SELECT id, data::jsonb FROM unnest(%s::text[], "
                                "%s::text[]) AS u(id, data) ON CONFLICT (id) DO UPDATE SET data = {nodes}.data || "
                                "EXCLUDED.data", (list(nodes), [dumps(d) for d in nodes.values()]))

    async def upsert_edges(self, edges: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        """One statement for them all (an edge given twice, its ends either way round, merges)."""
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for (a, b), data in edges.items():
            merged.setdefault(_ends(a, b), {}).update(data)
        if merged:
            await self._execute("INSERT INTO {edges} (src, tgt, data) SELECT src, tgt, data::jsonb FROM "
                                "unnest(%s::text[], %s::text[], %s::text[]) AS u(src, tgt, data) ON CONFLICT (src, tgt) "
                                "DO UPDATE SET data = {edges}.data || EXCLUDED.data",
                                ([a for a, _ in merged], [b for _, b in merged], [dumps(d) for d in merged.values()]))

    async def delete_node(self, node_id: str) -> None:
        await self._execute("DELETE FROM {edges} WHERE src = %s OR tgt = %s", (node_id, node_id))
        await self._execute("DELETE FROM {nodes} WHERE id = %s", (node_id,))

    async def delete_edge(self, source_node_id: str, target_node_id: str) -> None:
        await self._execute("DELETE FROM {edges} WHERE src = %s AND tgt = %s", _ends(source_node_id, target_node_id))

    async def set_node_clusters(self, clusters: dict[str, str]) -> None:
        """Two statements, however many nodes: set the given memberships, clear the others."""
        await self._execute(
            "UPDATE {nodes} n SET data = n.data || jsonb_build_object('clusters', c.clusters) "
            "FROM unnest(%s::text[], %s::text[]) AS c(id, clusters) WHERE n.id = c.id",
            (list(clusters), list(clusters.values())))
        await self._execute(
            "UPDATE {nodes} SET data = data || '{{\"clusters\": \"\"}}'::jsonb "
            "WHERE coalesce(data->>'clusters', '') <> '' AND NOT id = ANY(%s)", (list(clusters),))

    async def update_node_clusters(self, changes: dict[str, str]) -> None:
        """One statement for these nodes only: rewriting every row (descriptions and all) cost
        more than the whole clustering."""
        if changes:
            await self._execute(
                "UPDATE {nodes} n SET data = n.data || jsonb_build_object('clusters', c.clusters) "
                "FROM unnest(%s::text[], %s::text[]) AS c(id, clusters) WHERE n.id = c.id",
                (list(changes), list(changes.values())))

    async def set_graph_attribute(self, name: str, value: str) -> None:
        await self._execute("INSERT INTO {attrs} (name, value) VALUES (%s, %s) "
                            "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value", (name, value))

