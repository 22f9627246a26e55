"""Every store of one working dir, opened together and driven through one lifecycle."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from graphrag.config import GraphRAGConfig
from graphrag.embedding import EmbeddingFunc
from graphrag.storage import (
    BaseGraphStorage,
    BaseKVStorage,
    BaseVectorStorage,
    JsonKVStorage,
    NanoVectorDBStorage,
    NetworkXStorage,
    StorageNameSpace,
)


@dataclass
class Stores:
    """The working dir's stores. Chunk extractions and the LLM response cache are opened on
    first use: only writers and LLM calls need them, so a process that opens a working dir
    to answer context queries reads only what those queries use."""

    full_docs: BaseKVStorage
    text_chunks: BaseKVStorage
    community_reports: BaseKVStorage
    entities_vdb: Optional[BaseVectorStorage]
    chunks_vdb: Optional[BaseVectorStorage]
    graph: BaseGraphStorage
    # Small bookkeeping records, e.g. cumulative LLM usage for `graphrag stats`.
    index_meta: Optional[BaseKVStorage] = None
    open_later: dict[str, Callable[[], Optional[StorageNameSpace]]] = field(default_factory=dict)
    _opened_later: dict[str, Optional[StorageNameSpace]] = field(default_factory=dict, repr=False)

    def _store_opened_later(self, name: str) -> Any:
        if name not in self._opened_later:
            self._opened_later[name] = self.open_later[name]()
        return self._opened_later[name]

    @property
    def chunk_extractions(self) -> BaseKVStorage:
        """What extraction found in each chunk: lets merges be rebuilt (on delete) without the LLM."""
        return self._store_opened_later("chunk_extractions")

    @property
    def llm_response_cache(self) -> Optional[BaseKVStorage]:
        return self._store_opened_later("llm_response_cache")

    def all(self) -> list[StorageNameSpace]:
        """Every store opened so far (one never opened has nothing to reload or save)."""
        stores = [self.full_docs, self.text_chunks, self.community_reports, self.entities_vdb, self.chunks_vdb,
                  self.graph, self.index_meta, *self._opened_later.values()]
        return [s for s in stores if s is not None]

    async def index_start(self) -> None:
        for name in self.open_later:  # a writer uses them all
            self._store_opened_later(name)
        await asyncio.gather(*(s.index_start_callback() for s in self.all()))

    async def index_done(self) -> None:
        for store in self.all():
            await store.index_done_callback()

    async def query_done(self) -> None:
        await asyncio.gather(*(s.query_done_callback() for s in self.all()))


def open_stores(config: GraphRAGConfig, embedding_func: EmbeddingFunc) -> Stores:
    kv_cls = config.key_string_value_json_storage_cls or JsonKVStorage
    vector_cls = config.vector_db_storage_cls or NanoVectorDBStorage
    graph_cls = config.graph_storage_cls or NetworkXStorage

    def open_cache() -> Optional[BaseKVStorage]:
        if not config.enable_llm_cache:
            return None
        if kv_cls is JsonKVStorage:
            return JsonKVStorage("llm_response_cache", config, journal=True)
        return kv_cls(namespace="llm_response_cache", global_config=config)

    return Stores(
        full_docs=kv_cls(namespace="full_docs", global_config=config),
        text_chunks=kv_cls(namespace="text_chunks", global_config=config),
        community_reports=kv_cls(namespace="community_reports", global_config=config),
        entities_vdb=vector_cls(namespace="entities", global_config=config, embedding_func=embedding_func,
                                meta_fields={"entity_name"}) if config.enable_local else None,
        # Chunk vectors carry only the chunk id: the document a chunk belongs to can change
        # (shared chunks), and text_chunks is the one place that records it.
        chunks_vdb=vector_cls(namespace="chunks", global_config=config, embedding_func=embedding_func)
        if config.enable_naive_rag else None,
        graph=graph_cls(namespace="chunk_entity_relation", global_config=config),
        index_meta=kv_cls(namespace="index_meta", global_config=config),
        open_later={"chunk_extractions": lambda: kv_cls(namespace="chunk_extractions", global_config=config),
                    "llm_response_cache": open_cache},
    )
