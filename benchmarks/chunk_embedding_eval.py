"""Own-chunk recall of the bundled embedding, truncated against pooled chunk vectors.

Chunks a book as an index would (1,200 tokens, 100 overlap), embeds the chunks with each
``local_embedding(long_texts=...)`` scheme, then asks sentences drawn from the head, middle
and tail third of every chunk: is their own chunk among the 5 most similar? Prints recall per
third and the chunk-embedding time (wall and CPU of this process).

    python benchmarks/chunk_embedding_eval.py /work/shared/data/christmas_carol.txt
"""
from __future__ import annotations

import argparse
import asyncio
import re
import time

import numpy as np

from graphrag.embedding import local_embedding
from graphrag.operators.chunking import chunk_by_tokens

SENTENCE = re.compile(r"[^.!?]{40,300}[.!?]")


def probes(chunks: list[str], per_third: int) -> list[tuple[int, str, str]]:
    """(chunk index, third, sentence): evenly spaced whole sentences from each third."""
    out = []
    for i, text in enumerate(chunks):
        for third, name in enumerate(("head", "middle", "tail")):
            part = text[third * len(text) // 3 : (third + 1) * len(text) // 3]
            found = [m.group().strip() for m in SENTENCE.finditer(part)][1:-1] or []
            step = max(len(found) // per_third, 1)
            out += [(i, name, s) for s in found[::step][:per_third]]
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("book")
    parser.add_argument("--per-third", type=int, default=2)
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    with open(args.book, encoding="utf-8") as f:
        chunks = [c["content"] for c in chunk_by_tokens({"book": f.read()}).values()]
    asked = probes(chunks, args.per_third)
    print(f"{len(chunks)} chunks, {len(asked)} sentences")
    await local_embedding("truncated")(["warm up"])
    questions = await local_embedding("truncated")([s for _, _, s in asked])
    for scheme in ("truncated", "pooled"):
        embed = local_embedding(scheme)
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = await embed(chunks)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        top = np.argsort(-(questions @ vectors.T), axis=1, kind="stable")[:, : args.k]
        hit = np.array([own in row for (own, _, _), row in zip(asked, top)])
        by_third = {t: hit[[a[1] == t for a in asked]].mean() for t in ("head", "middle", "tail")}
        print(f"{scheme:9s} R@{args.k} all {hit.mean():.2f}  " + "  ".join(f"{t} {v:.2f}" for t, v in by_third.items())
              + f"   embed {len(chunks)} chunks: {wall:.1f} s wall, {cpu:.1f} s CPU")


if __name__ == "__main__":
    asyncio.run(main())
