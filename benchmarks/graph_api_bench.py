"""Latency of the graph API calls, in process and warm, on an existing working dir.

    python benchmarks/graph_api_bench.py WORKING_DIR [--calls 200] [--embedding hash|local]

Build the working dir first, e.g. ``python benchmarks/bench.py /work/shared/data/hotpotqa/corpus.json
--queries 0 --working-dir DIR`` (hash embedding, the default there). Each call runs once untimed
on other arguments (the name index and the graph are read then), then ``--calls`` times on
seeded random entities. Prints one JSON record: p50/p95 in milliseconds per call.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from typing import Any, Awaitable, Callable


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 3),
            "max_ms": round(ordered[-1] * 1000, 3)}


async def timed(calls: list[Callable[[], Awaitable[Any]]]) -> tuple[list[float], list[Any]]:
    seconds, results = [], []
    for call in calls:
        started = time.perf_counter()
        results.append(await call())
        seconds.append(time.perf_counter() - started)
    return seconds, results


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from graphrag import GraphRAG, hash_embedding

    embedding = hash_embedding(384) if args.embedding == "hash" else None
    rag = GraphRAG(working_dir=args.working_dir, always_create_working_dir=False,
                   **({"embedding_func": embedding} if embedding else {}))
    kg, graph = rag.knowledge_graph, rag.stores.graph
    started = time.perf_counter()
    nodes = [name for name, _ in await graph.get_all_nodes()]
    await kg.aentity(nodes[0])  # builds the name index
    first_use_s = time.perf_counter() - started
    rnd = random.Random(7)
    connected = [n for n, d in zip(nodes, await graph.node_degrees_batch(nodes)) if d > 0]
    picks = [rnd.choice(connected) for _ in range(args.calls)]
    # Path ends: a random entity and one 2-3 hops from it (a path exists), and random pairs.
    ends = []
    for a in picks[: args.calls // 2]:
        far = [e.name for e in await kg.aneighbors(a, depth=3, limit=200) if (e.distance or 0) >= 2]
        ends.append((a, rnd.choice(far) if far else rnd.choice(connected)))
    ends += [(rnd.choice(connected), rnd.choice(connected)) for _ in range(args.calls - len(ends))]
    questions = [" ".join(rnd.sample(nodes, 2)).lower() for _ in range(args.calls)]
    for warm in (lambda: kg.aneighbors(connected[1]), lambda: kg.apaths(*ends[-1]),
                 lambda: kg.asubgraph([connected[2]]), lambda: kg.agraph_search("warm up")):
        await warm()

    out: dict[str, Any] = {"working_dir": args.working_dir, "entities": len(nodes),
                           "relations": await graph.count_edges(), "calls": args.calls,
                           "first_call_s": round(first_use_s, 3)}
    cases = {
        "entity": [lambda n=n: kg.aentity(n.lower()) for n in picks],
        "neighbors (depth 1, limit 50)": [lambda n=n: kg.aneighbors(n) for n in picks],
        "neighbors (depth 2, limit 50)": [lambda n=n: kg.aneighbors(n, depth=2) for n in picks],
        "paths (max_depth 4, k 3)": [lambda a=a, b=b: kg.apaths(a, b) for a, b in ends],
        "subgraph (depth 1, max_nodes 50)": [lambda n=n: kg.asubgraph([n], max_nodes=50) for n in picks],
        "graph_search (top_k 10, depth 1)": [lambda q=q: kg.agraph_search(q) for q in questions],
    }
    for name, calls in cases.items():
        seconds, results = await timed(calls)
        out[name] = percentiles(seconds)
        if name.startswith("paths"):
            out[name]["found"] = sum(1 for r in results if r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("working_dir")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--embedding", choices=("hash", "local"), default="hash")
    print(json.dumps(asyncio.run(run(ap.parse_args())), indent=2))


if __name__ == "__main__":
    main()
