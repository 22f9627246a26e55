"""Naive queries: plain vector search over chunks, no graph."""
from __future__ import annotations

import logging
from typing import Any, Optional

from graphrag.query_param import QueryParam

from .positions import cited_content
from .query_context import answer_from_context, pack_texts
from .tokenizer import Tokenizer

logger = logging.getLogger(__name__)

CHUNK_SEPARATOR = "\n--New Chunk--\n"
NAIVE_NEEDS_CHUNKS = "Naive queries need the chunk vector store: build the index with enable_naive_rag=True."


async def build_naive_context(query: str, stores: Any, param: QueryParam, tokenizer: Tokenizer) -> Optional[str]:
    """The best-matching chunks, most similar first, within ``naive_max_token_for_text_unit``.

    None when there is no chunk store or nothing matches.
    """
    if stores.chunks_vdb is None:
        return None
    hits = await stores.chunks_vdb.query(query, top_k=param.top_k)
    ids = list(dict.fromkeys(h["id"] for h in hits if h.get("id")))
    if not ids:
        return None
    records = await stores.text_chunks.get_by_ids(ids)
    texts = [cited_content(r) for r in records if r is not None and r.get("content")]
    if len(texts) < len(ids):
        logger.warning("%d matched chunks are missing from text_chunks", len(ids) - len(texts))
    context, kept = pack_texts(texts, CHUNK_SEPARATOR, param.naive_max_token_for_text_unit, tokenizer)
    logger.info("Naive context: %d/%d chunks", kept, len(texts))
    return context or None


async def naive_query(query: str, stores: Any, param: QueryParam, *, llm: Any, tokenizer: Tokenizer) -> str:
    """Answer ``query`` from the most similar chunks (or return them when ``only_need_context``)."""
    if stores.chunks_vdb is None:
        return NAIVE_NEEDS_CHUNKS
    context = await build_naive_context(query, stores, param, tokenizer)
    return await answer_from_context(query, context, param, llm, "naive_rag_response", "content_data")
