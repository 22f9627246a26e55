"""Growth curves of built indexes (run by hand, not a test): one-document insert, cold start, query
p50 per mode and the query process's RSS at each corpus size, with the fitted growth exponents.

    python benchmarks/curves.py run --out files.jsonl --rounds 3 /tmp/c/files-025m /tmp/c/files-2m ...
    python benchmarks/curves.py query --dir /tmp/c/files-2m [--queries 10]
    python benchmarks/curves.py summary files.jsonl

``run`` is the whole curve of one backend: the indexes ``one_document.py build`` made (one per
corpus size, from ``make_corpus.py``), measured in ``--rounds`` rounds, each a fresh
``one_document.py insert`` process (the median of its three one-document writes) and a fresh
``query`` process per index, the sizes' order reversed every other round; each round's results are
appended to ``--out`` as a JSON line, then ``summary`` prints the tables.

``query`` (printing one JSON line) opens the built index in this process without the LLM response cache (on PostgreSQL:
the built database, the server started first and not timed), times the open plus the first local
answer (cold start), then in each mode asks ``--queries`` questions **new to the process** (HotpotQA
questions from the shared data, different ones per mode, so no mode reuses another's walk or
vectors) and then the same questions **again** (what a process that was asked them before does:
kept walks and reads). Wall and CPU time are both reported: on a shared machine the process's CPU
time is the steadier of the two; on PostgreSQL also the server's CPU (its processes' CPU times,
per query: the mean over a batch).
Peak RSS is this process's. Run it with the Python of the version to measure (its own checkout's
graphrag is what gets imported).

``summary`` takes the median over rounds of every numeric measure at each size and prints them
with the largest size's ratio to the smallest and the log-log least-squares slope over all sizes
(the exponent: 0 flat, 1 linear in the corpus).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any, Optional

HERE = __file__.rsplit("/", 1)[0]
sys.path.insert(0, HERE)
from make_corpus import DATA  # noqa: E402
from one_document import BUILT_DATABASE, QUESTIONS, Postgres, settings  # noqa: E402

MODES = ("local", "global", "naive", "hybrid")


def new_questions(count: int) -> list[str]:
    """``count`` distinct HotpotQA questions (the corpora of make_corpus.py start with their passages)."""
    with open(os.path.join(DATA, "hotpotqa", "questions.json"), encoding="utf-8") as fh:
        questions = list(dict.fromkeys(q["question"] for q in json.load(fh)))
    if len(questions) < count:
        raise SystemExit(f"{count} new questions asked for, the shared data has {len(questions)}")
    return questions[:count]


def query(args: argparse.Namespace) -> dict[str, Any]:
    from graphrag import GraphRAG, QueryParam

    with open(f"{args.dir}/build.json") as fh:
        backend = json.load(fh)["backend"]
    sys.path.insert(0, HERE.rsplit("/benchmarks", 1)[0] + "/tests")
    from mock_llm_server import MockLLMServer

    fresh = new_questions(len(MODES) * args.queries)
    server, pg = MockLLMServer().start(), None
    try:
        dsn = None
        if backend == "postgres":
            pg = Postgres(f"{args.dir}/pg")
            dsn = pg.database_uri(BUILT_DATABASE)
        server_cpu = pg.cpu_seconds() if pg else 0.0
        started, started_cpu = time.perf_counter(), time.process_time()
        # No response cache: every run asks the mock, and nothing is written to the built index.
        rag = GraphRAG(**settings(backend, f"{args.dir}/wd", server.base_url, dsn), enable_llm_cache=False)
        rag.query(QUESTIONS[0], QueryParam(mode="local"))
        result: dict[str, Any] = {"backend": backend, "dir": args.dir,
                                  "cold_start_s": round(time.perf_counter() - started, 3),
                                  "cold_start_cpu_s": round(time.process_time() - started_cpu, 3)}
        if pg:
            result["cold_start_server_cpu_s"] = round(pg.cpu_seconds() - server_cpu, 3)
        for m, mode in enumerate(MODES):
            asked = fresh[m * args.queries : (m + 1) * args.queries]
            for kind in ("new", "again"):
                times, cpu = [], []
                # The server's CPU over the whole batch: its clock ticks are too coarse for one query.
                server_cpu = pg.cpu_seconds() if pg else 0.0
                for question in asked:
                    t, c = time.perf_counter(), time.process_time()
                    rag.query(question, QueryParam(mode=mode))
                    times.append(time.perf_counter() - t)
                    cpu.append(time.process_time() - c)
                result[f"{mode}_{kind}_p50_ms"] = round(statistics.median(times) * 1000, 1)
                result[f"{mode}_{kind}_p50_cpu_ms"] = round(statistics.median(cpu) * 1000, 1)
                if pg:
                    result[f"{mode}_{kind}_mean_server_cpu_ms"] = round(
                        (pg.cpu_seconds() - server_cpu) / len(asked) * 1000, 1)
        result["rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        rag.close()
        return result
    finally:
        server.stop()
        if pg is not None:
            pg.stop()


def _child(script: str, *argv: str) -> dict[str, Any]:
    """Run a benchmark subcommand in a fresh process of this Python; its last stdout line is its JSON."""
    out = subprocess.run([sys.executable, f"{HERE}/{script}", *argv], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> None:
    tokens = {}
    for d in args.dirs:
        with open(f"{d}/build.json") as fh:
            tokens[d] = json.load(fh)["tokens"]
    for r in range(args.rounds):
        for d in args.dirs if r % 2 == 0 else args.dirs[::-1]:
            inserted = _child("one_document.py", "insert", "--dir", d, "--runs", "3")
            row: dict[str, Any] = {"round": r, "dir": d, "tokens": tokens[d],
                                   "insert_s": inserted["one_document_s"], "insert_cpu_s": inserted["cpu_s"],
                                   "first_write_cpu_s": inserted["runs_cpu_s"][0]}
            if "server_cpu_s" in inserted:
                row["insert_server_cpu_s"] = inserted["server_cpu_s"]
            row.update(_child("curves.py", "query", "--dir", d, "--queries", str(args.queries)))
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr, flush=True)
    summary(argparse.Namespace(results=args.out))


def slope(points: list[tuple[float, float]]) -> Optional[float]:
    """Least-squares slope of log(value) on log(tokens)."""
    points = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def _three_digits(value: float) -> str:
    """Three significant digits, never in exponent form."""
    if value == 0:
        return "0"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def summary(args: argparse.Namespace) -> None:
    """A markdown table: per measure, the median over rounds at each size, largest/smallest, exponent."""
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(args.results) as fh:
        for line in fh:
            row = json.loads(line)
            for key, value in row.items():
                if isinstance(value, (int, float)) and key not in ("tokens", "round"):
                    values[key][row["tokens"]].append(value)
    sizes = sorted({t for by_size in values.values() for t in by_size})
    table = [f"| measure | {' | '.join(f'{t / 1e6:.2f}M' for t in sizes)} | ratio | exponent | rounds |",
             "|---|" + "---:|" * (len(sizes) + 3)]
    for key, by_size in values.items():
        medians = {t: statistics.median(v) for t, v in by_size.items()}
        exponent = slope(sorted(medians.items()))
        ratio = medians[sizes[-1]] / medians[sizes[0]] if medians.get(sizes[0]) and sizes[-1] in medians else None
        cells = " | ".join(_three_digits(medians[t]) if t in medians else "" for t in sizes)
        table.append(f"| {key} | {cells} | {f'{ratio:.2f}×' if ratio else ''} | "
                     f"{f'{exponent:.2f}' if exponent is not None else ''} | {min(map(len, by_size.values()))} |")
    print("\n".join(table), flush=True)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    r = sub.add_parser("run", help="the whole curve: rounds of insert and query processes over built indexes")
    r.add_argument("dirs", nargs="+", help="built indexes (one_document.py build), one per corpus size")
    r.add_argument("--out", required=True, help="JSON lines, appended to: one per index and round")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--queries", type=int, default=10)
    r.set_defaults(func=run)
    q = sub.add_parser("query", help="cold start, p50 per mode (new and repeated questions) and RSS of a fresh process")
    q.add_argument("--dir", required=True)
    q.add_argument("--queries", type=int, default=10)
    q.set_defaults(func=query)
    s = sub.add_parser("summary", help="medians per size, ratios and log-log growth exponents of run's JSON lines")
    s.add_argument("results")
    s.set_defaults(func=summary)
    args = parser.parse_args(argv)
    result = args.func(args)
    if result is not None:  # query's JSON line, which run reads
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
