"""Bring your own LLM and embedding functions (nano-graphrag's calling conventions).

    python examples/custom_llm.py

The LLM here is a stand-in that answers from canned text so the script runs anywhere;
replace its body with a call to your provider. The contract:

    async def my_llm(prompt, system_prompt=None, history_messages=[], **kwargs) -> str

``kwargs`` may carry ``response_format={"type": "json_object"}`` (reports, global map
step) - pass it on if your API supports it, ignore it otherwise. The engine adds the
response cache, retries, concurrency limits and usage counts around your function.

The embedding function is any async ``list[str] -> numpy array (n, dim)``, declared with
``wrap_embedding_func_with_attrs``. A working dir must keep the embedding it was built with.
"""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import numpy as np

from graphrag import GraphRAG, QueryParam, wrap_embedding_func_with_attrs

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "saltmarsh_lantern_works.md"
WORKING_DIR = HERE.parent / "cache" / "custom_llm_example"  # /cache/ is git-ignored

calls: list[str] = []


async def my_llm(prompt: str, system_prompt: str | None = None, history_messages: list = [], **kwargs) -> str:
    """A toy model: replace with e.g. ``await client.messages.create(...)`` of your provider."""
    calls.append(prompt[:60])
    if kwargs.get("response_format", {}).get("type") == "json_object":
        if '"points"' in f"{system_prompt or ''}{prompt}":  # global query, map step
            return '{"points": [{"description": "Ada Pennick founded the Saltmarsh Lantern Works.", "score": 80}]}'
        return ('{"title": "Quillhaven glassmakers", "summary": "Ada Pennick and her partners.", "rating": 6.0, '
                '"rating_explanation": "Central to the town.", "findings": [{"summary": "Founding", '
                '"explanation": "Ada Pennick founded the Works with Captain Elias Morrow."}]}')
    if "YES or NO" in prompt or "YES | NO" in prompt:
        return "NO"
    if "entity_name" in prompt:  # the extraction prompt
        return ('("entity"<|>"ADA PENNICK"<|>"person"<|>"Glassblower who founded the Saltmarsh Lantern Works.")##'
                '("entity"<|>"SALTMARSH LANTERN WORKS"<|>"organization"<|>"Lantern and lens maker in Quillhaven.")##'
                '("relationship"<|>"ADA PENNICK"<|>"SALTMARSH LANTERN WORKS"<|>"Ada Pennick founded the Works."<|>9)'
                '<|COMPLETE|>')
    return "Ada Pennick, a glassblower from Carrow, founded the Saltmarsh Lantern Works in Quillhaven."


@wrap_embedding_func_with_attrs(embedding_dim=128, max_token_size=8192)
async def my_embedding(texts: list[str]) -> np.ndarray:
    """A toy embedding (hashed character trigrams); use a real model in practice."""
    out = np.zeros((len(texts), 128), dtype=np.float32)
    for row, text in enumerate(texts):
        t = f"  {text.lower()} "
        for i in range(len(t) - 2):
            out[row, int.from_bytes(hashlib.blake2b(t[i:i + 3].encode(), digest_size=2).digest(), "big") % 128] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def main() -> int:
    shutil.rmtree(WORKING_DIR, ignore_errors=True)  # this example's own folder only
    rag = GraphRAG(
        working_dir=str(WORKING_DIR),
        best_model_func=my_llm,
        cheap_model_func=my_llm,
        embedding_func=my_embedding,
        entity_extract_max_gleaning=0,
    )
    stats = rag.insert(DATA.read_text(encoding="utf-8"), sources=[DATA.name])
    print(f"Indexed: {stats['communities']} communities; LLM calls per stage: "
          f"{ {k: v['calls'] for k, v in stats['llm'].items()} }")
    for mode in ("local", "global"):
        print(f"\n=== {mode}\n{rag.query('Who founded the Saltmarsh Lantern Works?', QueryParam(mode=mode))}")
    print(f"\nmy_llm was called {len(calls)} times")
    return 0


if __name__ == "__main__":
    sys.exit(main())
