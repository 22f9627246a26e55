"""Retrieval evaluation on the user's own labelled questions (``graphrag eval``): no LLM.

Each question names what answering it needs, either as documents (``gold_sources``: a
document's ``source`` or its id) or as passages (``gold_passages``: a snippet of each passage's
text). Every passage mode of the registry retrieves for each question; a gold item is found
at the rank of the first retrieved chunk that belongs to it (same document, or containing
the snippet). Recall@k is the share of a question's gold items found among the first k
distinct items retrieved, recall in context the share found anywhere in the context;
both are averaged over questions.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from graphrag.errors import LabelledQuestionsError
from graphrag.records import Chunk

if TYPE_CHECKING:
    from graphrag.graphrag import GraphRAG

DEFAULT_KS = (2, 5)

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class LabelledQuestion:
    question: str
    gold_sources: tuple[str, ...] = ()
    gold_passages: tuple[str, ...] = ()


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def read_labelled(lines: Sequence[str]) -> list[LabelledQuestion]:
    """Questions from JSONL lines ``{"question", "gold_sources": [...]}`` or ``{"question",
    "gold_passages": [...]}`` (blank lines skipped)."""
    questions = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise LabelledQuestionsError(f"line {number}: not JSON ({exc})") from exc
        if not isinstance(record, dict) or not str(record.get("question") or "").strip():
            raise LabelledQuestionsError(f"line {number}: no question")
        sources = tuple(str(s) for s in record.get("gold_sources") or ())
        passages = tuple(_normal(str(p)) for p in record.get("gold_passages") or () if str(p).strip())
        if not sources and not passages:
            raise LabelledQuestionsError(f"line {number}: neither gold_sources nor gold_passages")
        questions.append(LabelledQuestion(record["question"], sources, passages))
    return questions


def gold_ranks(question: LabelledQuestion, chunks: Sequence[Chunk]) -> list[Optional[int]]:
    """For each gold item, its rank (from 0) among the distinct gold-or-other items the
    chunks stand for, in context order; None when no chunk holds it. Documents count once
    however many of their chunks were retrieved; a snippet is found in the chunk holding it."""
    ranks: list[Optional[int]] = []
    if question.gold_sources:
        order: list[str] = []
        keys: dict[str, int] = {}
        for chunk in chunks:
            names = {chunk.doc_id, *(d.id for d in chunk.documents), *(d.source for d in chunk.documents if d.source)}
            if chunk.source:
                names.add(chunk.source)
            key = min(names)  # one key per document, whichever of its names
            if key not in keys:
                keys[key] = len(order)
                order.append(key)
            for name in names:
                keys.setdefault(name, keys[key])
        ranks += [keys.get(s) for s in question.gold_sources]
    if question.gold_passages:
        texts = [_normal(c.content) for c in chunks]
        ranks += [next((i for i, t in enumerate(texts) if p in t), None) for p in question.gold_passages]
    return ranks


def score_ranks(per_question: Sequence[Sequence[Optional[int]]], ks: Sequence[int]) -> dict[str, float]:
    """Recall@k for each k and recall in context, in percent, averaged over questions."""
    n = max(len(per_question), 1)

    def found(ranks: Sequence[Optional[int]], k: Optional[int]) -> float:
        hits = [r for r in ranks if r is not None and (k is None or r < k)]
        return len(hits) / len(ranks) if ranks else 0.0

    scores = {f"recall@{k}": round(100 * sum(found(r, k) for r in per_question) / n, 1) for k in ks}
    scores["in_context"] = round(100 * sum(found(r, None) for r in per_question) / n, 1)
    return scores


def passage_modes() -> list[str]:
    """The registered modes whose retrieval is passages (chunks), the ones recall applies to."""
    from graphrag.operators.modes import get_mode, mode_names

    return [m for m in mode_names() if get_mode(m).cites == "chunks"]


async def evaluate_retrieval(rag: GraphRAG, questions: Sequence[LabelledQuestion], modes: Sequence[str],
                             ks: Sequence[int] = DEFAULT_KS, top_k: Optional[int] = None) -> dict[str, dict[str, float]]:
    """Per mode: Recall@k and recall in context over ``questions`` (``rag.aretrieve``)."""
    from graphrag.query_param import QueryParam

    results: dict[str, dict[str, float]] = {}
    for mode in modes:
        param = QueryParam(mode=mode, **({"top_k": top_k} if top_k is not None else {}))
        per_question = [gold_ranks(q, (await rag.aretrieve(q.question, param)).chunks) for q in questions]
        results[mode] = score_ranks(per_question, ks)
    return results
