"""CPU per context-only query in each mode, in one process, and the contexts for comparing two versions.

    python benchmarks/query_cpu.py WORKING_DIR --questions QUESTIONS.json --out after.json [--modes local,hybrid]
    python benchmarks/query_cpu.py --compare before.json after.json

The working dir must be built with hash embeddings (bench.py's default, 384 dimensions).
Each mode answers every question twice: pass 1 with the process's caches holding only a
warm-up question's rows (each question new to it), pass 2 the same questions again (what a
server answering questions about the same records meets). ``process_time`` counts every thread
of the process (BLAS's and the embedding's too). Run it once per version, alternating, with
each version's interpreter; ``--compare`` says whether every context is byte-identical.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from typing import Any


def measure(working_dir: str, questions: list[str], modes: list[str]) -> dict[str, Any]:
    from graphrag import GraphRAG, QueryParam
    from graphrag.embedding import hash_embedding

    rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384), show_progress=False)
    for mode in modes:  # not one of the questions: opens what the mode reads
        rag.query("What is this about?", QueryParam(mode=mode, only_need_context=True))
    out: dict[str, Any] = {"contexts": {}, "cpu_ms_mean": {}, "wall_ms_p50": {}}
    for mode in modes:
        for number in (1, 2):
            cpu, wall, contexts = [], [], []
            for question in questions:
                c, w = time.process_time(), time.perf_counter()
                contexts.append(rag.query(question, QueryParam(mode=mode, only_need_context=True)))
                cpu.append((time.process_time() - c) * 1000)
                wall.append((time.perf_counter() - w) * 1000)
            if number == 1:
                out["contexts"][mode] = contexts
            elif contexts != out["contexts"][mode]:
                raise AssertionError(f"{mode}: the second pass gave other contexts")
            out["cpu_ms_mean"][f"{mode} pass {number}"] = round(statistics.mean(cpu), 2)
            out["wall_ms_p50"][f"{mode} pass {number}"] = round(statistics.median(wall), 2)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def compare(before: str, after: str) -> dict[str, Any]:
    with open(before, encoding="utf-8") as f:
        a = json.load(f)["contexts"]
    with open(after, encoding="utf-8") as f:
        b = json.load(f)["contexts"]
    return {mode: {"questions": len(a[mode]), "identical": a[mode] == b.get(mode)} for mode in a}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("working_dir", nargs="?")
    ap.add_argument("--questions", help="JSON list of questions (strings or {'question': ...})")
    ap.add_argument("--n", type=int, default=100, help="the first N questions")
    ap.add_argument("--modes", default="local,hybrid,naive,global")
    ap.add_argument("--out", help="where to write the record with the contexts")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        print(json.dumps(compare(*args.compare)))
        return
    if not (args.working_dir and args.questions and args.out):
        ap.error("WORKING_DIR, --questions and --out are needed (or --compare)")
    with open(args.questions, encoding="utf-8") as f:
        questions = [q if isinstance(q, str) else q["question"] for q in json.load(f)][:args.n]
    record = measure(args.working_dir, questions, args.modes.split(","))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(record, f)
    print(json.dumps({k: v for k, v in record.items() if k != "contexts"}), file=sys.stderr)


if __name__ == "__main__":
    main()
