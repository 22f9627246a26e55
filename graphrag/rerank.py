"""Rerank scorers, chosen by ``GraphRAGConfig.rerank`` (the stage itself is
``operators/rerank.py``):

* ``"cross-encoder:NAME_OR_PATH"``: a sentence-transformers cross-encoder, from local
  files only (nothing is downloaded at query time);
* ``"http://..."`` / ``"https://..."``: a rerank endpoint in the shape TEI, Cohere and Jina
  share (the query and the passages in, an index and a score per passage out);
* ``"llm"``: listwise, the cheap model lists the passages' numbers best first.
"""
from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Callable, Optional

from graphrag.operators.rerank import RERANK_STAGE, Reranker, Scorer

logger = logging.getLogger(__name__)

def cross_encoder_scorer(model: str) -> Scorer:
    """A sentence-transformers cross-encoder by name (from the local cache) or path, loaded
    on first use."""
    loaded: list[Any] = []

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


def listwise_scorer(llm: Any, tokenizer: Any, passage_tokens: int = 200) -> Scorer:
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


def build_reranker(spec: Optional[str], candidates: int, *, usage: Any = None, cache: Any = None,
                   cheap_llm: Optional[Callable[[], Any]] = None, tokenizer: Any = None,
                   model: Optional[str] = None, api_key: Optional[str] = None) -> Optional[Reranker]:
    """The reranker ``spec`` names (see the module docstring); None for None or ``""``."""
    if not spec:
        return None
    if spec.startswith("cross-encoder:"):
        name = spec.split(":", 1)[1]
        return Reranker(cross_encoder_scorer(name), spec, candidates, usage, cache)
    if spec.startswith(("http://", "https://")):
        return Reranker(http_scorer(spec, model, api_key), f"{spec}#{model or ''}", candidates, usage, cache)
    if spec == "llm":
        if cheap_llm is None:
            raise ValueError("rerank='llm' needs an LLM")
        llm = cheap_llm()
        # The model client caches and counts its own calls.
        return Reranker(listwise_scorer(llm, tokenizer), f"llm:{getattr(llm, 'model_id', 'cheap')}", candidates)
    raise ValueError(f"rerank must be 'cross-encoder:NAME_OR_PATH', an http(s) URL or 'llm', not {spec!r}")
