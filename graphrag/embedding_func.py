"""``EmbeddingFunc``, the shape every embedder takes, apart from the embedders themselves
so that a transport (``llm/openai_transport.py``) can build one without importing
``embedding.py``, which imports the transports."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

import numpy as np

from graphrag.aio import PerLoop


@dataclass
class EmbeddingFunc:
    """An async ``list[str] -> ndarray`` carrying what the stores need to know about it."""

    embedding_dim: int
    max_token_size: int
    func: Callable[[list[str]], Awaitable[np.ndarray]]
    max_async: Optional[int] = None
    # How texts longer than the model's window are embedded ("pooled" or "truncated"); recorded
    # in the index so one index never mixes the two. None: a user's function, not recorded.
    long_texts: Optional[str] = None
    # What makes the vectors ("openai-compatible:bge-m3", "sentence-transformers:<model>"),
    # recorded in the index so vectors of two models never mix; None: the bundled model
    # (``long_texts`` set) or a user's function (not recorded).
    name: Optional[str] = None
    # The model reads Latin script only (the bundled English model): it ranks a question mostly
    # in another script poorly, and the lexical channel's ranking stands in for its own.
    latin_only: bool = False
    _semaphores: PerLoop[asyncio.Semaphore] = field(init=False, repr=False, compare=False)
    # The last single text embedded and its vector: one query asks several vector stores
    # (chunks, then relations or entities) with the same question, which is embedded once.
    _last: Optional[tuple[str, np.ndarray]] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._semaphores = PerLoop(lambda: asyncio.Semaphore(self.max_async or 1))

    async def __call__(self, texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        single = len(texts) == 1 and not args and not kwargs
        last = self._last
        if single and last is not None and last[0] == texts[0]:
            return last[1].copy()
        if not self.max_async:
            vectors = await self.func(texts, *args, **kwargs)
        else:
            async with self._semaphores.get():
                vectors = await self.func(texts, *args, **kwargs)
        if single:
            self._last = (texts[0], np.array(vectors, copy=True))
        return vectors
