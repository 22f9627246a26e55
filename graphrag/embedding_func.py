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
    _semaphores: PerLoop[asyncio.Semaphore] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._semaphores = PerLoop(lambda: asyncio.Semaphore(self.max_async or 1))

    async def __call__(self, texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if not self.max_async:
            return await self.func(texts, *args, **kwargs)
        async with self._semaphores.get():
            return await self.func(texts, *args, **kwargs)
