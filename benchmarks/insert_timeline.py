"""Where an insert's wall time goes: each stage's span with the CPU spent meanwhile.

    python benchmarks/insert_timeline.py CORPUS [--limit N]

Inserts the corpus into an empty working dir over the mock LLM (0 ms) with the 384-d hash
embedding, as ``insert_memory.py`` does, and prints one line per stage as the pipeline's
``StageTimer`` times it (stages that run beside others overlap): when it started (seconds
after the insert began), its wall seconds, the CPU seconds of this process and of its main
thread (the event loop's) meanwhile, the mock's CPU seconds (another process, sharing the
machine's cores), and the seconds the event loop sat waiting in ``select`` (idle). A stage
whose wall is near its main-thread CPU holds the loop; one whose mock CPU is near its wall
waits for the model server's core.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import load_corpus, proc_cpu_s, start_server  # noqa: E402

MAX_ASYNC = 16


class LoopIdle:
    """Seconds the main thread spent in the selector's ``select`` (the event loop waiting)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._main = threading.get_ident()
        self._select = selectors.DefaultSelector.select

    def install(self) -> None:
        select, watcher = self._select, self

        def timed(selector: Any, timeout: Any = None) -> Any:
            if threading.get_ident() != watcher._main:
                return select(selector, timeout)
            started = time.perf_counter()
            try:
                return select(selector, timeout)
            finally:
                watcher.seconds += time.perf_counter() - started

        selectors.DefaultSelector.select = timed  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--limit", type=int, default=0, help="first N documents only")
    args = ap.parse_args()

    from graphrag.scheduling import StageTimer

    docs = load_corpus(args.corpus)[: args.limit or None]
    server, base_url = start_server(0.0)
    idle = LoopIdle()
    idle.install()
    start = time.perf_counter()

    def now() -> tuple[float, ...]:
        return (time.perf_counter() - start, time.process_time(), time.thread_time(),
                proc_cpu_s(server.pid) or 0.0, idle.seconds)

    spans: list[tuple[str, tuple[float, ...], tuple[float, ...]]] = []
    timed = StageTimer.stage

    @contextlib.contextmanager
    def stage(self: StageTimer, name: str) -> Iterator[None]:
        began = now()
        try:
            with timed(self, name):
                yield
        finally:
            spans.append((name, began, now()))

    StageTimer.stage = stage  # type: ignore[method-assign]
    working_dir = tempfile.mkdtemp(prefix="insert_timeline_")
    try:
        from graphrag import GraphRAG
        from graphrag.embedding import hash_embedding

        rag = GraphRAG(working_dir=working_dir, embedding_func=hash_embedding(384), llm_base_url=base_url,
                       llm_api_key="k", best_model_max_async=MAX_ASYNC, cheap_model_max_async=MAX_ASYNC,
                       llm_max_async_total=MAX_ASYNC, show_progress=False)
        start = time.perf_counter()
        began = now()
        rag.insert(docs)
        spans.append(("(insert)", began, now()))
        print(f"{'stage':14s} {'start':>6s} {'wall':>6s} {'cpu':>6s} {'main':>6s} {'mock':>6s} {'idle':>6s}")
        for name, a, b in sorted(spans, key=lambda s: s[1][0]):
            wall, cpu, main_cpu, mock, waited = (y - x for x, y in zip(a, b))
            print(f"{name:14s} {a[0]:6.2f} {wall:6.2f} {cpu:6.2f} {main_cpu:6.2f} {mock:6.2f} {waited:6.2f}")
    finally:
        server.kill()
        shutil.rmtree(working_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
