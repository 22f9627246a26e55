"""Rerank scorers, chosen by ``GraphRAGConfig.rerank`` (the stage itself is
``operators/rerank.py``):

* ``"cross-encoder:NAME_OR_PATH"``: a sentence-transformers cross-encoder, from local
  files only (nothing is downloaded at query time);
* ``"http://..."`` / ``"https://..."``: a rerank endpoint in the shape TEI, Cohere and Jina
  share (the query and the passages in, an index and a score per passage out);
* ``"llm"``: listwise, the cheap model lists the passages' numbers best first;
* ``"embedding"``: no other model, the index's own embedding model read closer (the passages
  whose heading the question names first, ``operators/rerank.py``, then each passage's best
  sentence): :func:`embedding_scorer`.
"""
from __future__ import annotations

import asyncio
import logging
import re
import sys
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Union

from graphrag.operators.rerank import RERANK_STAGE, Reranker, Scorer, passage_heading

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import CrossEncoder

    from graphrag.embedding_func import EmbeddingFunc
    from graphrag.llm.client import LLMClient
    from graphrag.llm.usage import UsageCounter
    from graphrag.operators.extraction import LLMCall
    from graphrag.operators.tokenizer import Tokenizer
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)


def cross_encoder_scorer(model: str) -> Scorer:
    """A sentence-transformers cross-encoder by name (from the local cache) or path, loaded
    on first use."""
    loaded: list[CrossEncoder] = []

    def predict(question: str, passages: list[str]) -> list[float]:
        if not loaded:
            from sentence_transformers import CrossEncoder

            loaded.append(CrossEncoder(model, local_files_only=True))
        return [float(s) for s in loaded[0].predict([(question, p) for p in passages])]

    async def score(question: str, passages: list[str]) -> list[float]:
        return await asyncio.to_thread(predict, question, passages)

    return score


def http_scorer(url: str, model: Optional[str] = None, api_key: Optional[str] = None, timeout: float = 30.0) -> Scorer:
    """A rerank endpoint: TEI (``{"query", "texts"}`` -> ``[{"index", "score"}]``) and Cohere /
    Jina (``{"model", "query", "documents"}`` -> ``{"results": [{"index",
    "relevance_score"}]}``) both read the body sent here and both answers are read."""

    async def score(question: str, passages: list[str]) -> list[float]:
        import httpx

        body: dict[str, Any] = {"query": question, "texts": passages, "documents": passages,
                                "top_n": len(passages), "return_documents": False}
        if model:
            body["model"] = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(url, json=body, headers=headers)
            response.raise_for_status()
            answer = response.json()
        results = answer.get("results", answer.get("data")) if isinstance(answer, dict) else answer
        scores = [float("-inf")] * len(passages)
        for result in results or ():
            value = result.get("relevance_score", result.get("score"))
            if value is not None and 0 <= int(result["index"]) < len(passages):
                scores[int(result["index"])] = float(value)
        return scores

    return score


_NUMBER = re.compile(r"\[(\d+)\]")


def listwise_scorer(llm: LLMCall, tokenizer: Tokenizer, passage_tokens: int = 200) -> Scorer:
    """The cheap model lists the passages' numbers, most useful first (RankGPT's listwise
    prompt); a passage it leaves out ranks after those it lists, in its earlier order."""
    from graphrag.prompts import render

    async def score(question: str, passages: list[str]) -> list[float]:
        listed = "\n".join(f"[{n}] {tokenizer.truncate(p, passage_tokens)}" for n, p in enumerate(passages, 1))
        answer = await llm(render("rerank_listwise", question=question, passages=listed, count=len(passages)),
                           stage=RERANK_STAGE)
        order = list(dict.fromkeys(int(n) - 1 for n in _NUMBER.findall(str(answer)) if 0 < int(n) <= len(passages)))
        scores = [-float(len(passages) + i) for i in range(len(passages))]
        for rank, i in enumerate(order):
            scores[i] = -float(rank)
        return scores

    return score


# The weight of the best-sentence order beside the mode's own order (which weighs 1) in the
# embedding scorer's fusion; chosen on the dev halves, benchmarks/README.md "Round 6 (issue 35)".
SENTENCE_ORDER_WEIGHT = 0.25
# Bytes of passages' sentence vectors the embedding scorer keeps between queries.
SENTENCE_VECTOR_BYTES = 1 << 24


