"""Growth curves of a built index (run by hand, not a test): cold start, query p50 per mode and
the query process's RSS, measured in a fresh process on an index ``one_document.py build`` made.

    python benchmarks/curves.py query --dir /tmp/s21i/files-2m [--queries 10]
    python benchmarks/curves.py fit results.jsonl

``query`` opens the built index in this process without the LLM response cache (on
PostgreSQL: the built database, the server started first and not timed), times the open plus the first local answer (cold
start), then answers ``--queries`` questions in each mode (p50, context and answer from the
mock LLM at 0 ms), and reports this process's peak RSS. Wall and CPU time are both reported:
on a shared machine the process's CPU time is the steadier of the two. Run it with the Python of the version
to measure (its own checkout's graphrag is what gets imported). ``fit`` reads JSON lines
with a ``tokens`` field and prints the log-log slope of every numeric measure against it.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import time
from collections import defaultdict
from typing import Any, Optional

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from one_document import BUILT_DATABASE, QUESTIONS, Postgres, settings  # noqa: E402

MODES = ("local", "global", "naive", "hybrid")


def query(args: argparse.Namespace) -> dict[str, Any]:
    from graphrag import GraphRAG, QueryParam

    with open(f"{args.dir}/build.json") as fh:
        backend = json.load(fh)["backend"]
    sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0] + "/tests")
    from mock_llm_server import MockLLMServer

    server, pg = MockLLMServer().start(), None
    try:
        dsn = None
        if backend == "postgres":
            pg = Postgres(f"{args.dir}/pg")
            dsn = pg.uri(BUILT_DATABASE)
        started, started_cpu = time.perf_counter(), time.process_time()
        # No response cache: every run asks the mock, and nothing is written to the built index.
        rag = GraphRAG(**settings(backend, f"{args.dir}/wd", server.base_url, dsn), enable_llm_cache=False)
        rag.query(QUESTIONS[0], QueryParam(mode="local"))
        result: dict[str, Any] = {"backend": backend, "dir": args.dir,
                                  "cold_start_s": round(time.perf_counter() - started, 3),
                                  "cold_start_cpu_s": round(time.process_time() - started_cpu, 3)}
        for mode in MODES:
            times, cpu = [], []
            for i in range(args.queries):
                t, c = time.perf_counter(), time.process_time()
                rag.query(QUESTIONS[(i + 1) % len(QUESTIONS)], QueryParam(mode=mode))
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
            result[f"{mode}_p50_ms"] = round(statistics.median(times) * 1000, 1)
            result[f"{mode}_p50_cpu_ms"] = round(statistics.median(cpu) * 1000, 1)
        result["rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        rag.close()
        return result
    finally:
        server.stop()
        if pg is not None:
            pg.close()


def slope(points: list[tuple[float, float]]) -> Optional[float]:
    """Least-squares slope of log(value) on log(tokens)."""
    points = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def fit(args: argparse.Namespace) -> dict[str, Any]:
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    with open(args.results) as fh:
        for line in fh:
            row = json.loads(line)
            label = row.get("label", "")
            for key, value in row.items():
                if isinstance(value, (int, float)) and key != "tokens":
                    series[f"{label} {key}".strip()].append((row["tokens"], value))
    return {key: round(s, 2) for key, points in sorted(series.items()) if (s := slope(points)) is not None}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    q = sub.add_parser("query", help="cold start, p50 per mode and RSS of a fresh query process")
    q.add_argument("--dir", required=True)
    q.add_argument("--queries", type=int, default=10)
    q.set_defaults(func=query)
    f = sub.add_parser("fit", help="log-log growth exponents of JSON-lines results with a tokens field")
    f.add_argument("results")
    f.set_defaults(func=fit)
    args = parser.parse_args(argv)
    print(json.dumps(args.func(args)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
