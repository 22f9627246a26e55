"""End-to-end indexing and query benchmark against the local mock LLM server.

    python benchmarks/bench.py CORPUS [--latency 0.0] [--max-async 16] [--embedding hash|local]
                               [--working-dir DIR] [--queries 20] [--profile FILE]

CORPUS: a text file (one document), a folder of .txt/.md files (one document each), or a
JSON file: a list of passages (strings or {"text"/"content": ...}) or HotpotQA's
``{title: [sentences]}``. The mock server runs in a subprocess so its threads do not
compete with the engine for the GIL. Prints one JSON record on stdout (progress on stderr).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
# The mock server is test support, not part of the installed package: run from the checkout.
MOCK_SERVER = os.path.join(os.path.dirname(HERE), "tests", "mock_llm_server.py")
NEW_DOCUMENT = (
    "Quillon Barrowmere founded the Barrowmere Lighthouse Society in the harbour town of Estermoor. "
    "The society keeps the old Estermoor lighthouse running and trains young keepers. "
    "Its patron, Lady Ysolde Faircastle, funded the restoration after the great storm of 1887, "
    "and Quillon Barrowmere wrote the society's first handbook with her help."
)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- corpus


def load_corpus(path: str) -> list[str]:
    if os.path.isdir(path):
        docs = []
        for name in sorted(os.listdir(path)):
            if name.endswith((".txt", ".md")):
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    docs.append(f.read())
        return docs
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, dict):  # HotpotQA: {title: [sentences]}
            return [f"{t}\n{''.join(s) if isinstance(s, list) else s}" for t, s in data.items()]
        return [d if isinstance(d, str) else (d.get("text") or d.get("content") or "") for d in data]
    with open(path, encoding="utf-8") as f:
        return [f.read()]


def embedding(kind: str) -> Any:
    from graphrag.embedding import hash_embedding, local_embedding

    return hash_embedding(384) if kind == "hash" else local_embedding()


# --------------------------------------------------------------------------- mock server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, MOCK_SERVER, "--port", str(port), "--latency", str(latency),
         "--embedding-dim", "384"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("mock LLM server exited at start")
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("mock LLM server did not start")


def first_request_through_openai(base_url: str) -> None:
    """One request through a throwaway openai client: what openai leaves to its first use
    (importing the HTTP transport and anyio's backend, probing the platform) is paid here,
    as ``import openai`` is. The engine still builds its own client, TLS context and
    connections inside the insert."""
    import asyncio

    import openai

    async def ask() -> None:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        try:
            await client.models.list()
        finally:
            await client.close()

    asyncio.run(ask())


def open_rag(working_dir: str, base_url: str, max_async: int, emb: str) -> Any:
    from graphrag import GraphRAG

    # Both models are served by the one mock: max_async is the limit on all calls together.
    # GRAPHRAG_BENCH_CONFIG: more options as a JSON object (read by the query child processes too),
    # e.g. '{"entity_resolution_llm_check": false}' to time a write without the resolution judge.
    extra = json.loads(os.environ.get("GRAPHRAG_BENCH_CONFIG") or "{}")
    return GraphRAG(working_dir=working_dir, embedding_func=embedding(emb), llm_base_url=base_url,
                    llm_api_key="k", best_model_max_async=max_async, cheap_model_max_async=max_async,
                    llm_max_async_total=max_async, show_progress=False, **extra)


def server_peak_concurrency(base_url: str) -> Optional[int]:
    """Most chat requests the mock server had in flight at once (checks the bound's premise)."""
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/mock/stats", timeout=5) as reply:
            return json.loads(reply.read())["peak_concurrency"]
    except OSError:
        return None


# --------------------------------------------------------------------------- helpers


def dir_size(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def peak_rss_mb() -> float:
    """This process's peak RSS. ``ru_maxrss`` survives ``exec`` on Linux (a query child would
    report the benchmark's own peak), so the kernel's per-address-space mark comes first."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def llm_totals(llm: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for stage in llm.values():
        for k, v in stage.items():
            out[k] = out.get(k, 0) + v
    return out


def proc_cpu_s(pid: int) -> Optional[float]:
    """utime+stime of another process (Linux /proc), to attribute CPU to the mock server."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


SERVER_PID: Optional[int] = None

WARM_UP_DOC = ("Ebenezer Scrooge kept a counting-house in London with his clerk Bob Cratchit. "
               "Jacob Marley, his late partner, had died seven years before.")


def host_cpu_ticks() -> Optional[list[int]]:
    """The machine's aggregate CPU tick counters (Linux /proc/stat: user ... steal)."""
    try:
        with open("/proc/stat") as f:
            return [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def steal_share(before: Optional[list[int]], after: Optional[list[int]]) -> Optional[float]:
    """Share of CPU time the hypervisor gave to other guests: a noisy-neighbour gauge."""
    if not before or not after:
        return None
    delta = [b - a for a, b in zip(before, after)]
    return round(delta[7] / sum(delta), 3) if sum(delta) else None


def insert_record(rag: Any, docs: list[str]) -> dict[str, Any]:
    server_cpu0 = proc_cpu_s(SERVER_PID) if SERVER_PID else None
    ticks0 = host_cpu_ticks()
    cpu0 = time.process_time()
    t = time.perf_counter()
    rag.insert(docs)
    wall = time.perf_counter() - t
    cpu = time.process_time() - cpu0
    server_cpu1 = proc_cpu_s(SERVER_PID) if SERVER_PID else None
    stats = rag.last_insert_stats or {}
    return {"wall_s": round(wall, 3), "engine_cpu_s": round(cpu, 3),
            "host_cpu_steal_share": steal_share(ticks0, host_cpu_ticks()),
            "mock_server_cpu_s": round(server_cpu1 - server_cpu0, 3) if server_cpu0 is not None
            and server_cpu1 is not None else None,
            "stage_seconds": stats.get("stage_seconds", {}),
            "llm": stats.get("llm", {}), "llm_total": llm_totals(stats.get("llm", {})),
            "summary": {k: v for k, v in stats.items() if k not in ("llm", "stage_seconds")}}


def pick_questions(working_dir: str, n: int) -> list[str]:
    """~n different questions about the index's best-connected entities (deterministic)."""
    import networkx as nx

    path = os.path.join(working_dir, "graph_chunk_entity_relation.graphml")
    names: list[str] = []
    if os.path.exists(path):
        g = nx.read_graphml(path)
        names = [str(n).strip('"') for n, _ in sorted(g.degree, key=lambda x: (-x[1], str(x[0])))[: n * 3]]
    templates = ["What is the role of {} in the story?", "Who is connected to {}?",
                 "What are the main events involving {}?", "Describe {} and its relationships."]
    out = [templates[i % len(templates)].format(name.title()) for i, name in enumerate(names[::3][:n])]
    generic = ["What are the main themes?", "Who are the most important people?", "Which places matter most?"]
    return (out + generic)[:max(n, 1)]


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


# --------------------------------------------------------------------------- cold start (child process)


def child_query(args: argparse.Namespace) -> None:
    """Runs in a fresh process: open the working dir, answer one ``--first-mode`` query (stores
    are read on first use, so each mode's first query pays for the stores it needs), then,
    with ``--questions-per-mode``, time the rest."""
    t0 = time.perf_counter()
    import graphrag  # noqa: F401
    from graphrag import QueryParam

    t_import = time.perf_counter() - t0
    t = time.perf_counter()
    rag = open_rag(args.working_dir, args.base_url, args.max_async, args.embedding)
    t_open = time.perf_counter() - t
    questions = json.loads(args.questions)
    t = time.perf_counter()
    rag.query(questions[0], QueryParam(mode=args.first_mode, only_need_context=True))
    t_first = time.perf_counter() - t
    out: dict[str, Any] = {"import_s": round(t_import, 3), "open_s": round(t_open, 3),
                           "first_query_s": round(t_first, 3),
                           "open_plus_first_query_s": round(t_open + t_first, 3),
                           "rss_after_first_query_mb": peak_rss_mb()}
    if args.time_all_modes:
        latencies: dict[str, Any] = {}
        for mode in ("local", "global", "naive"):
            times = []
            for q in questions:
                t = time.perf_counter()
                rag.query(q, QueryParam(mode=mode, only_need_context=True))
                times.append(time.perf_counter() - t)
            latencies[mode] = {"n": len(times), "median_ms": round(statistics.median(times) * 1000, 1),
                               "p95_ms": round(percentile(times, 0.95) * 1000, 1)}
        out["query_latency"] = latencies
        out["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(out))


def cold_start(args: argparse.Namespace, working_dir: str, base_url: str, questions: list[str]) -> dict[str, Any]:
    """A fresh process per mode for its first query; the local one then times every mode."""

    def child(mode: str, time_all_modes: bool) -> dict[str, Any]:
        cmd = [sys.executable, os.path.abspath(__file__), "--child-query", "--working-dir", working_dir,
               "--base-url", base_url, "--max-async", str(args.max_async), "--embedding", args.embedding,
               "--questions", json.dumps(questions), "--first-mode", mode, "-"]
        if time_all_modes:
            cmd.insert(-1, "--time-all-modes")
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"query child failed:\n{proc.stderr[-4000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        out["process_wall_s"] = round(wall, 3)
        return out

    local = child("local", True)
    out = {"import_s": local["import_s"], "open_s": local["open_s"],
           "first_local_query_s": local["first_query_s"],
           "open_plus_first_query_s": local["open_plus_first_query_s"],
           "rss_after_first_query_mb": local["rss_after_first_query_mb"],
           "query_latency": local["query_latency"], "peak_rss_mb": local["peak_rss_mb"],
           "process_wall_s_incl_all_queries": local["process_wall_s"],
           "open_plus_first_query_s_by_mode": {"local": local["open_plus_first_query_s"]},
           "rss_after_first_query_mb_by_mode": {"local": local["rss_after_first_query_mb"]}}
    for mode in ("global", "naive"):
        first = child(mode, False)
        out["open_plus_first_query_s_by_mode"][mode] = first["open_plus_first_query_s"]
        out["rss_after_first_query_mb_by_mode"][mode] = first["rss_after_first_query_mb"]
    return out


# --------------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> dict[str, Any]:
    docs = load_corpus(args.corpus)
    working_dir = args.working_dir or tempfile.mkdtemp(prefix="graphrag_bench_")
    if os.path.exists(working_dir):
        shutil.rmtree(working_dir)
    os.makedirs(working_dir)
    global SERVER_PID
    server, base_url = start_server(args.latency)
    SERVER_PID = server.pid
    record: dict[str, Any] = {
        "corpus": os.path.basename(args.corpus.rstrip("/")), "documents": len(docs),
        "chars": sum(len(d) for d in docs), "latency_s": args.latency, "max_async": args.max_async,
        "embedding": args.embedding, "cpus": os.cpu_count(),
    }
    try:
        from graphrag.operators.tokenizer import get_tokenizer

        t = time.perf_counter()
        tokenizer = get_tokenizer("gpt-4o")  # the engine's, cached for the process
        record["tokenizer_load_s"] = round(time.perf_counter() - t, 3)
        record["tokens"] = sum(tokenizer.count(d) for d in docs)
        log(f"{record['documents']} documents, {record['tokens']} tokens -> {working_dir}")

        # Once-per-process costs of the libraries, independent of the corpus, timed on their
        # own so that the insert's wall time measures the engine and the LLM calls.
        t = time.perf_counter()
        import openai  # noqa: F401

        record["openai_import_s"] = round(time.perf_counter() - t, 3)
        record["process"] = args.process
        if args.process != "cold":
            t = time.perf_counter()
            first_request_through_openai(base_url)
            record["http_first_use_s"] = round(time.perf_counter() - t, 3)
        if args.process == "warm":
            # What a service or notebook has done before: one small insert elsewhere, so the
            # HTTP stack's first-use costs (lazy imports, platform probe) are paid already.
            scratch = tempfile.mkdtemp(prefix="graphrag_bench_warm_")
            t = time.perf_counter()
            open_rag(scratch, base_url, args.max_async, args.embedding).insert([WARM_UP_DOC])
            record["warm_up_insert_s"] = round(time.perf_counter() - t, 3)
            shutil.rmtree(scratch, ignore_errors=True)
        rag = open_rag(working_dir, base_url, args.max_async, args.embedding)
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            ins = insert_record(rag, docs)
            prof.disable()
            prof.dump_stats(args.profile)
            pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        else:
            ins = insert_record(rag, docs)
        calls = ins["llm_total"].get("calls", 0)
        ins["llm_peak_in_flight"] = server_peak_concurrency(base_url)
        ins["peak_rss_mb"] = peak_rss_mb()
        ins["working_dir_mb"] = round(dir_size(working_dir) / 2**20, 2)
        stages = ins["stage_seconds"]
        total_stage = sum(stages.values()) or 1.0
        ins["stage_share"] = {k: round(v / total_stage, 3) for k, v in stages.items()}
        if args.latency > 0:
            bound = calls * args.latency / args.max_async
            ins["llm_bound_s"] = round(bound, 3)
            ins["wall_over_llm_bound"] = round(ins["wall_s"] / bound, 3) if bound else None
        record["insert"] = ins
        log(f"insert: {ins['wall_s']} s, {calls} LLM calls, stages {stages}")
        del rag

        if args.queries > 0:
            questions = pick_questions(working_dir, args.queries)
            record["cold_start_and_queries"] = cold_start(args, working_dir, base_url, questions)
            log(f"queries: {record['cold_start_and_queries']}")

        rag = open_rag(working_dir, base_url, args.max_async, args.embedding)
        re_ins = insert_record(rag, docs)
        record["reinsert_same"] = {k: re_ins[k] for k in ("wall_s", "engine_cpu_s", "llm_total", "stage_seconds")}
        log(f"re-insert: {re_ins['wall_s']} s, {re_ins['llm_total'].get('calls', 0)} LLM calls")

        one = insert_record(rag, [NEW_DOCUMENT])
        record["insert_one_new_doc"] = {k: one[k] for k in ("wall_s", "engine_cpu_s", "llm", "llm_total",
                                                            "stage_seconds")}
        record["insert_one_new_doc"]["entities_changed"] = one["summary"].get("entities_changed")
        record["insert_one_new_doc"]["reports_generated"] = one["summary"].get("reports_generated")
        log(f"one new doc: {one['wall_s']} s, {one['llm_total'].get('calls', 0)} LLM calls")
        record["peak_rss_mb"] = peak_rss_mb()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        if not args.keep and not args.working_dir:
            shutil.rmtree(working_dir, ignore_errors=True)
    return record


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description="filegraphrag indexing/query benchmark (mock LLM)")
    ap.add_argument("corpus", help="text file, folder of .txt/.md, or JSON list of passages")
    ap.add_argument("--latency", type=float, default=0.0, help="mock LLM latency per chat call (s)")
    ap.add_argument("--max-async", type=int, default=16)
    ap.add_argument("--embedding", choices=("hash", "local"), default="hash")
    ap.add_argument("--working-dir", default=None, help="fresh dir to index into (wiped first)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary working dir")
    ap.add_argument("--queries", type=int, default=20, help="questions per query mode (0: skip)")
    ap.add_argument("--profile", default=None, help="cProfile the first insert into this .prof file")
    ap.add_argument("--process", choices=("cold", "fresh", "warm"), default="fresh",
                    help="what the process has done before the insert: cold: only import openai; "
                         "fresh (default): also one request through a throwaway openai client; "
                         "warm: also a first insert of one short paragraph into a scratch dir")
    ap.add_argument("--child-query", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--base-url", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--questions", default="[]", help=argparse.SUPPRESS)
    ap.add_argument("--first-mode", default="local", help=argparse.SUPPRESS)
    ap.add_argument("--time-all-modes", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_query:
        child_query(args)
        return
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
