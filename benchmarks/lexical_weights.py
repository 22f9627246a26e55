"""What weight the lexical channel's ranking should have in the fusion, per split.

    python benchmarks/lexical_weights.py --corpus CORPUS --questions QUESTIONS --working-dir DIR

``DIR`` is an index ``retrieval_eval.py --working-dir DIR/..`` kept (built with the lexical
channel on). Each question is asked once in naive and hybrid mode; the rankings fused
(vectors and BM25; walk, vectors and BM25) are recorded, then fused again offline with the
lexical ranking weighted 0 ... 3, and Recall@2/@5 printed for the dev and test halves (BM25
alone and vectors alone too). It reads the rankings the modes build for every question, so
run it on a commit whose ``lexical_ranking`` answers the questions of the set (the engine
leaves Latin-script questions out: measure those on a commit before that rule, 5c05f8c~1).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from retrieval_eval import in_split, load_qa, recall  # noqa: E402

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0)


def weighted_fusion(rankings: list[list[str]], weights: list[float], k: int = 60) -> list[str]:
    """Reciprocal-rank fusion with a weight per ranking (ties: first seen first)."""
    scores: dict[str, float] = {}
    first: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights):
        for position, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + weight / (k + position)
            first.setdefault(item, len(first))
    return sorted(scores, key=lambda item: (-scores[item], first[item]))


def capture(corpus: str, questions_path: str, working_dir: str) -> list[dict[str, Any]]:
    """Per question: the rankings each mode fused, as passage titles, and the gold titles."""
    from graphrag import GraphRAG, QueryParam
    from graphrag.embedding import local_embedding
    from graphrag.operators import query_hybrid, query_naive

    _, questions = load_qa(corpus, questions_path)
    fused: list[list[list[str]]] = []
    original = query_hybrid.fuse

    def recording(rankings: list[list[str]], k: int = query_hybrid.RRF_K) -> list[str]:
        fused.append([list(r) for r in rankings])
        return original(rankings, k)

    query_hybrid.fuse = query_naive.fuse = recording  # type: ignore[assignment]
    rag = GraphRAG(working_dir=working_dir, embedding_func=local_embedding(), extraction="nlp", show_progress=False)

    async def ask() -> list[dict[str, Any]]:
        out = []
        for q in questions:
            record: dict[str, Any] = {"gold": q.gold}
            for mode in ("naive", "hybrid"):
                fused.clear()
                await rag.aquery(q.text, QueryParam(mode=mode, only_need_context=True))
                record[mode] = fused[-1]
            out.append(record)
        return out

    records = asyncio.run(ask())
    ids = sorted({c for r in records for m in ("naive", "hybrid") for ranking in r[m] for c in ranking})
    chunks = asyncio.run(rag.stores.text_chunks.get_by_ids(ids))
    title = {i: c["content"].split("\n", 1)[0] for i, c in zip(ids, chunks) if c}
    for r in records:
        for mode in ("naive", "hybrid"):
            r[mode] = [[title.get(c, c) for c in ranking] for ranking in r[mode]]
    return records


def report(records: list[dict[str, Any]], name: str, order: Callable[[dict[str, Any]], list[str]]) -> str:
    cells = []
    for split in ("dev", "test"):
        chosen = [r for i, r in enumerate(records) if in_split(i, split)]
        ranked = [list(dict.fromkeys(order(r))) for r in chosen]
        r2 = 100 * sum(recall(x, r["gold"], 2) for x, r in zip(ranked, chosen)) / len(chosen)
        r5 = 100 * sum(recall(x, r["gold"], 5) for x, r in zip(ranked, chosen)) / len(chosen)
        cells += [f"{r2:.1f}", f"{r5:.1f}"]
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--working-dir", required=True, help="the kept index (e.g. DIR/nlp of retrieval_eval.py)")
    args = parser.parse_args()
    records = capture(args.corpus, args.questions, args.working_dir)
    lines = ["| ranking | dev R@2 | dev R@5 | test R@2 | test R@5 |", "|---|---|---|---|---|",
             report(records, "BM25 alone", lambda r: r["naive"][1]),
             report(records, "vectors alone", lambda r: r["naive"][0])]
    for weight in WEIGHTS:
        lines.append(report(records, f"naive, lexical weight {weight}",
                            lambda r, w=weight: weighted_fusion(r["naive"], [1.0, w])))
    for weight in WEIGHTS:
        lines.append(report(records, f"hybrid, lexical weight {weight}",
                            lambda r, w=weight: weighted_fusion(r["hybrid"], [1.0, 1.0, w])))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
