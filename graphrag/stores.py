"""Every store of one working dir, opened together and driven through one lifecycle."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Optional

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
    full_docs: BaseKVStorage
    text_chunks: BaseKVStorage
    # What extraction found in each chunk: lets merges be rebuilt (on delete) without the LLM.
    chunk_extractions: BaseKVStorage
    community_reports: BaseKVStorage
    llm_response_cache: Optional[BaseKVStorage]
    entities_vdb: Optional[BaseVectorStorage]
    chunks_vdb: Optional[BaseVectorStorage]
    graph: BaseGraphStorage
    # Small bookkeeping records, e.g. cumulative LLM usage for `graphrag stats`.
    index_meta: Optional[BaseKVStorage] = None

    def all(self) -> list[StorageNameSpace]:
        stores = [self.full_docs, self.text_chunks, self.chunk_extractions, self.community_reports,
                  self.llm_response_cache, self.entities_vdb, self.chunks_vdb, self.graph, self.index_meta]
        return [s for s in stores if s is not None]

    async def index_start(self) -> None:
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
    cache = None
    if config.enable_llm_cache:
        cache = (JsonKVStorage("llm_response_cache", config, journal=True) if kv_cls is JsonKVStorage
                 else kv_cls(namespace="llm_response_cache", global_config=config))
    return Stores(
        full_docs=kv_cls(namespace="full_docs", global_config=config),
        text_chunks=kv_cls(namespace="text_chunks", global_config=config),
        chunk_extractions=kv_cls(namespace="chunk_extractions", global_config=config),
        community_reports=kv_cls(namespace="community_reports", global_config=config),
        llm_response_cache=cache,
        entities_vdb=vector_cls(namespace="entities", global_config=config, embedding_func=embedding_func,
                                meta_fields={"entity_name"}) if config.enable_local else None,
        # Chunk vectors carry only the chunk id: the document a chunk belongs to can change
        # (shared chunks), and text_chunks is the one place that records it.
        chunks_vdb=vector_cls(namespace="chunks", global_config=config, embedding_func=embedding_func)
        if config.enable_naive_rag else None,
        graph=graph_cls(namespace="chunk_entity_relation", global_config=config),
        index_meta=kv_cls(namespace="index_meta", global_config=config),
    )
