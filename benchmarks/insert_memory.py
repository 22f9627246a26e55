"""The insert's peak RSS and CPU, and what holds memory at the peak.

    python benchmarks/insert_memory.py CORPUS [--limit N] [--tracemalloc FRAMES] [--profile FILE]

Inserts the corpus into an empty working dir over the mock LLM (0 ms) with the 384-d hash
embedding, as ``vs_nano.py``'s insert step does, and prints one JSON record: wall, CPU, peak
RSS, the RSS after the insert and the digest of the files written (to check that a change
leaves the index identical). A thread samples the RSS every 20 ms and keeps, at each new
maximum, the main thread's stack; with ``--tracemalloc`` also a snapshot of the Python heap,
whose largest allocation sites (and their growth over the start) go to stderr. ``--profile``
writes a cProfile of the insert instead.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import load_corpus, log, peak_rss_mb, proc_cpu_s, start_server  # noqa: E402

MAX_ASYNC = 16
SNAPSHOT_STEP_MB = 100


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class PeakWatcher(threading.Thread):
    """Samples the RSS; at each new maximum (by 5 MiB) keeps every thread's stack. With
    tracemalloc running, it keeps a heap snapshot at each new maximum of the traced heap by
    ``SNAPSHOT_STEP_MB`` (a snapshot costs seconds)."""

    def __init__(self, snapshots: bool) -> None:
        super().__init__(daemon=True)
        self.snapshots = snapshots
        self.stop = threading.Event()
        self.peak = 0.0
        self.stack: list[str] = []
        self.snapshot: Any = None
        self.traced_peak = 0.0
        self.timeline: list[tuple[float, float]] = []

    def run(self) -> None:
        import tracemalloc

        start = time.perf_counter()
        while not self.stop.wait(0.02):
            now = rss_mb()
            self.timeline.append((time.perf_counter() - start, now))
            if now > self.peak + 5:
                self.peak = now
                self.stack = []
                for ident, frame in sys._current_frames().items():
                    if ident != self.ident:
                        self.stack += [f"thread {ident}:\n", *traceback.format_stack(frame)[-12:]]
            if self.snapshots:
                traced = tracemalloc.get_traced_memory()[0] / 2**20
                if traced > self.traced_peak + SNAPSHOT_STEP_MB:
                    self.traced_peak = traced
                    self.snapshot = tracemalloc.take_snapshot()
                    log(f"snapshot at {traced:.0f} MiB traced, RSS {now:.0f}")


def _graph_canon(file: str) -> bytes:
    """A GraphML graph's nodes and edges with their data, sorted: the graph is built in the
    order the model's answers arrive, so the file's node order varies where the graph does not."""
    import networkx as nx

    graph = nx.read_graphml(file)
    nodes = sorted((n, sorted(d.items())) for n, d in graph.nodes(data=True))
    edges = sorted((min(u, v), max(u, v), sorted(d.items())) for u, v, d in graph.edges(data=True))
    return json.dumps([nodes, edges], ensure_ascii=False).encode("utf-8")


def digest(path: str) -> str:
    """One hash over the index the insert wrote: each JSON file's records with keys sorted
    (the model's answers arrive in any order, and so do the keys they add), the graph's nodes
    and edges sorted, every other file's bytes. Left out: the LLM cache (call order), the lookup
    indexes (they name their file by mtime and inode) and the walk adjacency (derived from the
    graph, in the file's node order)."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        if "llm_response_cache" in name or name.endswith((".index", ".walk")):
            continue
        file = os.path.join(path, name)
        if name.endswith(".graphml"):
            raw = _graph_canon(file)
        else:
            with open(file, "rb") as f:
                raw = f.read()
        if name.endswith(".json"):
            raw = json.dumps(json.loads(raw), sort_keys=True, ensure_ascii=False).encode("utf-8")
        h.update(name.encode() + hashlib.sha256(raw).digest())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--limit", type=int, default=0, help="first N documents only")
    ap.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                    help="trace allocations, keeping FRAMES frames each")
    ap.add_argument("--profile", help="write a cProfile of the insert here")
    ap.add_argument("--keep", help="copy the working dir here afterwards")
    ap.add_argument("--timeline", help="write (seconds, RSS MiB) samples here as JSON")
    args = ap.parse_args()

    docs = load_corpus(args.corpus)
    if args.limit:
        docs = docs[: args.limit]
    server, base_url = start_server(0.0)
    working_dir = tempfile.mkdtemp(prefix="insert_memory_")
    try:
        from graphrag import GraphRAG
        from graphrag.embedding import hash_embedding

        rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384), llm_base_url=base_url,
                       llm_api_key="k", best_model_max_async=MAX_ASYNC, cheap_model_max_async=MAX_ASYNC,
                       llm_max_async_total=MAX_ASYNC, show_progress=False)
        if args.tracemalloc:
            import tracemalloc

            tracemalloc.start(args.tracemalloc)
        before = tracemalloc.take_snapshot() if args.tracemalloc else None
        watcher = PeakWatcher(args.tracemalloc)
        watcher.start()
        wall, cpu, server_cpu = time.perf_counter(), time.process_time(), proc_cpu_s(server.pid)
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
            rag.insert(docs)
            prof.disable()
            prof.dump_stats(args.profile)
        else:
            rag.insert(docs)
        out: dict[str, Any] = {"insert_wall_s": round(time.perf_counter() - wall, 2),
                               "insert_cpu_s": round(time.process_time() - cpu, 2),
                               "peak_rss_mb": peak_rss_mb(), "rss_after_mb": round(rss_mb(), 1)}
        server_cpu_after = proc_cpu_s(server.pid)
        if server_cpu is not None and server_cpu_after is not None:
            out["mock_server_cpu_s"] = round(server_cpu_after - server_cpu, 2)
        watcher.stop.set()
        watcher.join()
        stats = rag.last_insert_stats or {}
        out["stages"] = {k: round(v, 2) for k, v in (stats.get("stage_seconds") or {}).items()
                         if isinstance(v, (int, float))}
        out["llm"] = stats.get("llm") or {}
        del rag
        out["digest"] = digest(working_dir)
        log("stacks at the sampled peak (%.0f MiB):\n%s" % (watcher.peak, "".join(watcher.stack)))
        if watcher.snapshot is not None and before is not None:
            log("largest growth at the peak (traced):")
            for stat in watcher.snapshot.compare_to(before, "traceback")[:15]:
                log(f"{stat.size_diff / 2**20:8.1f} MiB {stat.count_diff:8d} blocks")
                for line in stat.traceback.format()[-12:]:
                    print("        " + line, file=sys.stderr)
            log("by line:")
            for stat in watcher.snapshot.compare_to(before, "lineno")[:25]:
                log(f"{stat.size_diff / 2**20:8.1f} MiB {stat.traceback}")
        if args.timeline:
            with open(args.timeline, "w") as f:
                json.dump(watcher.timeline, f)
        if args.keep:
            shutil.copytree(working_dir, args.keep, dirs_exist_ok=True)
        print(json.dumps(out))
    finally:
        server.kill()
        shutil.rmtree(working_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
