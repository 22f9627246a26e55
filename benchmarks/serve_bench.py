"""What serving costs: a query over HTTP against the same query in process, and many clients
at once, with and without an insert running, in each query mode. Prints one JSON record.

    python benchmarks/bench.py CORPUS --latency 0 --working-dir /tmp/wd --keep --queries 0
    python benchmarks/serve_bench.py /tmp/wd --rounds 5 --modes hybrid,local,naive --server-args "--workers 2"

The working dir must be built with hash embeddings (bench.py's default); the benchmark serves
a copy of it (the insert changes it). `graphrag serve` runs as a subprocess (its own GIL, as in
use; `--server-args` are added to its command line) with a mock LLM server for the insert;
queries are context only (`only_need_context`), so they measure the engine and the server, not
a model. The bound on throughput is the machine's cores over the CPU seconds of one query in
this process, measured in the same run. In-process and HTTP rounds are interleaved, so a change
in the machine's load hits both alike.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

from bench import free_port, host_cpu_ticks, percentile, pick_questions, proc_cpu_s, start_server, steal_share

MODES = ("hybrid", "local", "naive", "global")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its descendants alive now (the server's reader processes)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += proc_cpu_s(p) or 0.0
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total


def context_only(mode: str) -> dict[str, Any]:
    return {"mode": mode, "only_need_context": True}


async def in_process(rag: Any, questions: list[str], mode: str) -> tuple[list[float], float]:
    """Each question's wall time, and the CPU seconds of this process per question."""
    from graphrag import QueryParam

    times = []
    cpu = time.process_time()
    for q in questions:
        t = time.perf_counter()
        await rag.aquery(q, QueryParam(**context_only(mode)))
        times.append(time.perf_counter() - t)
    return times, (time.process_time() - cpu) / len(questions)


def over_http(client: httpx.Client, questions: list[str], mode: str) -> list[float]:
    times = []
    for q in questions:
        t = time.perf_counter()
        response = client.post("/query", json={"question": q, **context_only(mode)})
        times.append(time.perf_counter() - t)
        response.raise_for_status()
    return times


