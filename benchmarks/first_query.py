"""Open a working dir in a new process and answer one query (context only): how long until
the first answer, wall and CPU, per mode. Each run is a fresh process, so it pays every
first-use cost a user's first query pays (imports, stores read, the walk's graph built).

    python benchmarks/first_query.py WORKING_DIR [--modes local,hybrid] [--runs 5]
        [--embedding local|hash] [--question "..."]

``--embedding hash`` answers with a 384-d hash embedding instead of the bundled model (the
dir must have been built with a 384-d model): the engine's own cost without the model's load.
Run with ``PYTHONPATH=<an installed version>`` from outside the repo to compare versions.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def one_query(working_dir: str, mode: str, embedding: str, question: str) -> None:
    """In the child process: print open + first query, wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    from graphrag import GraphRAG, QueryParam
    from graphrag.embedding import hash_embedding, local_embedding

    rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384) if embedding == "hash"
                   else local_embedding(), show_progress=False)
    opened = time.perf_counter() - wall
    rag.query(question, QueryParam(mode=mode, only_need_context=True))
    print(json.dumps({"open_s": opened, "open_plus_first_s": time.perf_counter() - wall,
                      "cpu_s": time.process_time() - cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("working_dir")
    parser.add_argument("--modes", default="local,hybrid")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embedding", choices=["local", "hash"], default="local")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        one_query(args.working_dir, args.child, args.embedding, args.question)
        return
    for mode in [m for m in args.modes.split(",") if m]:
        runs = []
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, __file__, args.working_dir, "--child", mode, "--embedding",
                                  args.embedding, "--question", args.question],
                                 capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps({"mode": mode, "embedding": args.embedding, "runs": args.runs, **{
            f"median_{k}": round(statistics.median(r[k] for r in runs), 3) for k in runs[0]},
            "all_open_plus_first_s": [round(r["open_plus_first_s"], 3) for r in runs]}), flush=True)


if __name__ == "__main__":
    main()
