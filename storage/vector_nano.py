"""Vector store kept in ``vdb_{namespace}.json`` (nano-vectordb's own file format), plus the
commit journal beside it once the file is large (``vdb_{namespace}.journal.jsonl``,
``storage/journal.py``)."""
from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Optional

import numpy as np

from graphrag.config import GraphRAGConfig

from .base import BaseVectorStorage
from .files import StorageFileError, atomic_write_via, file_signature, parse_json_file
from .journal import REMOVED, JournaledFile, change_lines, journal_for, net_changes, read_journal

if TYPE_CHECKING:
    from nano_vectordb import NanoVectorDB
    from threadpoolctl import ThreadpoolController

logger = logging.getLogger(__name__)

_NanoVectorDB: Optional[type[NanoVectorDB]] = None


def _nano_vectordb_class() -> type[NanoVectorDB]:
    """Import nano-vectordb without its import-time ``logging.basicConfig`` reaching the root logger."""
    global _NanoVectorDB
    if _NanoVectorDB is None:
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            from nano_vectordb import NanoVectorDB
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)
        _NanoVectorDB = NanoVectorDB
    return _NanoVectorDB


_blas_lock = threading.Lock()
_blas_controller: Optional[ThreadpoolController] = None


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on the calling thread only, for one search. A search is one matrix-vector product;
    OpenBLAS splits a large one over every core, and its threads then spin waiting for more
    work, which cost several times the product's own CPU a query (benchmarks/README.md,
    "The local query's CPU"), and the split's partial sums make the scores depend on the
    machine's core count. The limit is process-wide, so searches take it one at a time and
    each restores what it found."""
    global _blas_controller
    with _blas_lock:
        if _blas_controller is None:
            from threadpoolctl import ThreadpoolController

            _blas_controller = ThreadpoolController()
        with _blas_controller.limit(limits=1, user_api="blas"):
            yield


class EmbeddingDimensionError(StorageFileError):
    """The file on disk was built with another embedding model."""


def _stored_dimension(path: str) -> Optional[int]:
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
        key = head.find('"embedding_dim"')
        if key < 0:
            return None
        digits = head[head.index(":", key) + 1 :].lstrip()
        return int("".join(ch for ch in digits[:12] if ch.isdigit()) or "0") or None
    except (OSError, ValueError):
        return None


def _check_dimension(file_name: str, dim: int) -> None:
    stored = _stored_dimension(file_name)
    if stored is not None and stored != dim:
        raise EmbeddingDimensionError(
            f"vector file {file_name!r} holds {stored}-dimensional vectors but the configured "
            f"embedding function produces {dim}-dimensional ones; use the embedding model it was "
            "built with, or delete the file to re-embed"
        )


def _file_for(namespace: str) -> str:
    return f"vdb_{namespace}.json"


@dataclass
class NanoVectorDBStorage(JournaledFile, BaseVectorStorage):
    """nano-vectordb's store. A commit into a large file appends its upserted records (vector
    as base64 float32, as the file holds its matrix) and deleted ids to the journal, which
    folds by the rules of :class:`storage.journal.JournaledFile`."""

    cosine_better_than_threshold: Optional[float] = None
    _client: Optional[NanoVectorDB] = field(default=None, init=False, repr=False)
    _dirty: bool = field(default=False, init=False, repr=False)
    _loaded_signature: Optional[tuple[Any, ...]] = field(default=None, init=False, repr=False)
    # What changed since the last commit ((fields, vector), or REMOVED), for the journal's next line.
    _changed: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _must_fold: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.embedding_func is None:
            raise ValueError(f"vector store '{self.namespace}' needs an embedding function")
        kwargs = self.global_config.vector_db_storage_cls_kwargs
        if self.cosine_better_than_threshold is None:
            self.cosine_better_than_threshold = kwargs.get(
                "query_better_than_threshold", self.global_config.query_better_than_threshold
            )
        self._file_name = self.path_for(_file_for(self.namespace))
        self._journal_name = journal_for(self._file_name)
        self._max_batch_size = self.global_config.embedding_batch_num
        self._load()

    def _load(self) -> None:
        self._changed, self._must_fold = {}, False
        dim = self.embedding_func.embedding_dim
        # The file's and the journal's, as ``reload_if_changed`` compares them.
        self._loaded_signature = self._signature()
        if self._loaded_signature[0] is not None:
            _check_dimension(self._file_name, dim)
        try:
            self._client = _nano_vectordb_class()(dim, storage_file=self._file_name)
        except AssertionError as exc:  # nano-vectordb's own dimension check
            raise EmbeddingDimensionError(f"vector file {self._file_name!r}: {exc} (configured {dim})") from exc
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise StorageFileError(
                f"vector file {self._file_name!r} is corrupt ({type(exc).__name__}: {exc}). It was left "
                "untouched: delete it to re-embed."
            ) from exc
        entries = read_journal(self._journal_name)
        self._replay(net_changes(entries))
        self._dirty = bool(entries)  # a small file takes the journal in at the next commit

    def _replay(self, changes: dict[str, Any]) -> None:
        """Apply a journal's net changes: one delete and one upsert (each scans every record)."""
        removed = [k for k, v in changes.items() if v is REMOVED]
        if removed:
            self._client.delete(removed)
        records = [
            {**v, "__id__": k, "__vector__": np.frombuffer(base64.b64decode(v["__vector__"]), dtype=np.float32)}
            for k, v in changes.items() if v is not REMOVED
        ]
        if records:
            self._client.upsert(datas=records)

    @classmethod
    def check_compatible(cls, global_config: GraphRAGConfig, namespace: str, embedding_dim: int) -> None:
        """Refuse a file built with another embedding model without loading it (reads its head)."""
        file_name = os.path.join(global_config.working_dir, _file_for(namespace))
        if file_signature(file_name) is not None:
            _check_dimension(file_name, embedding_dim)

    @classmethod
    def describe_stored(cls, global_config: GraphRAGConfig, namespace: str) -> Optional[dict[str, int]]:
        """Parses the file but leaves the vectors encoded (no decoding, no normalising)."""
        file_name = os.path.join(global_config.working_dir, _file_for(namespace))
        try:
            with open(file_name, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        data = parse_json_file(raw, file_name, f"vector store '{namespace}'")
        if not isinstance(data, dict):
            return None
        ids = {d.get("__id__") for d in data.get("data", [])}
        for key, value in net_changes(read_journal(journal_for(file_name))).items():
            if value is REMOVED:
                ids.discard(key)
            else:
                ids.add(key)
        return {"vectors": len(ids), "dim": int(data.get("embedding_dim", 0) or 0)}

    async def _embed(self, contents: list[str]) -> np.ndarray:
        # Batches of texts of like length: a model pads each batch to its longest text, so
        # mixed lengths nearly double the compute (HotpotQA: 89 -> 48 CPU-s for 1,500 texts).
        order = sorted(range(len(contents)), key=lambda i: len(contents[i]))
        ordered = [contents[i] for i in order]
        batches = [ordered[i : i + self._max_batch_size] for i in range(0, len(ordered), self._max_batch_size)]
        # One batch (a question) is awaited as it is: gathering it would wrap it in a task.
        arrays = ([await self.embedding_func(batches[0])] if len(batches) == 1
                  else await asyncio.gather(*(self.embedding_func(b) for b in batches)))
        vectors = np.concatenate([np.asarray(a, dtype=np.float32).reshape(len(b), -1) for a, b in zip(arrays, batches)])
        out = np.empty_like(vectors)
        out[order] = vectors
        return out

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        if not data:
            logger.debug("Nothing to upsert into vector store %s", self.namespace)
            return
        # Fresh dicts: nano-vectordb mutates what it is given.
        records = [{"__id__": k, **{f: v[f] for f in self.meta_fields if f in v}} for k, v in data.items()]
        vectors = await self._embed([v["content"] for v in data.values()])
        for record, vector in zip(records, vectors):
            # The vector as given, encoded only if this commit appends to the journal.
            self._changed[record["__id__"]] = ({k: v for k, v in record.items() if k != "__id__"}, vector)
            record["__vector__"] = vector
        with np.errstate(invalid="ignore"):  # a zero vector normalises to NaN: ``query`` skips it
            self._client.upsert(datas=records)
        self._dirty = True

    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        if len(self._client) == 0 or top_k <= 0:
            return []
        vector = (await self._embed([query]))[0]
        # A zero vector (what a hashing embedder gives a text without words) has no cosine
        # similarity: nano-vectordb scores it NaN and ranks such a record first for every
        # question. A question without one matches nothing; such records are skipped, asking
        # for as many more as were skipped.
        if not np.any(vector):
            return []
        wanted = top_k
        with _one_blas_thread():
            while True:
                results = self._client.query(
                    query=vector, top_k=wanted, better_than_threshold=self.cosine_better_than_threshold
                )
                scored = [r for r in results if np.isfinite(r["__metrics__"])]
                if len(scored) >= top_k or len(results) < wanted:
                    break
                wanted += len(results) - len(scored)
        return [
            {**{k: v for k, v in r.items() if not k.startswith("__")}, "id": r["__id__"], "distance": float(r["__metrics__"])}
            for r in scored[:top_k]
        ]

    async def delete(self, ids: list[str]) -> None:
        if ids:
            self._client.delete(list(ids))
            self._changed.update(dict.fromkeys(ids, REMOVED))
            self._dirty = True

    async def get_ids(self) -> set[str]:
        return {d["__id__"] for d in self._all_records()}

    async def count(self) -> int:
        return len(self._client)

    def _all_records(self) -> list[dict]:
        """Every stored record (callers only read them). nano-vectordb has no "list all"; its
        query's ``filter_lambda`` is shown each record, and accepting one keeps the search cheap."""
        records: list[dict] = []

        def collect(record: dict) -> bool:
            records.append(record)
            return len(records) == 1

        if len(self._client):
            probe = np.ones(self.embedding_func.embedding_dim, dtype=np.float32)
            self._client.query(query=probe, top_k=1, filter_lambda=collect)
        return records

    def __len__(self) -> int:
        return len(self._client)

    def _journal_line(self) -> bytes:
        """Upserted records as the file holds them (vector as base64 float32), and deletions."""
        return change_lines({
            key: change if change is REMOVED else
            {**change[0], "__vector__": base64.b64encode(change[1].tobytes()).decode("ascii")}
            for key, change in self._changed.items()})

    def _write_whole(self) -> None:
        def write(tmp: str) -> None:
            target = self._client.storage_file
            self._client.storage_file = tmp
            try:
                self._client.save()
            finally:
                self._client.storage_file = target

        atomic_write_via(self._file_name, write)

    async def drop(self) -> None:
        self._client.delete([d["__id__"] for d in self._all_records()])
        self._must_fold = self._dirty = True