class Connection:
    """One kept-alive HTTP/1.1 connection POSTing JSON, with as little client CPU as a request
    can take: the clients share the machine's cores with the server, and httpx's own CPU per
    request (7-9 ms here) was more than a naive query's."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.stream: Any = None

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        payload = json.dumps(body).encode()
        request = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
        if self.stream is None:
            self.stream = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.stream
        writer.write(request)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
        content = await reader.readexactly(int(headers["content-length"]))
        if headers.get("connection") == "close":
            await self.close()
        return int(head[0].split()[1]), content

    async def close(self) -> None:
        if self.stream is not None:
            self.stream[1].close()
            self.stream = None


async def concurrent(url: str, questions: list[str], clients: int, mode: str, server_pid: int,
                     per_client: int = 1) -> dict[str, Any]:
    """``clients`` clients at once, each on its own connection sending ``per_client`` queries one
    after the other; throughput over the whole burst, latency percentiles, and the CPU seconds
    the server spent per query (on a shared machine it may get less than every core:
    ``server_cores`` is how many it had on average)."""
    address = httpx.URL(url)
    connections = [Connection(address.host, address.port or 80) for _ in range(clients)]
    retried = 0

    async def one(connection: Connection, q: str) -> float:
        nonlocal retried
        t = time.perf_counter()
        try:
            status, _ = await connection.post("/query", {"question": q, **context_only(mode)})
        except (asyncio.IncompleteReadError, ConnectionError):  # a kept-alive connection the server closed
            retried += 1
            await connection.close()
            status, _ = await connection.post("/query", {"question": q, **context_only(mode)})
        if status != 200:
            raise RuntimeError(f"/query answered {status}")
        return time.perf_counter() - t

    async def client(i: int, connection: Connection) -> list[float]:
        return [await one(connection, questions[(i + k * clients) % len(questions)]) for k in range(per_client)]

    try:
        await asyncio.gather(*(one(c, q) for c, q in zip(connections, questions)))  # connections opened
        t, cpu, loop_cpu, own_cpu = time.perf_counter(), tree_cpu_s(server_pid), proc_cpu_s(server_pid), time.process_time()
        times = [s for ts in await asyncio.gather(*(client(i, c) for i, c in enumerate(connections))) for s in ts]
        wall, cpu = time.perf_counter() - t, tree_cpu_s(server_pid) - cpu
        loop_cpu, own_cpu = (proc_cpu_s(server_pid) or 0.0) - (loop_cpu or 0.0), time.process_time() - own_cpu
    finally:
        for connection in connections:
            await connection.close()
    queries = clients * per_client
    return {"mode": mode, "queries": queries, "wall_s": round(wall, 3), "per_s": round(queries / wall, 1),
            "p50_ms": round(statistics.median(times) * 1000, 1), "p95_ms": round(percentile(times, 0.95) * 1000, 1),
            "server_cpu_ms": round(cpu / queries * 1000, 2), "server_cores": round(cpu / wall, 2),
            # the server's own process (its loop; during an insert, the writer too), and this
            # benchmark's clients, which share the machine's cores with the server
            "server_process_cpu_ms": round(loop_cpu / queries * 1000, 2),
            "client_cpu_ms": round(own_cpu / queries * 1000, 2), "retried": retried}


def summary(bursts: list[dict[str, Any]]) -> dict[str, Any]:
    """Median throughput and latencies over bursts."""
    if not bursts:
        return {"bursts": 0}
    return {"bursts": len(bursts), **{k: round(statistics.median(b[k] for b in bursts), 2)
                                      for k in ("per_s", "p50_ms", "p95_ms", "server_cpu_ms", "server_cores",
                                                "server_process_cpu_ms", "client_cpu_ms")}}


def start_serving(working_dir: str, llm_url: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRAPHRAG_EMBEDDING": "hash", "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "bench"}
    # Run from the working dir's parent: `-m` puts the current folder first on sys.path, and
    # the engine must be the one installed for this interpreter.
    proc = subprocess.Popen([sys.executable, "-m", "graphrag.cli", "serve", "--working-dir", working_dir,
                             "--port", str(port), *extra], env=env, cwd=os.path.dirname(working_dir),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved in-process/HTTP rounds, and bursts, per mode")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--per-client", type=int, default=1,
                    help="queries each client sends in a burst, one after the other (a longer burst: "
                         "less of it is the start and the tail)")
    ap.add_argument("--insert-latency", type=float, default=0.2, help="mock LLM latency during the insert (s)")
    ap.add_argument("--insert-passages", type=int, default=40, help="passages the insert during the bursts adds")
    ap.add_argument("--modes", default="local", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--server-args", default="", help="added to `graphrag serve`'s command line")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: choose among {', '.join(MODES)}")

    from graphrag import GraphRAG, hash_embedding

    copy = os.path.join(tempfile.mkdtemp(prefix="serve-bench-"), "wd")
    shutil.copytree(args.working_dir, copy)
    questions = pick_questions(copy, args.questions)
    llm_proc, llm_url = start_server(args.insert_latency)
    server, url = start_serving(copy, llm_url, shlex.split(args.server_args))
    cores = len(os.sched_getaffinity(0))
    record: dict[str, Any] = {"working_dir": args.working_dir, "server_args": args.server_args,
                              "questions": len(questions), "clients": args.clients,
                              "per_client": args.per_client, "cores": cores,
                              "load_average_before": load_average()}
    ticks = host_cpu_ticks()
    try:
        rag = GraphRAG(working_dir=copy, embedding_func=hash_embedding(384), always_create_working_dir=False)
        with httpx.Client(base_url=url, timeout=120) as client:
            for mode in modes:
                asyncio.run(in_process(rag, questions, mode))  # both warm: stores read, connections open
                over_http(client, questions, mode)
                rounds, cpu = [], []
                for _ in range(args.rounds):
                    local, cpu_s = asyncio.run(in_process(rag, questions, mode))
                    remote = over_http(client, questions, mode)
                    burst = asyncio.run(concurrent(url, questions, args.clients, mode, server.pid, args.per_client))
                    cpu.append(cpu_s)
                    rounds.append({"in_process_p50_ms": round(statistics.median(local) * 1000, 2),
                                   "in_process_cpu_ms": round(cpu_s * 1000, 2),
                                   "http_p50_ms": round(statistics.median(remote) * 1000, 2), "burst": burst})
                cpu_s = statistics.median(cpu)
                idle = summary([r["burst"] for r in rounds])
                record[mode] = {"rounds": rounds, "query_cpu_ms": round(cpu_s * 1000, 2),
                                "bound_per_s": round(cores / cpu_s, 1), "idle": idle,
                                "share_of_bound": round(idle["per_s"] * cpu_s / cores, 2)}

            # An insert of new passages (LLM extraction at --insert-latency a call) while the
            # same bursts run, mode after mode; each burst is kept only if the job was still
            # running after it.
            texts = [f"Passage {i} of the serving benchmark: Orla Venn{i} met Caius Brandt{i} at the Harbor "
                     f"Guild of Tessaly{i}, where the Brandt{i} family kept ledgers." for i in range(args.insert_passages)]
            job = client.post("/documents", json={"texts": texts}).json()
            during: list[dict[str, Any]] = []
            livez: list[float] = []  # how long the server's loop took to answer, between bursts
            while client.get(f"/jobs/{job['id']}").json()["status"] in ("queued", "running"):
                burst = asyncio.run(concurrent(url, questions, args.clients, modes[len(during) % len(modes)],
                                              server.pid, args.per_client))
                answered = []
                for _ in range(5):
                    t = time.perf_counter()
                    client.get("/livez").raise_for_status()
                    answered.append(time.perf_counter() - t)
                if client.get(f"/jobs/{job['id']}").json()["status"] == "running":
                    during.append(burst)
                    livez += answered
            finished = client.get(f"/jobs/{job['id']}").json()
            for mode in modes:
                record[mode]["during_insert"] = summary([b for b in during if b["mode"] == mode])
            record["insert_job"] = {"status": finished["status"], "seconds": (finished["stats"] or {}).get("seconds")}
            if livez:
                record["livez_during_insert_ms"] = {"p50": round(statistics.median(livez) * 1000, 1),
                                                    "max": round(max(livez) * 1000, 1), "samples": len(livez)}
    finally:
        server.terminate()
        llm_proc.terminate()
        server.wait(timeout=30)
        shutil.rmtree(os.path.dirname(copy), ignore_errors=True)
    record["load_average_after"] = load_average()
    record["host_cpu_steal_share"] = steal_share(ticks, host_cpu_ticks())
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
