"""Rebuild ``corpus.json`` of this set from the 2WikiMultihopQA passages and ``questions.json``.

    python benchmarks/data/multihop_2wiki/build_corpus.py PATH/TO/2wiki/corpus.json

The 2Wiki passages come in the order the dataset grouped them: each original question's ten
paragraphs (its gold ones and the distractors picked for it, which share its names and
topics) sit next to each other. So the corpus is, per question, every passage from
``WINDOW`` before its first gold passage to ``WINDOW`` after its last, kept in file order:
the gold passages together with the look-alikes the dataset put beside them.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOW = 4


def build(source: list[dict], questions: list[dict]) -> list[dict]:
    """The passages of ``source`` within ``WINDOW`` of any question's gold passages."""
    position = {p["title"]: i for i, p in enumerate(source)}
    keep: set[int] = set()
    for q in questions:
        gold = [position[p["title"]] for p in q["paragraphs"] if p["is_supporting"]]
        keep.update(range(max(0, min(gold) - WINDOW), min(len(source), max(gold) + WINDOW + 1)))
    return [{"title": source[i]["title"], "text": source[i]["text"]} for i in sorted(keep)]


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        source = json.load(f)
    with open(os.path.join(HERE, "questions.json"), encoding="utf-8") as f:
        questions = json.load(f)
    corpus = build(source, questions)
    with open(os.path.join(HERE, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False, indent=1)
    print(f"{len(corpus)} passages for {len(questions)} questions")


if __name__ == "__main__":
    main()
