"""The writer's own thread (``graphrag/server/writer_thread.py``): a write's CPU work holds up
neither the server's loop nor its queries, and progress and cancellation keep their meaning."""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from graphrag import hash_embedding
from graphrag.progress import progress_listener
from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from graphrag.server.writer_thread import WriterThread
from helpers_server import EMBEDDING_DIM, build_index, index_config, running, wait_for_job

MARKER = "Ponder"


def busy_embedding(seconds: float, computing: threading.Event) -> Any:
    """The hash embedding, but a text holding ``MARKER`` keeps the CPU busy for ``seconds`` on
    the calling loop's thread (as a write's own CPU stretches do), ``computing`` set meanwhile."""
    embedding = hash_embedding(EMBEDDING_DIM)
    vectors = embedding.func

    async def embed(texts: list[str]) -> Any:
        if any(MARKER in t for t in texts):
            computing.set()
            deadline = time.process_time() + seconds
            while time.process_time() < deadline:
                pass
        return await vectors(texts)

    embedding.func = embed
    return embedding


def test_the_loop_and_queries_answer_while_an_insert_computes(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    computing = threading.Event()
    service = GraphService(index_config(wd, embedding_func=busy_embedding(2.0, computing)))
    with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/documents", json={"text": f"{MARKER}: Ilse Varga founded Quillmoor Press in Dunmere.",
                                              "source": "press.txt"}).json()
        assert computing.wait(30)
        started = time.monotonic()
        assert client.get("/livez").status_code == 200
        livez_s = time.monotonic() - started
        status = client.get(f"/jobs/{job['id']}").json()["status"]
        answer = client.post("/query", json={"question": "Where is Ashcombe Mills based?", "mode": "local",
                                             "only_need_context": True})
        answered_s = time.monotonic() - started
        still_running = client.get(f"/jobs/{job['id']}").json()["status"] == "running"
        assert answer.status_code == 200 and "ASHCOMBE MILLS" in answer.json()["answer"]
        # On the server's loop the 2 s of CPU would hold each of these until it ended.
        assert livez_s < 1.0 and answered_s < 2.0 and status == "running" and still_running
        assert wait_for_job(client, job["id"], timeout=180)["status"] == "done"
        after = client.post("/query", json={"question": "Who founded Quillmoor Press?", "mode": "local",
                                            "only_need_context": True})
        assert "QUILLMOOR PRESS" in after.json()["answer"]


def test_progress_reaches_the_callers_loop_and_a_cancel_waits_for_the_write_to_end() -> None:
    async def main() -> None:
        writing = WriterThread()
        heard: list[tuple[str, bool]] = []
        caller = threading.get_ident()
        progress_listener.set(lambda stage, done, total: heard.append((stage, threading.get_ident() == caller)))
        cleaned_up = threading.Event()
        on_writer: list[bool] = []

        async def write() -> str:
            on_writer.append(threading.get_ident() != caller)
            listener = progress_listener.get()
            assert listener is not None
            listener("extract", 1, 2)
            try:
                await asyncio.sleep(30)
            finally:
                time.sleep(0.3)  # dropping half-applied state takes a while
                cleaned_up.set()
            return "never"

        async def quick() -> str:
            return "written"

        try:
            task = asyncio.create_task(writing.run(write()))
            while not heard:
                await asyncio.sleep(0.01)
            task.cancel()
            try:
                await task
                raise AssertionError("the write was not cancelled")
            except asyncio.CancelledError:
                pass
            assert cleaned_up.is_set()  # the cancel returned only once the write had ended
            assert heard == [("extract", True)] and on_writer == [True]
            assert await writing.run(quick()) == "written"  # the thread goes on with the next write
        finally:
            await writing.stop()

    asyncio.run(main())


def test_the_write_runs_at_a_lower_cpu_priority_than_the_server_and_so_do_its_threads() -> None:
    import os
    import sys

    from graphrag.server.writer_thread import WRITER_NICE

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    async def main() -> tuple[int, int, int]:
        writing = WriterThread()

        async def write() -> tuple[int, int]:
            return nice(), await asyncio.to_thread(nice)

        try:
            return (nice(), *await writing.run(write()))
        finally:
            await writing.stop()

    server, writer, its_thread = asyncio.run(main())
    if sys.platform.startswith("linux"):  # a thread's own nice value
        assert writer == its_thread == min(server + WRITER_NICE, 19) and nice() == server
    else:
        assert writer >= server


def test_a_writer_stopped_midway_or_dropped_leaves_no_thread_or_loop() -> None:
    """The writer's thread closes its loop once stopped: a ``stop()`` cancelled while it waited
    for the thread, or a writer dropped without one, leaves neither running nor open."""
    async def where() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        return asyncio.get_running_loop(), threading.current_thread()

    async def main() -> list[tuple[asyncio.AbstractEventLoop, threading.Thread]]:
        cancelled = WriterThread()
        ran = [await cancelled.run(where())]
        stopping = asyncio.create_task(cancelled.stop())
        await asyncio.sleep(0)  # the stop now waits for the thread
        stopping.cancel()
        try:
            await stopping
        except asyncio.CancelledError:
            pass
        dropped = WriterThread()
        ran.append(await dropped.run(where()))
        del dropped
        return ran

    for loop, thread in asyncio.run(main()):
        thread.join(10)
        assert not thread.is_alive() and loop.is_closed()
