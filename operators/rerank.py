"""The head of a passage mode's order: the first passages a mode ranked, ordered again before
they are packed. A mode calls :func:`rerank_chunks`, which does two things over the first
``rerank_candidates`` passages:

* with ``QueryParam.named_headings_first`` (hybrid's and local's Sources by default) or the
  ``"embedding"`` rerank stage, a passage whose heading the question names goes first
  (:func:`named_headings_first`): no model, only the passages' first lines;
* when the engine handed the stores a reranker (``GraphRAGConfig.rerank``, off by default;
  the scorers are built in ``graphrag/rerank.py``), a model that reads the question and each
  passage together orders them again.

A bi-encoder (the chunk vectors) compares two vectors made apart; a cross-encoder reads
question and passage at once, which orders the top of a list better and costs one model
pass per passage, so only the first ``candidates`` are reordered. Scores are cached in the
LLM response cache and counted in the usage stats under the stage ``rerank``, as model
calls are.
"""
from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Protocol, Sequence, TypeVar

from .chunking import compute_id

if TYPE_CHECKING:
    from graphrag.llm.usage import UsageCounter
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)

RERANK_STAGE = "rerank"
Scorer = Callable[[str, list[str]], Awaitable[list[float]]]
T = TypeVar("T")

# A passage's first line is its heading when more text follows and it is at most this many
# words without a sentence's end (a title, not a wrapped line of prose).
MAX_HEADING_WORDS = 12
_WORDS = re.compile(r"\w+")
_TRAILING_PARENTHESIS = re.compile(r"\s*\(([^()]*)\)\s*$")


def passage_heading(passage: str) -> Optional[str]:
    """The passage's first line when it reads as a heading: more text follows, it is short and
    does not end a sentence. None otherwise."""
    first, newline, rest = passage.strip().partition("\n")
    first = first.strip().lstrip("#").strip()
    if not newline or not rest.strip() or not first or first[-1] in ".!?;:,":
        return None
    return first if len(_WORDS.findall(first)) <= MAX_HEADING_WORDS else None


def heading_named(heading: str, question: str) -> bool:
    """Whether the question names what the heading does: the heading's words, a trailing
    parenthesis apart, appear together in the question, and the parenthesis's words (a
    disambiguation, "(band)") somewhere in it. Two passages whose headings share a name then
    differ by whether the question says which one it means."""
    question_words = _WORDS.findall(question.lower())
    qualifier = _TRAILING_PARENTHESIS.search(heading)
    name = _WORDS.findall((heading[:qualifier.start()] if qualifier else heading).lower())
    if not name or (qualifier and not set(_WORDS.findall(qualifier.group(1).lower())) <= set(question_words)):
        return False
    return f" {' '.join(name)} " in f" {' '.join(question_words)} "


def named_headings_first(question: str, chunks: Sequence[Optional[dict[str, Any]]]) -> list[int]:
    """The positions of ``chunks`` (stored chunk records, in a mode's order) with those whose
    heading the question names first, each group in its order. Only a document's first chunk
    has a heading: another chunk's first line is wherever the chunker cut the text, and a
    fragment of hard-wrapped prose would read as one. A vector or walk order lets a
    look-alike that repeats the question's words stand above the passage it names by title."""
    named = [i for i, c in enumerate(chunks)
             if c and c.get("chunk_order_index") == 0 and (h := passage_heading(c.get("content") or ""))
             and heading_named(h, question)]
    first = set(named)
    return named + [i for i in range(len(chunks)) if i not in first]


class Reranker:
    """Orders passages for a question with ``scorer``; each (model, question, passages)
    scored once, then read from ``cache`` (a KV store, or None). ``headings_first``: the
    stage puts the passages whose heading the question names first before it scores
    (``rerank="embedding"``, whose scores keep the order they get as a prior)."""

    def __init__(self, scorer: Scorer, model_id: str, candidates: int, usage: Optional[UsageCounter] = None,
                 cache: Optional[BaseKVStorage] = None, headings_first: bool = False) -> None:
        self.scorer = scorer
        self.model_id = model_id
        self.candidates = candidates
        self.usage = usage
        self.cache = cache
        self.headings_first = headings_first

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

    async def order(self, question: str, passages: list[str]) -> list[int]:
        """The positions of ``passages`` by score, best first (ties keep their order)."""
        scores = await self.scores(question, passages)
        return sorted(range(len(passages)), key=lambda i: (-scores[i], i))


class RerankedStores(Protocol):
    """What :func:`rerank_chunks` reads of ``graphrag.stores.Stores``, named here because that
    module names :class:`Reranker` (importing it back would be a cycle)."""

    @property
    def reranker(self) -> Optional[Reranker]: ...

    @property
    def head_candidates(self) -> int: ...

    @property
    def text_chunks(self) -> BaseKVStorage: ...


async def rerank_chunks(question: str, items: Sequence[T], stores: RerankedStores, chunk_id: Callable[[T], str] = str,
                        headings_first: bool = False) -> list[T]:
    """``items`` (chunk ids, or records ``chunk_id`` reads one from) with their first
    ``stores.head_candidates`` reordered: those whose heading the question names first when
    ``headings_first`` or the stores' reranker asks for it (:func:`named_headings_first`),
    then by the stores' reranker when one is configured; the rest after them as they were."""
    reranker = stores.reranker
    headings_first = headings_first or (reranker is not None and reranker.headings_first)
    candidates = reranker.candidates if reranker is not None else stores.head_candidates
    head, tail = list(items[:candidates]), list(items[candidates:])
    if len(head) < 2 or (reranker is None and not headings_first):
        return list(items)
    records = await stores.text_chunks.get_by_ids([chunk_id(i) for i in head])
    if headings_first:
        order = named_headings_first(question, records)
        head, records = [head[i] for i in order], [records[i] for i in order]
    if reranker is not None:
        order = await reranker.order(question, [(r or {}).get("content", "") for r in records])
        head = [head[i] for i in order]
    return head + tail
