"""Insert a corpus into a working dir in a separate process (for kill -9 and concurrency tests).

One job:
    python tests/_insert_worker.py JOB.json        -> prints the insert stats as one JSON line

Fork server (each insert is still its own process, but skips the seconds of imports):
    python tests/_insert_worker.py --serve
reads one JOB.json path per line on stdin, forks a child that runs it, and answers with the
child's pid on stdout. The child writes its stats to ``JOB["stats_path"]`` (or a traceback to
``JOB["error_path"]``) and exits; children are reaped automatically.

JOB.json: {"working_dir": ..., "docs": [...], "url": LLM base URL or null,
"extraction": "llm"|"nlp", "lock_timeout": seconds, "max_async": int, "marker": path or null,
"slow_replace": seconds, "stats_path": path, "error_path": path, "storage": {...} or absent}.
``storage``: GraphRAG keywords choosing the backends (kv_storage=..., storage_options=...).

``kill_after_write_ahead``: the process SIGKILLs itself the moment a commit's write-ahead
manifest is written (before any database commits or file is renamed).

``marker``: lines are appended to this file so the parent can time a kill: ``ready`` when the
insert is about to start, ``replace NAME`` right before each ``os.replace`` onto NAME (with
``slow_replace`` > 0 it then sleeps, holding the writer inside the commit: before the
manifest exists, or between renames after it), and ``done`` at the end.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from typing import Any


def _preload() -> None:
    """The slow imports, done before any kill timing starts."""
    import openai  # noqa: F401

    from graphrag import GraphRAG  # noqa: F401
    from graphrag.operators.tokenizer import get_tokenizer

    get_tokenizer("gpt-4o")


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    marker = job.get("marker")

    def mark(text: str) -> None:
        if marker:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, (text + "\n").encode("utf-8"))
            finally:
                os.close(fd)

    slow = float(job.get("slow_replace") or 0)
    if marker:
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
            mark(f"replace {os.path.basename(os.fspath(dst))}")
            if slow:
                time.sleep(slow)
            return real_replace(src, dst, *args, **kwargs)

        os.replace = replace  # type: ignore[assignment]

    if job.get("kill_after_write_ahead"):
        from graphrag.storage import files

        real_write_ahead = files.write_ahead

        def write_ahead_then_die(*args, **kwargs):  # type: ignore[no-untyped-def]
            real_write_ahead(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)

        files.write_ahead = write_ahead_then_die  # type: ignore[assignment]

    from graphrag import GraphRAG, hash_embedding

    kwargs: dict[str, Any] = dict(
        working_dir=job["working_dir"],
        embedding_func=hash_embedding(64),
        chunk_token_size=120,
        chunk_overlap_token_size=20,
        extraction=job.get("extraction", "llm"),
        lock_timeout=float(job.get("lock_timeout", 60)),
        show_progress=False,
        **job.get("storage", {}),
    )
    if job.get("url"):
        max_async = int(job.get("max_async", 4))
        kwargs.update(llm_base_url=job["url"], llm_api_key="k", best_model_max_async=max_async,
                      cheap_model_max_async=max_async, llm_max_retries=2)
    rag = GraphRAG(**kwargs)
    _ = rag.tokenizer
    mark("ready")
    stats = rag.insert(job["docs"])
    mark("done")
    return stats


def _write(path: str, text: str) -> None:
    tmp = f"{path}.part"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.rename(tmp, path)


def serve() -> None:
    _preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps finished children
    print("serving", flush=True)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                with open(path, encoding="utf-8") as f:
                    job = json.load(f)
                try:
                    stats = run_job(job)
                    _write(job["stats_path"], json.dumps(stats))
                except BaseException as exc:  # noqa: BLE001 - reported to the parent
                    code = 1
                    _write(job["error_path"], f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            finally:
                sys.stdout.flush()
                os._exit(code)
        print(pid, flush=True)


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    _preload()
    print(json.dumps(run_job(job)), flush=True)


if __name__ == "__main__":
    main()
