"""Index the example history with an OpenAI (or OpenAI-compatible) LLM and ask it questions.

    export OPENAI_API_KEY=sk-...            # required for api.openai.com
    export OPENAI_BASE_URL=https://...      # optional: any OpenAI-compatible endpoint
    python examples/quickstart_openai.py ["your question"]

Models default to gpt-4o (extraction, reports, answers) and gpt-4o-mini (summaries);
override with GRAPHRAG_BEST_MODEL / GRAPHRAG_CHEAP_MODEL. Embeddings stay local
(all-MiniLM-L6-v2), so only chat completions go over the network. Every LLM answer
is cached in the working dir: a re-run, or a run resumed after a crash, does not pay twice.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from graphrag import GraphRAG, QueryParam

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "saltmarsh_lantern_works.md"
WORKING_DIR = HERE.parent / "cache" / "openai_example"  # /cache/ is git-ignored


def main() -> int:
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        print("Set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint) first, or run "
              "examples/quickstart_offline.py, which needs no LLM.", file=sys.stderr)
        return 3
    question = sys.argv[1] if len(sys.argv) > 1 else "How did the Saltmarsh Lantern Works change Quillhaven?"
    rag = GraphRAG(
        working_dir=str(WORKING_DIR),
        best_model_name=os.environ.get("GRAPHRAG_BEST_MODEL", "gpt-4o"),
        cheap_model_name=os.environ.get("GRAPHRAG_CHEAP_MODEL", "gpt-4o-mini"),
        chunk_token_size=150,  # fits the local embedding model's 256-token window
        chunk_overlap_token_size=30,
    )
    stats = rag.insert(DATA.read_text(encoding="utf-8"), sources=[DATA.name])
    llm_calls = sum(stage["calls"] for stage in stats["llm"].values())
    print(f"Indexed in {stats['seconds']:.1f}s: {stats['communities']} communities, {llm_calls} LLM calls "
          f"(per stage: {stats['llm']})")
    for mode in ("local", "global", "naive"):
        print(f"\n=== {mode}: {question}\n")
        print(rag.query(question, QueryParam(mode=mode)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