def passage_sentences(passage: str, heading: Optional[str] = None) -> list[str]:
    """What the embedding scorer embeds of a passage: its sentences, each written after its
    heading ("Heading: sentence") when it has one (``heading``: :func:`passage_heading`'s)."""
    from graphrag.operators.nlp_extraction import split_sentences

    body = passage.strip().partition("\n")[2] if heading else passage
    return [f"{heading}: {s}" if heading else s for s in split_sentences(body) or [passage]]


async def embed_sentences(embed: Callable[[list[str]], Awaitable["np.ndarray"]], passages: list[str],
                          question: Optional[str] = None) -> tuple[Optional["np.ndarray"], list["np.ndarray"]]:
    """Each passage's sentence vectors, unit length, in one model pass (with ``question``'s
    vector, returned first, when one is given)."""
    import numpy as np

    found = [passage_sentences(p, passage_heading(p)) for p in passages]
    texts = [*([question] if question is not None else []), *(s for sentences in found for s in sentences)]
    if not texts:
        return None, []
    vectors = np.asarray(await embed(texts), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    first = 1 if question is not None else 0
    rows = []
    for sentences in found:
        rows.append(vectors[first:first + len(sentences)].copy())
        first += len(sentences)
    return (vectors[0] if question is not None else None), rows


def embedding_model_name(embedding_func: object) -> str:
    """What names the embedding model in the rerank cache's keys and the kept sentence vectors."""
    return str(getattr(embedding_func, "name", None) or getattr(embedding_func, "long_texts", None) or "default")


class SentenceVectors:
    """The passages' sentence vectors kept with the index (a KV namespace, one record per chunk
    id, written at insert and dropped with the chunk), so a question meeting a passage for the
    first time costs no model pass over its sentences. Chunk ids are content-addressed
    (``chunking.chunk_id_for``), so a passage's record is found from its text. A record made
    by another embedding model is not read."""

    def __init__(self, store: Callable[[], Optional[BaseKVStorage]], model: str) -> None:
        self.store = store  # the stores' current KV store, or None (the stage off, or no index)
        self.model = model

    def record(self, rows: "np.ndarray") -> dict[str, Union[str, int]]:
        import base64

        return {"model": self.model, "dim": int(rows.shape[1]),
                "vectors": base64.b64encode(rows.astype("<f4").tobytes()).decode("ascii")}

    def rows(self, record: Optional[dict[str, Any]]) -> Optional["np.ndarray"]:
        import base64

        import numpy as np

        if not isinstance(record, dict) or record.get("model") != self.model:
            return None
        return np.frombuffer(base64.b64decode(record["vectors"]), dtype="<f4").reshape(-1, int(record["dim"]))

    async def read(self, passages: list[str]) -> dict[str, "np.ndarray"]:
        """The kept rows of those of ``passages`` that have them, by passage."""
        from graphrag.operators.chunking import chunk_id_for

        store = self.store()
        if store is None or not passages:
            return {}
        records = await store.get_by_ids([chunk_id_for(p) for p in passages])
        return {p: rows for p, r in zip(passages, records) if (rows := self.rows(r)) is not None}

    async def write(self, embed: Callable[[list[str]], Awaitable["np.ndarray"]], chunks: dict[str, str]) -> None:
        """Embed and keep the sentences of ``chunks`` (chunk id -> text)."""
        store = self.store()
        if store is None or not chunks:
            return
        _, rows = await embed_sentences(embed, list(chunks.values()))
        await store.upsert({chunk_id: self.record(r) for chunk_id, r in zip(chunks, rows)})

    async def catch_up(self, text_chunks: BaseKVStorage, skip: set[str]) -> dict[str, str]:
        """Make the store's keys those of ``text_chunks`` again (those in ``skip`` apart: this
        write's new and removed chunks): records of chunks deleted while the stage was off are
        dropped, and the text of every chunk without vectors (an index written before the stage
        was on, or chunks written while it was off) is returned (chunk id -> text) to embed.
        Compares key lists only, so a write whose store is current reads no record."""
        from graphrag.storage.base import catch_up_keys  # the storage package imports networkx

        store = self.store()
        if store is None:
            return {}
        ids = await catch_up_keys(set(await store.all_keys()), set(await text_chunks.all_keys()), skip,
                                  store.delete, "sentence vectors")
        return {i: r["content"] for i, r in zip(ids, await text_chunks.get_by_ids(ids)) if r}

    async def delete(self, chunk_ids: list[str]) -> None:
        store = self.store()
        if store is not None and chunk_ids:
            await store.delete(chunk_ids)


def embedding_scorer(embed: Callable[[list[str]], Awaitable["np.ndarray"]], k: int = 60,
                     kept_with_index: Optional[SentenceVectors] = None) -> Scorer:
    """Rescores the head of a mode's order with the embedding model the index already has (no
    reranker weights): the order it is given (the stage puts the passages whose heading the
    question names first, ``operators/rerank.py: named_headings_first``) is fused (reciprocal
    ranks at ``k``) with the order of each passage's best sentence, its heading written before
    it, by similarity to the question. A passage's mean vector lets a look-alike that shares
    the question's names stand as high as the passage that answers; its best sentence tells
    them apart. The scores keep the given order as a prior, so a passage no signal favours
    stays where it was. For a question in a script the embedder cannot read, the given order
    stands. Sentence vectors come from ``kept_with_index`` when the insert stored them, else
    are embedded here."""
    import numpy as np

    from graphrag.operators.lexical import embedder_reads
    from graphrag.operators.text_cache import TextCache

    # A passage's sentence vectors do not depend on the question: kept between queries, so a
    # passage met again costs no model pass (nor a read of the index's copy).
    kept: TextCache[str, np.ndarray] = TextCache(SENTENCE_VECTOR_BYTES,
                                                 lambda passage, rows: sys.getsizeof(passage) + rows.nbytes)

    async def score(question: str, passages: list[str]) -> list[float]:
        if not embedder_reads(embed, question):  # its similarities would be noise
            return [1.0 / (k + i) for i in range(len(passages))]
        distinct = list(dict.fromkeys(passages))
        rows_of = {p: rows for p in distinct if (rows := kept.peek(p)) is not None}
        if kept_with_index is not None:
            rows_of.update(await kept_with_index.read([p for p in distinct if p not in rows_of]))
        missing = [p for p in distinct if p not in rows_of]
        question_vector, found = await embed_sentences(embed, missing, question)
        rows_of.update(zip(missing, found))
        for passage, rows in rows_of.items():
            kept.get(passage, lambda rows=rows: rows)
        best = [float((rows_of[p] @ question_vector).max()) for p in passages]
        by_sentence = sorted(range(len(passages)), key=lambda i: (-best[i], i))
        scores = [0.0] * len(passages)
        for order, weight in ((range(len(passages)), 1.0), (by_sentence, SENTENCE_ORDER_WEIGHT)):
            for rank, i in enumerate(order):
                scores[i] += weight / (k + rank)
        return scores

    return score


def build_reranker(spec: Optional[str], candidates: int, *, usage: Optional[UsageCounter] = None,
                   cache: Optional[BaseKVStorage] = None, cheap_llm: Optional[Callable[[], LLMClient]] = None,
                   tokenizer: Optional[Tokenizer] = None, model: Optional[str] = None, api_key: Optional[str] = None,
                   embedding_func: Optional[EmbeddingFunc] = None,
                   sentence_store: Optional[Callable[[], Optional[BaseKVStorage]]] = None) -> Optional[Reranker]:
    """The reranker ``spec`` names (see the module docstring); None for None or ``""``.
    ``sentence_store``: the stores' ``sentence_vectors`` as they are now (``"embedding"``)."""
    if not spec:
        return None
    if spec.startswith("cross-encoder:"):
        name = spec.split(":", 1)[1]
        return Reranker(cross_encoder_scorer(name), spec, candidates, usage, cache)
    if spec.startswith(("http://", "https://")):
        return Reranker(http_scorer(spec, model, api_key), f"{spec}#{model or ''}", candidates, usage, cache)
    if spec == "llm":
        if cheap_llm is None or tokenizer is None:
            raise ValueError("rerank='llm' needs an LLM and a tokenizer")
        llm = cheap_llm()
        # The model client caches and counts its own calls.
        return Reranker(listwise_scorer(llm, tokenizer), f"llm:{getattr(llm, 'model_id', 'cheap')}", candidates)
    if spec == "embedding":
        if embedding_func is None:
            raise ValueError("rerank='embedding' needs an embedding function")
        from graphrag.operators.query_hybrid import RRF_K

        name = embedding_model_name(embedding_func)
        kept = SentenceVectors(sentence_store, name) if sentence_store is not None else None
        # "v2": the headings are put first before scoring, no longer inside the scores, so
        # scores cached by the earlier scorer are not read as this one's.
        return Reranker(embedding_scorer(embedding_func, RRF_K, kept), f"embedding-v2:{name}", candidates, usage,
                        cache, headings_first=True)
    raise ValueError(f"rerank must be 'cross-encoder:NAME_OR_PATH', an http(s) URL, 'llm' or 'embedding', not {spec!r}")
