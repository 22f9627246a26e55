"""The rerank stage of the passage modes: the first passages a mode ranked, ordered again by
a model that reads the question and each passage together (the scorers are built in
``graphrag/rerank.py``; a mode calls :func:`rerank_chunks`, which does nothing unless the
engine handed the stores a reranker).

A bi-encoder (the chunk vectors) compares two vectors made apart; a cross-encoder reads
question and passage at once, which orders the top of a list better and costs one model
pass per passage, so only the first ``candidates`` are reordered. Scores are cached in the
LLM response cache and counted in the usage stats under the stage ``rerank``, as model
calls are.
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Optional, Protocol, Sequence, TypeVar

from .chunking import compute_id

if TYPE_CHECKING:
    from graphrag.llm.usage import UsageCounter
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)

RERANK_STAGE = "rerank"
Scorer = Callable[[str, list[str]], Awaitable[list[float]]]
T = TypeVar("T")


class Reranker:
    """Orders passages for a question with ``scorer``; each (model, question, passages)
    scored once, then read from ``cache`` (a KV store, or None)."""

    def __init__(self, scorer: Scorer, model_id: str, candidates: int, usage: Optional[UsageCounter] = None,
                 cache: Optional[BaseKVStorage] = None) -> None:
        self.scorer = scorer
        self.model_id = model_id
        self.candidates = candidates
        self.usage = usage
        self.cache = cache

    async def scores(self, question: str, passages: list[str]) -> list[float]:
        key = compute_id(json.dumps([self.model_id, question, passages], ensure_ascii=False), "rerank-")
        cached = await self.cache.get_by_id(key) if self.cache is not None else None
        if cached is not None:
            self._count(cached=1)
            return [float(s) for s in json.loads(cached["return"])]
        scores = [float(s) for s in await self.scorer(question, passages)]
        if len(scores) != len(passages):
            raise ValueError(f"the reranker scored {len(scores)} of {len(passages)} passages")
        self._count(calls=1)
        if self.cache is not None:
            await self.cache.upsert({key: {"return": json.dumps(scores), "model": self.model_id}})
        return scores

    def _count(self, **counts: int) -> None:
        if self.usage is not None:
            self.usage.record(RERANK_STAGE, **counts)

    async def reorder(self, question: str, items: Sequence[T], read: Callable[[list[T]], Awaitable[list[str]]]
                      ) -> list[T]:
        """``items`` with their first ``candidates`` ordered by score (ties keep their order),
        the rest after them as they were; ``read`` gives each item's passage text."""
        head, tail = list(items[:self.candidates]), list(items[self.candidates:])
        if len(head) < 2:
            return list(items)
        scores = await self.scores(question, await read(head))
        order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
        return [head[i] for i in order] + tail


class RerankedStores(Protocol):
    """What :func:`rerank_chunks` reads of ``graphrag.stores.Stores``, named here because that
    module names :class:`Reranker` (importing it back would be a cycle)."""

    @property
    def reranker(self) -> Optional[Reranker]: ...

    @property
    def text_chunks(self) -> BaseKVStorage: ...


async def rerank_chunks(question: str, items: Sequence[T], stores: RerankedStores, chunk_id: Callable[[T], str] = str
                        ) -> list[T]:
    """``items`` (chunk ids, or records ``chunk_id`` reads one from) reordered by the stores'
    reranker; unchanged when none is configured."""
    reranker: Optional[Reranker] = getattr(stores, "reranker", None)
    if reranker is None or not items:
        return list(items)

    async def read(head: list[T]) -> list[str]:
        records = await stores.text_chunks.get_by_ids([chunk_id(i) for i in head])
        return [(r or {}).get("content", "") for r in records]

    return await reranker.reorder(question, items, read)
