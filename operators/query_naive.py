"""Naive queries: plain vector search over chunks, no graph."""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional

from graphrag.query_param import QueryParam
from graphrag.records import Chunk, Retrieval

from .lexical import dense_for_fusion, lexical_ranking
from .positions import cited_content
from .query_hybrid import fuse
from .query_context import answer_from_context, pack_texts
from .rerank import rerank_chunks
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from graphrag.stores import Stores

    from .extraction import LLMCall

logger = logging.getLogger(__name__)

CHUNK_SEPARATOR = "\n--New Chunk--\n"
NAIVE_NEEDS_CHUNKS = "Naive queries need the chunk vector store: build the index with enable_naive_rag=True."


async def retrieve_naive(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer,
                         cited: bool = False) -> Optional[Retrieval]:
    """The best-matching chunks, most similar first, within ``naive_max_token_for_text_unit``.

    None when there is no chunk store or nothing matches. ``cited``: each chunk is preceded
    by its number, ``[1]`` first, the numbers a cited answer uses.
    """
    if stores.chunks_vdb is None:
        return None
    hits = await stores.chunks_vdb.query(query, top_k=param.top_k)
    similarity: dict[str, Any] = {}
    for hit in hits:
        if hit.get("id") and hit["id"] not in similarity:
            similarity[hit["id"]] = hit.get("distance")
    # The lexical channel's ranking joins the vector ranking by reciprocal-rank fusion; the
    # rerank stage (when configured) reorders the fused list's head.
    lexical = await lexical_ranking(query, stores, param.top_k)
    dense = dense_for_fusion(query, list(similarity), lexical, stores.chunks_vdb)
    ids = await rerank_chunks(query, fuse([dense, lexical]), stores)
    if not ids:
        return None
    records = await stores.text_chunks.get_by_ids(ids)
    found, texts = [], []
    for i, r in zip(ids, records):
        if r is not None and r.get("content"):
            found.append(replace(Chunk.from_stored(i, r), score=similarity.get(i)))
            texts.append(cited_content(r))
    if len(found) < len(ids):
        logger.warning("%d matched chunks are missing from text_chunks", len(ids) - len(found))
    if cited:
        texts = [f"[{n}] {text}" for n, text in enumerate(texts, 1)]
    context, kept = pack_texts(texts, CHUNK_SEPARATOR, param.naive_max_token_for_text_unit, tokenizer)
    logger.info("Naive context: %d/%d chunks", kept, len(texts))
    if not context:
        return None
    return Retrieval(question=query, mode="naive", chunks=tuple(found[:kept]), context=context)


async def build_naive_context(query: str, stores: Stores, param: QueryParam, tokenizer: Tokenizer) -> Optional[str]:
    """The naive context string (see :func:`retrieve_naive`)."""
    retrieval = await retrieve_naive(query, stores, param, tokenizer)
    return retrieval.context if retrieval is not None else None


async def naive_query(query: str, stores: Stores, param: QueryParam, *, llm: LLMCall, tokenizer: Tokenizer) -> str:
    """Answer ``query`` from the most similar chunks (or return them when ``only_need_context``)."""
    if stores.chunks_vdb is None:
        return NAIVE_NEEDS_CHUNKS
    context = await build_naive_context(query, stores, param, tokenizer)
    return await answer_from_context(query, context, param, llm, "naive_rag_response", "content_data")
