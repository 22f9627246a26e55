"""Build a large, deterministic benchmark corpus from the shared data.

The output is a JSON list of passages (what ``benchmarks/bench.py`` reads): the HotpotQA
passages, then as many variants of A Christmas Carol as the token target needs. Each
variant renames every proper noun of the book (a fixed, hash-derived new name per
variant), so variants are distinct documents with distinct entities and are not
deduplicated by content hash, while common words (and graph structure) stay realistic.
Each variant is split into its staves, so documents have book-chapter sizes.

    python benchmarks/make_corpus.py --tokens 2000000 --out /tmp/corpus_2m.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys

DATA = os.environ.get("GRAPHRAG_SHARED_DATA", "/work/shared/data")
SYLLABLES = ["ka", "lo", "mer", "vin", "dra", "tho", "sel", "bri", "quo", "zan", "pel", "rud",
             "mia", "gor", "fen", "tas", "nor", "wik", "jul", "bex", "cor", "ham", "lis", "ost"]


def hotpotqa_passages(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):  # {title: [sentences]}
        return [f"{title}\n{''.join(s) if isinstance(s, list) else s}".strip() for title, s in data.items()]
    return [p if isinstance(p, str) else (p.get("text") or p.get("content") or "") for p in data]


def proper_nouns(text: str) -> list[str]:
    """Capitalised words used at least twice that never occur in lower case."""
    counts: dict[str, int] = {}
    for w in re.findall(r"\b[A-Z][a-z]{2,}\b", text):
        counts[w] = counts.get(w, 0) + 1
    lower = set(re.findall(r"\b[a-z]{3,}\b", text))
    return sorted(w for w, n in counts.items() if n >= 2 and w.lower() not in lower)


def new_name(word: str, variant: int) -> str:
    h = hashlib.blake2b(f"{variant}:{word}".encode(), digest_size=8).digest()
    parts = [SYLLABLES[b % len(SYLLABLES)] for b in h[: 2 + h[7] % 2]]
    return "".join(parts).capitalize()


def carol_variant(text: str, nouns: list[str], variant: int) -> str:
    if variant == 0:
        return text
    mapping = {w: new_name(w, variant) for w in nouns}
    return re.sub(r"\b[A-Z][a-z]{2,}\b", lambda m: mapping.get(m.group(0), m.group(0)), text)


def staves(text: str) -> list[str]:
    parts = re.split(r"\n(?=STAVE )", text)
    return [p.strip() for p in parts if p.strip()]


def build(target_tokens: int) -> list[str]:
    from graphrag.operators.tokenizer import get_tokenizer

    tok = get_tokenizer("gpt-4o")
    passages = hotpotqa_passages(os.path.join(DATA, "hotpotqa", "corpus.json"))
    total = sum(tok.count(p) for p in passages)
    with open(os.path.join(DATA, "christmas_carol.txt"), encoding="utf-8") as f:
        carol = f.read()
    nouns = proper_nouns(carol)
    carol_tokens = tok.count(carol)
    variant = 0
    while total < target_tokens:
        passages.extend(staves(carol_variant(carol, nouns, variant)))
        total += carol_tokens
        variant += 1
    print(f"{len(passages)} passages, ~{total} tokens, {variant} Christmas Carol variants, "
          f"{len(nouns)} renamed proper nouns", file=sys.stderr)
    return passages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2_000_000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    passages = build(args.tokens)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(passages, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
