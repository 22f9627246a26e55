"""Use a local OpenAI-compatible server (Ollama, vLLM, llama.cpp) as the LLM.

    # Ollama:     ollama serve; ollama pull qwen2.5:7b
    python examples/local_server.py --base-url http://localhost:11434/v1 --model qwen2.5:7b
    # vLLM:       vllm serve Qwen/Qwen2.5-7B-Instruct
    python examples/local_server.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
    # llama.cpp:  llama-server -m model.gguf --port 8080
    python examples/local_server.py --base-url http://localhost:8080/v1 --model local

A keyless server needs no OPENAI_API_KEY (a placeholder key is sent). Small local models
write sloppier extraction records; the parser skips malformed ones and counts them in
``malformed_records_skipped``. Servers without JSON mode may ignore ``response_format``;
replies are parsed tolerantly either way.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphrag import GraphRAG, QueryParam

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "saltmarsh_lantern_works.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://localhost:11434/v1", help="the server's /v1 URL")
    parser.add_argument("--model", default="qwen2.5:7b", help="model for extraction, reports and answers")
    parser.add_argument("--cheap-model", help="model for description summaries (default: --model)")
    parser.add_argument("--api-key", default=None, help="only if the server wants one")
    parser.add_argument("--max-async", type=int, default=4,
                        help="concurrent requests to the server, both models together (local GPUs are small)")
    parser.add_argument("--working-dir", default=str(HERE.parent / "cache" / "local_server_example"))
    parser.add_argument("question", nargs="?", default="Who helped Ada Pennick, and how?")
    args = parser.parse_args()

    rag = GraphRAG(
        working_dir=args.working_dir,
        llm_base_url=args.base_url,
        llm_api_key=args.api_key,
        best_model_name=args.model,
        cheap_model_name=args.cheap_model or args.model,
        best_model_max_async=args.max_async,
        cheap_model_max_async=args.max_async,
        llm_max_async_total=args.max_async,  # one server serves both models
        best_model_max_token_size=8192,
        cheap_model_max_token_size=8192,
        llm_timeout=600.0,  # local generation can be slow
        chunk_token_size=150,
        chunk_overlap_token_size=30,
    )
    stats = rag.insert(DATA.read_text(encoding="utf-8"), sources=[DATA.name])
    print(f"Indexed in {stats['seconds']:.1f}s; {stats['communities']} communities; "
          f"{stats['malformed_records_skipped']} malformed extraction records skipped")
    for mode in ("local", "global"):
        print(f"\n=== {mode}: {args.question}\n")
        print(rag.query(args.question, QueryParam(mode=mode)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
