"""What serving costs: a query over HTTP against the same query in process, and many clients
at once, with and without an insert running. Prints one JSON record.

    python benchmarks/bench.py CORPUS --latency 0 --working-dir /tmp/wd --keep --queries 0
    python benchmarks/serve_bench.py /tmp/wd --rounds 5

The working dir must be built with hash embeddings (bench.py's default). `graphrag serve`
runs as a subprocess (its own GIL, as in use) with a mock LLM server for the insert; queries
are local and context only (`only_need_context`), so they measure the engine and the server,
not a model. In-process and HTTP rounds are interleaved, so a change in the machine's load
hits both alike.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx

from bench import free_port, host_cpu_ticks, percentile, pick_questions, start_server, steal_share

CONTEXT_ONLY = {"mode": "local", "only_need_context": True}  # --mode sets the mode


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def in_process(rag: Any, questions: list[str]) -> list[float]:
    from graphrag import QueryParam

    times = []
    for q in questions:
        t = time.perf_counter()
        await rag.aquery(q, QueryParam(**CONTEXT_ONLY))
        times.append(time.perf_counter() - t)
    return times


def over_http(client: httpx.Client, questions: list[str]) -> list[float]:
    times = []
    for q in questions:
        t = time.perf_counter()
        response = client.post("/query", json={"question": q, **CONTEXT_ONLY})
        times.append(time.perf_counter() - t)
        response.raise_for_status()
    return times


async def concurrent(url: str, questions: list[str], clients: int) -> dict[str, Any]:
    """``clients`` queries sent at once; throughput over the whole burst and latency percentiles."""
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=clients)) as http:
        async def one(q: str) -> float:
            t = time.perf_counter()
            (await http.post("/query", json={"question": q, **CONTEXT_ONLY})).raise_for_status()
            return time.perf_counter() - t

        await asyncio.gather(*(one(q) for q in questions[:clients]))  # connections opened
        t = time.perf_counter()
        times = await asyncio.gather(*(one(questions[i % len(questions)]) for i in range(clients)))
        wall = time.perf_counter() - t
    return {"queries": clients, "wall_s": round(wall, 3), "per_s": round(clients / wall, 1),
            "p50_ms": round(statistics.median(times) * 1000, 1), "p95_ms": round(percentile(times, 0.95) * 1000, 1)}


def start_serving(working_dir: str, llm_url: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRAPHRAG_EMBEDDING": "hash", "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "bench"}
    proc = subprocess.Popen([sys.executable, "-m", "graphrag.cli", "serve", "--working-dir", working_dir,
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("graphrag serve did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("working_dir")
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved in-process/HTTP rounds")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--insert-latency", type=float, default=0.2, help="mock LLM latency during the insert (s)")
    ap.add_argument("--mode", choices=("local", "global", "naive"), default="local")
    args = ap.parse_args()
    CONTEXT_ONLY["mode"] = args.mode

    from graphrag import GraphRAG, hash_embedding

    questions = pick_questions(args.working_dir, args.questions)
    llm_proc, llm_url = start_server(args.insert_latency)
    server, url = start_serving(args.working_dir, llm_url)
    record: dict[str, Any] = {"working_dir": args.working_dir, "mode": args.mode, "questions": len(questions),
                              "load_average_before": load_average()}
    ticks = host_cpu_ticks()
    try:
        rag = GraphRAG(working_dir=args.working_dir, embedding_func=hash_embedding(384),
                       always_create_working_dir=False)
        with httpx.Client(base_url=url, timeout=120) as client:
            asyncio.run(in_process(rag, questions))  # both warm: stores read, connections open
            over_http(client, questions)
            rounds = []
            for _ in range(args.rounds):
                local = asyncio.run(in_process(rag, questions))
                remote = over_http(client, questions)
                rounds.append({"in_process_p50_ms": round(statistics.median(local) * 1000, 2),
                               "http_p50_ms": round(statistics.median(remote) * 1000, 2),
                               "overhead_ms": round((statistics.median(remote) - statistics.median(local)) * 1000, 2)})
            record["sequential"] = {"rounds": rounds,
                                    "overhead_ms_median": statistics.median(r["overhead_ms"] for r in rounds)}

            record["concurrent"] = [asyncio.run(concurrent(url, questions, args.clients)) for _ in range(args.rounds)]

            # An insert of new passages (LLM extraction at --insert-latency a call) while the
            # same bursts run; each burst is kept only if the job was still running after it.
            texts = [f"Passage {i} of the serving benchmark: Orla Venn{i} met Caius Brandt{i} at the Harbor "
                     f"Guild of Tessaly{i}, where the Brandt{i} family kept ledgers." for i in range(40)]
            job = client.post("/documents", json={"texts": texts}).json()
            during = []
            while client.get(f"/jobs/{job['id']}").json()["status"] in ("queued", "running"):
                burst = asyncio.run(concurrent(url, questions, args.clients))
                if client.get(f"/jobs/{job['id']}").json()["status"] == "running":
                    during.append(burst)
            finished = client.get(f"/jobs/{job['id']}").json()
            record["concurrent_during_insert"] = during
            record["insert_job"] = {"status": finished["status"], "seconds": (finished["stats"] or {}).get("seconds")}
    finally:
        server.terminate()
        llm_proc.terminate()
        server.wait(timeout=30)
    record["load_average_after"] = load_average()
    record["host_cpu_steal_share"] = steal_share(ticks, host_cpu_ticks())
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
