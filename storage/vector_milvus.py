"""Vectors in Milvus through ``pymilvus``: the same client code serves Milvus Lite (a local
file, the default: ``milvus.db`` in the working dir), a Milvus server and a cluster
(``storage_options["milvus_uri"]`` or ``GRAPHRAG_MILVUS_URI``, with ``milvus_token`` /
``GRAPHRAG_MILVUS_TOKEN``, e.g. ``"user:password"``).

One collection per workspace and namespace (``graphrag_<workspace>_<namespace>``), cosine
metric, strong consistency. Its primary key is a hash of the record id, so the filter
expressions pymilvus builds from primary keys never hold a caller's text; the id itself
is a field of its own.

Milvus has no transactions. A write is kept in memory (a ``db_common.PendingRecords``, its embeddings computed at the
upsert), every read answers through it (a query ranks the pending vectors beside the
stored hits), and ``index_commit_callback`` applies it; an abort drops it. Milvus Lite
serves one process at a time: share an index between processes through a server.

Milvus Lite keeps what was written in an in-memory table until a flush, and its search turns
that whole table into arrays again on every call (~250 ms at 8,000 entity vectors, in this
process); the commit therefore (and the first use of one) flushes a Lite collection, after which a search reads the
flushed segment (~10x less). A server seals segments itself and rate-limits flushes, so it
is not flushed.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from graphrag.config import GraphRAGConfig
from graphrag.errors import StoreUnavailableError

from .base import BaseVectorStorage, PreparedWrite
from .db_common import PendingRecords, require_extra, validated_name, workspace_of
from .vector_nano import EmbeddingDimensionError

if TYPE_CHECKING:
    from pymilvus import MilvusClient

URI_ENV, TOKEN_ENV = "GRAPHRAG_MILVUS_URI", "GRAPHRAG_MILVUS_TOKEN"
BATCH = 1000  # rows per insert, delete or iterator page
MAX_LIMIT = 16384  # Milvus's largest search limit


def _primary_key(id: str) -> str:
    return hashlib.sha1(id.encode("utf-8")).hexdigest()


def _normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


_clients: dict[int, Any] = {}
_opening = threading.Lock()


def _uri(config: GraphRAGConfig) -> str:
    return (config.storage_options.get("milvus_uri") or os.environ.get(URI_ENV)
            or os.path.join(config.working_dir, "milvus.db"))


def is_lite(config: GraphRAGConfig) -> bool:
    """Milvus Lite (a local file) rather than a server."""
    return "://" not in _uri(config)


def client_for(config: GraphRAGConfig) -> MilvusClient:
    """The Milvus client of this config, opened once, closed when the config goes away (a sync
    client belongs to no event loop, so queries do not pay for reopening Milvus Lite)."""
    key = id(config)
    with _opening:  # calls from several threads open one client
        return _clients.get(key) or _open_client(config, key)


def _open_client(config: GraphRAGConfig, key: int) -> MilvusClient:
    require_extra("milvus", "pymilvus")
    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    options = config.storage_options
    uri = _uri(config)
    if is_lite(config):
        require_extra("milvus", "milvus_lite")
    try:
        client = MilvusClient(uri=uri, token=options.get("milvus_token") or os.environ.get(TOKEN_ENV) or "")
    except MilvusException:
        raise _unreachable(config) from None
    _clients[key] = client
    weakref.finalize(config, _close, key)
    return client


def _unreachable(config: GraphRAGConfig) -> StoreUnavailableError:
    """The error for a Milvus that cannot be reached (it names no URI: a server's may carry a token)."""
    return StoreUnavailableError(
        f"cannot reach Milvus for the vector store (workspace {workspace_of(config)!r}); check {URI_ENV} or "
        "storage_options['milvus_uri'] (a Milvus Lite file serves one process)", store="vector")


def _is_unreachable(exc: BaseException) -> bool:
    """Whether a client error says the server is gone (refused, dropped, not answering), rather
    than that a request was wrong."""
    import grpc
    from pymilvus.client.types import Status
    from pymilvus.exceptions import ConnectError, MilvusException, MilvusUnavailableException

    if isinstance(exc, (ConnectError, MilvusUnavailableException)):
        return True
    if isinstance(exc, MilvusException):
        return exc.code == Status.CONNECT_FAILED
    return isinstance(exc, grpc.RpcError) and exc.code() in (grpc.StatusCode.UNAVAILABLE,
                                                             grpc.StatusCode.DEADLINE_EXCEEDED)


def _reaching(config: GraphRAGConfig, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, a lost server raising :class:`StoreUnavailableError`."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        if _is_unreachable(exc):
            raise _unreachable(config) from None
        raise


def _pack_write(pending: PendingRecords[str]) -> bytes:
    """A pending write as bytes: a JSON line (dropped, deleted ids, upserted ids and meta
    fields), then the upserted unit vectors as little-endian float32."""
    ids, vectors, metas = [], [], []
    for id, _, data in pending.written():
        ids.append(id)
        vectors.append(np.asarray(data["vector"], dtype="<f4"))
        metas.append(data["meta"])
    upserted = set(ids)  # an upsert replaces the stored record whole: no delete needed first
    head = {"dropped": pending.dropped, "deleted": [k for k in pending.gone() if k not in upserted],
            "ids": ids, "meta": metas}
    body = np.stack(vectors).tobytes() if vectors else b""
    return json.dumps(head).encode("utf-8") + b"\n" + body


def _unpack_write(redo: bytes) -> tuple[bool, list[str], dict[str, tuple[np.ndarray, dict]]]:
    """(dropped, deleted ids, id -> (vector, meta fields)) of ``_pack_write``'s bytes."""
    line, _, body = redo.partition(b"\n")
    head = json.loads(line)
    vectors = np.frombuffer(body, dtype="<f4").reshape(len(head["ids"]), -1) if head["ids"] else []
    return head["dropped"], head["deleted"], {id: (vectors[i], meta)
                                              for i, (id, meta) in enumerate(zip(head["ids"], head["meta"]))}


def _close(key: int) -> None:
    client = _clients.pop(key, None)
    if client is not None:
        client.close()


def collection_name(config: GraphRAGConfig, namespace: str) -> str:
    return f"graphrag_{workspace_of(config)}_{validated_name('namespace', namespace)}"


def _stored_dimension(client: MilvusClient, name: str) -> Optional[int]:
    if not client.has_collection(name):
        return None
    fields = client.describe_collection(name)["fields"]
    return int(next(f["params"]["dim"] for f in fields if f["name"] == "vector"))


@dataclass
class MilvusVectorStorage(BaseVectorStorage):
    def __post_init__(self) -> None:
        if self.embedding_func is None:
            raise ValueError(f"vector store '{self.namespace}' needs an embedding function")
        self._name = collection_name(self.global_config, self.namespace)
        self._threshold = self.global_config.vector_db_storage_cls_kwargs.get(
            "query_better_than_threshold", self.global_config.query_better_than_threshold)
        self._batch = self.global_config.embedding_batch_num
        self._lite = is_lite(self.global_config)
        self._ready = False
        # id -> {"vector": unit vector, "meta": meta fields}, until the commit
        self._pending: PendingRecords[str] = PendingRecords()
        self._prepared: Optional[bytes] = None  # the pending write as prepare_commit packed it

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A client call off the event loop."""
        return await asyncio.to_thread(self._sync, method, *args, **kwargs)

    def _exists_now(self) -> bool:
        if not self._ready:
            self._ready = self._sync("has_collection", self._name)
            if self._ready:
                self._sync("load_collection", self._name)
                if self._lite:  # what an earlier process left unflushed (a no-op when none)
                    self._sync("flush", self._name)
        return self._ready

    async def _exists(self) -> bool:
        return self._ready or await asyncio.to_thread(self._exists_now)

    def _create_now(self) -> None:
        if self._exists_now():
            return
        from pymilvus import DataType, MilvusClient

        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("key", DataType.VARCHAR, max_length=65535)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(self.embedding_func.embedding_dim))
        schema.add_field("meta", DataType.JSON)
        index = MilvusClient.prepare_index_params()
        index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
        self._sync("create_collection", self._name, schema=schema, index_params=index, consistency_level="Strong")
        self._ready = True

    def _sync(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A client call (the client is synchronous). The client is opened by the first call,
        off the event loop like every call: connecting to a server that never answers takes
        the client's whole timeout."""
        return _reaching(self.global_config, getattr(client_for(self.global_config), method), *args, **kwargs)

    async def reachable(self) -> None:
        await self._call("has_collection", self._name)

    async def _embed(self, contents: list[str]) -> np.ndarray:
        batches = [contents[i : i + self._batch] for i in range(0, len(contents), self._batch)]
        arrays = await asyncio.gather(*(self.embedding_func(b) for b in batches))
        return np.concatenate([np.asarray(a, dtype=np.float32).reshape(len(b), -1) for a, b in zip(arrays, batches)])

    async def _stored_ids(self) -> set[str]:
        if self._pending.dropped or not await self._exists():
            return set()
        iterator = await self._call("query_iterator", self._name, batch_size=BATCH, filter="",
                                    output_fields=["key"])
        ids: set[str] = set()
        while page := await asyncio.to_thread(_reaching, self.global_config, iterator.next):
            ids.update(row["key"] for row in page)
        iterator.close()
        return ids

    # ---------------------------------------------------------------- reads (through the write)

    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        if top_k <= 0:
            return []
        vector = (await self._embed([query]))[0]
        hits: list[dict[str, Any]] = []
        touched = set(self._pending.entries)
        upserts = {id: data for id, _, data in self._pending.written()}
        if not self._pending.dropped and await self._exists():
            found = await self._call("search", self._name, data=[vector.tolist()],
                                     limit=min(top_k + len(touched), MAX_LIMIT), output_fields=["key", "meta"],
                                     search_params={"metric_type": "COSINE"})
            hits = [{**hit["entity"]["meta"], "id": hit["entity"]["key"], "distance": float(hit["distance"])}
                    for hit in found[0] if hit["entity"]["key"] not in touched]
        if upserts:
            ids = list(upserts)
            similarities = np.stack([upserts[i]["vector"] for i in ids]) @ _normalised(vector)
            hits += [{**upserts[i]["meta"], "id": i, "distance": float(s)} for i, s in zip(ids, similarities)]
        hits.sort(key=lambda h: h["distance"], reverse=True)
        return [h for h in hits[:top_k] if h["distance"] >= self._threshold]

    async def get_ids(self) -> set[str]:
        stored = {i for i in await self._stored_ids() if self._pending.read(i, {}) is not None}
        return stored | {id for id, _, _ in self._pending.written()}

    async def count(self) -> int:
        if self._pending:
            return len(await self.get_ids())
        if not await self._exists():
            return 0
        return int((await self._call("query", self._name, filter="", output_fields=["count(*)"]))[0]["count(*)"])

    # ---------------------------------------------------------------- writes (kept until the commit)

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        if not data:
            return
        vectors = _normalised(await self._embed([v["content"] for v in data.values()]))
        for (id, record), vector in zip(data.items(), vectors):
            # Both fields given: the record is replaced whole.
            self._pending.upsert(id, {"vector": vector, "meta": {f: record[f] for f in self.meta_fields if f in record}})

    async def delete(self, ids: list[str]) -> None:
        for id in ids:
            self._pending.delete(id)

    async def drop(self) -> None:
        self._pending.drop()

    async def prepare_commit(self, commit_id: str) -> Optional[PreparedWrite]:
        """The write as a redo record (the vectors were embedded at the upsert): Milvus has no
        transaction, so a commit killed midway is finished by applying it again."""
        self._prepared = _pack_write(self._pending) if self._pending else None
        return PreparedWrite(redo=self._prepared) if self._prepared is not None else None

    async def index_commit_callback(self) -> None:
        pending, self._pending = self._pending, PendingRecords()
        redo, self._prepared = self._prepared, None
        if pending:
            await asyncio.to_thread(self._apply, redo if redo is not None else _pack_write(pending))

    def finish_commit(self, commit_id: str, redo: Optional[bytes]) -> bool:
        if redo is not None:
            self._apply(redo)
        return True

    def _apply(self, redo: bytes) -> None:
        """Apply a write (as ``_pack_write`` packs it): drop, deletes, upserts; applying it again
        gives the same collection."""
        dropped, deleted, upserts = _unpack_write(redo)
        if dropped and self._exists_now():
            self._sync("drop_collection", self._name)
            self._ready = False
        if deleted and self._exists_now():
            keys = [_primary_key(i) for i in deleted]
            for i in range(0, len(keys), BATCH):
                self._sync("delete", self._name, ids=keys[i : i + BATCH])
        if upserts:
            self._create_now()
            rows = [{"pk": _primary_key(id), "key": id, "vector": vector.tolist(), "meta": meta}
                    for id, (vector, meta) in upserts.items()]
            for i in range(0, len(rows), BATCH):
                self._sync("upsert", self._name, rows[i : i + BATCH])
        if (upserts or deleted) and self._lite and self._exists_now():
            self._sync("flush", self._name)

    async def index_abort_callback(self) -> None:
        self._pending = PendingRecords()
        self._prepared = None

    # ---------------------------------------------------------------- before opening

    @classmethod
    def describe_stored(cls, global_config: GraphRAGConfig, namespace: str) -> Optional[dict[str, int]]:
        client, name = client_for(global_config), collection_name(global_config, namespace)
        dim = _reaching(global_config, _stored_dimension, client, name)
        if dim is None:
            return None
        count = int(_reaching(global_config, client.query, name, filter="", output_fields=["count(*)"])[0]["count(*)"])
        return {"vectors": count, "dim": dim} if count else None

    @classmethod
    def check_compatible(cls, global_config: GraphRAGConfig, namespace: str, embedding_dim: int) -> None:
        name = collection_name(global_config, namespace)
        try:
            stored = _reaching(global_config, _stored_dimension, client_for(global_config), name)
        except StoreUnavailableError:
            return  # checked when the server is back; until then queries answer without vectors
        if stored is not None and stored != embedding_dim:
            raise EmbeddingDimensionError(
                f"Milvus collection {name!r} holds {stored}-dimensional vectors but the configured embedding "
                f"function produces {embedding_dim}-dimensional ones; use the model it was built with, or another "
                "workspace")
