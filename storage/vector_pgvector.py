"""Vectors in PostgreSQL with pgvector: one table per namespace, cosine distance, an HNSW index."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from graphrag.config import GraphRAGConfig
from graphrag.errors import StoreUnavailableError

from .base import BaseVectorStorage
from .postgres import PostgresStore, database_for, dumps
from .vector_nano import EmbeddingDimensionError


def _literal(vector: np.ndarray) -> str:
    """pgvector's text form, ``[x,y,...]``."""
    return "[" + ",".join(map(repr, vector.astype(float).tolist())) + "]"


@dataclass
class PGVectorStorage(PostgresStore, BaseVectorStorage):
    store_kind = "vector"

    def __post_init__(self) -> None:
        if self.embedding_func is None:
            raise ValueError(f"vector store '{self.namespace}' needs an embedding function")
        self._name = self.db.table(self.namespace, "vectors")
        self._use_tables(table=self._name)
        self._threshold = self.global_config.vector_db_storage_cls_kwargs.get(
            "query_better_than_threshold", self.global_config.query_better_than_threshold)
        self._batch = self.global_config.embedding_batch_num

    async def _ready(self) -> None:
        from psycopg import sql

        dim = int(self.embedding_func.embedding_dim)
        await self.db.ensure_table(self._name, [
            sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, meta jsonb NOT NULL, "
                    "embedding vector({}) NOT NULL)").format(self._tables["table"], sql.Literal(dim)),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops)").format(
                self.db.identifier(self._name + "_hnsw"), self._tables["table"]),
        ])

    async def _embed(self, contents: list[str]) -> np.ndarray:
        batches = [contents[i : i + self._batch] for i in range(0, len(contents), self._batch)]
        arrays = await asyncio.gather(*(self.embedding_func(b) for b in batches))
        return np.concatenate([np.asarray(a, dtype=np.float32).reshape(len(b), -1) for a, b in zip(arrays, batches)])

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        if not data:
            return
        vectors = await self._embed([v["content"] for v in data.values()])
        metas = [dumps({f: v[f] for f in self.meta_fields if f in v}) for v in data.values()]
        await self._execute(
            "INSERT INTO {table} (id, meta, embedding) SELECT id, meta::jsonb, embedding::vector "
            "FROM unnest(%s::text[], %s::text[], %s::text[]) AS u(id, meta, embedding) "
            "ON CONFLICT (id) DO UPDATE SET meta = EXCLUDED.meta, embedding = EXCLUDED.embedding",
            (list(data), metas, [_literal(v) for v in vectors]))

    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        if top_k <= 0:
            return []
        vector = _literal((await self._embed([query]))[0])
        async with self._reaching():
            return await self._nearest(vector, top_k)

    async def _nearest(self, vector: str, top_k: int) -> list[dict[str, Any]]:
        await self._ready()
        async with self.db.connection() as conn:
            # The HNSW search keeps ef_search candidates: at least top_k of them (1000 at most).
            # Both statements go in one round trip (a pipeline).
            async with conn.pipeline():
                await conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(min(max(40, top_k), 1000)),))
                cursor = await conn.execute(self._sql(  # type: ignore[arg-type]
                    "SELECT id, meta, 1 - (embedding <=> %s::vector) FROM {table} ORDER BY embedding <=> %s::vector "
                    "LIMIT %s"), (vector, vector, top_k))
            rows = await cursor.fetchall()
        return [{**meta, "id": id, "distance": float(similarity)}
                for id, meta, similarity in rows if similarity >= self._threshold]

    async def delete(self, ids: list[str]) -> None:
        if ids:
            await self._execute("DELETE FROM {table} WHERE id = ANY(%s)", (list(ids),))

    async def get_ids(self) -> set[str]:
        return {id for (id,) in await self._rows("SELECT id FROM {table}")}

    async def count(self) -> int:
        return (await self._rows("SELECT count(*) FROM {table}"))[0][0]

    async def drop(self) -> None:
        await self._execute("DELETE FROM {table}")

    @classmethod
    def describe_stored(cls, global_config: GraphRAGConfig, namespace: str) -> Optional[dict[str, int]]:
        db = database_for(global_config)
        name = db.table(namespace, "vectors")
        if db.sync_query("SELECT to_regclass(%s)", (name,))[0][0] is None:
            return None
        from psycopg import sql

        count, dim = db.sync_query(sql.SQL("SELECT count(*), max(vector_dims(embedding)) FROM {}").format(
            db.identifier(name)))[0]
        return {"vectors": count, "dim": dim} if count else None

    @classmethod
    def check_compatible(cls, global_config: GraphRAGConfig, namespace: str, embedding_dim: int) -> None:
        db = database_for(global_config)
        name = db.table(namespace, "vectors")
        try:
            stored = db.sync_query(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
                (name,))
        except StoreUnavailableError:
            return  # checked when the server is back; until then queries answer without vectors

        if stored and stored[0][0] > 0 and stored[0][0] != embedding_dim:
            raise EmbeddingDimensionError(
                f"PostgreSQL table {name!r} holds {stored[0][0]}-dimensional vectors but the configured embedding "
                f"function produces {embedding_dim}-dimensional ones; use the model it was built with, or another "
                "workspace")
