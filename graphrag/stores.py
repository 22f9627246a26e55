"""Every store of one working dir, driven through one lifecycle and each read on first use."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING, AsyncIterator, Callable, Generic, Optional, TypeVar

from graphrag.backends import storage_class
from graphrag.config import GraphRAGConfig, keeps_sentence_vectors
from graphrag.embedding import EmbeddingFunc
from graphrag.storage import (
    BaseGraphStorage,
    BaseKVStorage,
    BaseVectorStorage,
    StorageNameSpace,
)
from graphrag.storage import files

if TYPE_CHECKING:
    from graphrag.operators.rerank import Reranker

logger = logging.getLogger(__name__)

S = TypeVar("S")
StoreOpener = Callable[[], Optional[StorageNameSpace]]


class _OpenedOnFirstUse(Generic[S]):
    """A store of :class:`Stores`: constructed (its file read) the first time it is asked for."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, stores: Optional[Stores], owner: Optional[type] = None) -> S:
        if stores is None:  # looked up on the class (help(), introspection)
            return self  # type: ignore[return-value]
        return stores.open(self.name)  # type: ignore[return-value]  # the store the attribute's type names


class Stores:
    """The working dir's stores. Each is read when first used, so a process that opens a
    working dir to query reads only the stores its queries touch: a naive query never
    parses the graph, a local one never the LLM cache. An insert opens them all.

    Stores read at different times could straddle another process's commit; opening one
    therefore first brings those already read up to the files on disk.
    """

    full_docs = _OpenedOnFirstUse[BaseKVStorage]()
    text_chunks = _OpenedOnFirstUse[BaseKVStorage]()
    community_reports = _OpenedOnFirstUse[BaseKVStorage]()
    entities_vdb = _OpenedOnFirstUse[Optional[BaseVectorStorage]]()
    chunks_vdb = _OpenedOnFirstUse[Optional[BaseVectorStorage]]()
    relations_vdb = _OpenedOnFirstUse[Optional[BaseVectorStorage]]()
    graph = _OpenedOnFirstUse[BaseGraphStorage]()
    # Small bookkeeping records: cumulative LLM usage for `graphrag stats`, the document count.
    index_meta = _OpenedOnFirstUse[Optional[BaseKVStorage]]()
    # What extraction found in each chunk: lets merges be rebuilt (on delete) without the LLM.
    chunk_extractions = _OpenedOnFirstUse[BaseKVStorage]()
    llm_response_cache = _OpenedOnFirstUse[Optional[BaseKVStorage]]()
    # The lexical channel's BM25 index over chunks (operators/lexical.py); None when off.
    lexical_index = _OpenedOnFirstUse[Optional[BaseKVStorage]]()
    # Each chunk's sentence vectors, for rerank="embedding" (graphrag/rerank.py); None when off.
    sentence_vectors = _OpenedOnFirstUse[Optional[BaseKVStorage]]()

    def __init__(self, openers: dict[str, StoreOpener], working_dir: Optional[str] = None,
                 describe_vectors: Optional[Callable[[str], Optional[dict[str, int]]]] = None) -> None:
        self._openers = openers
        self._working_dir = working_dir
        self._describe_vectors = describe_vectors
        self._opened: dict[str, Optional[StorageNameSpace]] = {}
        # Moves on whenever what the stores hold may have changed (a commit, a store read
        # again): caches built from an index version (the hybrid ranking graph) key on it.
        self.version = 0
        # The rerank stage the passage modes apply (operators/rerank.py), set by GraphRAG; None: off.
        self.reranker: Optional[Reranker] = None
        # How many of a passage mode's first passages the heading rule and the rerank stage
        # reorder (config.rerank_candidates), set by GraphRAG; 0: none.
        self.head_candidates = 0

    def open(self, name: str) -> Optional[StorageNameSpace]:
        if name not in self._opened:
            if self._working_dir is not None:
                files.wait_for_commit(self._working_dir)
            store = self._openers[name]()
            for earlier in self._opened.values():
                if earlier is not None and earlier.reload_if_changed():
                    self.version += 1
            self._opened[name] = store
        return self._opened[name]

    def is_open(self, name: str) -> bool:
        return self._opened.get(name) is not None

    def opened(self) -> list[str]:
        """The names of the stores read so far."""
        return [name for name, store in self._opened.items() if store is not None]

    def all(self) -> list[StorageNameSpace]:
        """Every store opened so far (one never opened has nothing to reload or save)."""
        return [s for s in self._opened.values() if s is not None]

    async def index_start(self, names: Optional[list[str]] = None) -> None:
        """Open ``names`` (default: every store) and bring every open store up to date with
        disk, with the writer lock held. A store first opened later in the write is read
        then, under the same lock. An insert with work opens them all before its first LLM
        call, so a corrupt file stops it before anything is paid for."""
        for name in self._openers if names is None else names:
            self.open(name)
        await asyncio.gather(*(s.index_start_callback() for s in self.all()))
        self.version += 1

    async def index_done(self) -> None:
        for store in self.all():
            await store.index_done_callback()
        self.version += 1

    async def write_ahead(self, names: list[str]) -> None:
        """Write the named stores' files now, into the commit in progress, when the rest of the
        write will not change them (stores of other kinds are written at the commit)."""
        for name in names:
            store = self._opened.get(name)
            if store is not None:
                await store.write_ahead()

    async def query_done(self) -> None:
        await asyncio.gather(*(s.query_done_callback() for s in self.all()))

    def stored_vectors(self, name: str) -> Optional[dict[str, int]]:
        """``{"vectors", "dim"}`` of vector store ``name`` (``"entities"``, ``"chunks"``) as stored,
        without an embedding model or loading the vectors; None if it holds nothing."""
        return self._describe_vectors(name) if self._describe_vectors is not None else None

    def journals_pending(self) -> list[StorageNameSpace]:
        """The open stores whose journal holds entries their file does not (see ``storage/kv_json.py``)."""
        return [s for s in self.all() if getattr(s, "journal_pending", lambda: False)()]

    async def fold_journals(self) -> None:
        """Write whole, in one commit, the files of the stores ``journals_pending()`` names
        (writer lock held)."""
        pending = self.journals_pending()
        if not pending:
            return
        async with self.transaction():
            for store in pending:
                await store.index_start_callback()  # another process may have committed since
                await store.fold()  # type: ignore[attr-defined]
            await self.index_done()

    async def close(self) -> None:
        """Release the open stores' connections (a database's pool on this event loop)."""
        await asyncio.gather(*(s.close() for s in self.all()))

    # The commit: the file stores' writes inside it become visible together at its end
    # (see storage/files.py), and the stores that write through commit their transaction
    # last inside it. Everything here needs a working dir.

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Make everything written inside the block (``index_done``, ``write_ahead``, a
        database's writes) visible together at its end, or none of it if it raises.

        When database stores take part, the manifest is written ahead of their commits,
        naming the commit and how each database finishes it (``prepare_commit``); stores
        with a transaction commit first, then those that replay, then the files are renamed.
        A kill anywhere in between is finished or undone by :meth:`recover`."""
        try:
            with files.commit_transaction(self._dir()):
                yield
                commit_id = uuid.uuid4().hex
                prepared = {name: await store.prepare_commit(commit_id)
                            for name, store in self._opened.items() if store is not None}
                databases = {name: p.redo for name, p in prepared.items() if p is not None}
                if databases:
                    files.write_ahead(commit_id, databases)
                # A stamped transaction commits before any store replays: if it did not
                # commit, nothing else was applied and recovery rolls the whole write back.
                for store in sorted(self.all(), key=lambda s: databases.get(self._name_of(s)) is not None):
                    await store.index_commit_callback()
        except BaseException:
            for store in self.all():
                with contextlib.suppress(Exception):
                    await store.index_abort_callback()
            raise

    def _name_of(self, store: StorageNameSpace) -> str:
        return next(name for name, opened in self._opened.items() if opened is store)

    def commit_pending(self) -> bool:
        """A commit is being applied, or was interrupted and is waiting to be finished."""
        return files.commit_pending(self._dir())

    def needs_recovery(self) -> bool:
        """A killed writer left an interrupted commit or temporary files behind."""
        return files.needs_recovery(self._dir())

    def recover(self) -> bool:
        """Finish an interrupted commit, drop orphaned temporary files (writer lock held).
        True when a commit was rolled forward.

        A commit with database stores is rolled forward if its stamped transactions committed
        (the stores with a redo record apply it again), else rolled back whole; without the
        embedding function a vector store cannot be opened, and the commit is left for a
        writer that can."""
        manifest = files.read_manifest(self._dir())
        databases = manifest.get("databases") if manifest else None
        if databases:
            stores = {name: self._openers[name]() for name in databases}
            if any(store is None for store in stores.values()):
                logger.warning("An interrupted commit in %s needs stores not open here; left for the next writer",
                               self._dir())
                return False
            commit_id = manifest["commit_id"]  # type: ignore[index]
            stamped = [name for name, redo in databases.items() if redo is None]
            if not all(stores[name].finish_commit(commit_id, None) for name in stamped):  # type: ignore[union-attr]
                files.roll_back(self._dir())
                return False
            for name, redo in databases.items():
                if redo is not None:
                    stores[name].finish_commit(commit_id, redo)  # type: ignore[union-attr]
        return files.recover_pending_commit(self._dir())

    def wait_for_commit(self) -> None:
        """Wait until a commit in flight is applied (readers take no lock)."""
        files.wait_for_commit(self._dir())

    def _dir(self) -> str:
        if self._working_dir is None:
            raise ValueError("these stores have no working dir")
        return self._working_dir


def open_stores(config: GraphRAGConfig, embedding_func: Optional[EmbeddingFunc]) -> Stores:
    """The stores of ``config.working_dir``, none read yet; a vector file built with another
    embedding model is refused now (from its head), not at the first query. Without an
    embedding function (inspecting a working dir) the vector stores stay closed."""
    kv_cls: type[BaseKVStorage] = storage_class(config, "kv")
    vector_cls: type[BaseVectorStorage] = storage_class(config, "vector")
    graph_cls: type[BaseGraphStorage] = storage_class(config, "graph")

    def kv(namespace: str, **usage: bool) -> StoreOpener:
        return lambda: kv_cls(namespace=namespace, global_config=config, **kv_cls.options_for(**usage))

    def vectors(namespace: str, enabled: bool, meta_fields: set[str]) -> StoreOpener:
        if not enabled or embedding_func is None:
            return lambda: None
        vector_cls.check_compatible(config, namespace, embedding_func.embedding_dim)
        return lambda: vector_cls(namespace=namespace, global_config=config, embedding_func=embedding_func,
                                  meta_fields=meta_fields)

    def llm_cache() -> Optional[BaseKVStorage]:
        return kv("llm_response_cache", durable_upserts=True)() if config.enable_llm_cache else None

    return Stores({
        "full_docs": kv("full_docs"),
        "text_chunks": kv("text_chunks", read_by_record=True),
        "community_reports": kv("community_reports", read_by_record=True),
        "entities_vdb": vectors("entities", config.enable_local, {"entity_name"}),
        # Chunk vectors carry only the chunk id: the document a chunk belongs to can change
        # (shared chunks), and text_chunks is the one place that records it.
        "chunks_vdb": vectors("chunks", config.enable_naive_rag, set()),
        # Relation (fact) vectors seed the hybrid walk, which also needs the chunk vectors.
        "relations_vdb": vectors("relations", config.enable_relation_vectors and config.enable_naive_rag,
                                 {"src_id", "tgt_id"}),
        "graph": lambda: graph_cls(namespace="chunk_entity_relation", global_config=config),
        "index_meta": kv("index_meta"),
        "chunk_extractions": kv("chunk_extractions"),
        "llm_response_cache": llm_cache,
        "lexical_index": kv("lexical_index", read_by_record=True) if config.lexical_retrieval else lambda: None,
        "sentence_vectors": (kv("sentence_vectors", read_by_record=True)
                             if keeps_sentence_vectors(config) and embedding_func is not None else lambda: None),
    }, working_dir=config.working_dir, describe_vectors=lambda name: vector_cls.describe_stored(config, name))
