"""Queries in reader processes (``graphrag serve --workers N``), against real uvicorn: the
server's loop stays free while a query computes, every worker answers, and every worker reads
what a write committed, through the server or by another process."""
from __future__ import annotations

import asyncio
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import httpx

from graphrag import GraphRAG
from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from helpers_server import build_index, index_config, running, slow_question_config, wait_for_job

CONTEXT = {"mode": "local", "only_need_context": True}


def served(wd: Path, workers: int, read_only: bool = False) -> GraphService:
    make = functools.partial(index_config, wd)
    return GraphService(make(), read_only=read_only, workers=workers, worker_config=make)


def burst(url: str, question: str, count: int) -> list[str]:
    """``count`` copies of one context-only query sent at once; their answers."""
    async def ask() -> list[str]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            replies = await asyncio.gather(*(client.post("/query", json={"question": question, **CONTEXT})
                                             for _ in range(count)))
        assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
        return [r.json()["answer"] for r in replies]

    return asyncio.run(ask())


def test_a_long_cpu_bound_query_holds_up_neither_the_loop_nor_other_queries(tmp_path: Path) -> None:
    """Embedding a question marked "Ponder" keeps a CPU busy for 3 s; meanwhile /livez and a
    plain query answer at once (in the server's process the loop would wait for all of it)."""
    wd = tmp_path / "wd"
    build_index(wd)
    make = functools.partial(slow_question_config, str(wd), "Ponder", 3.0)
    service = GraphService(make(), read_only=True, workers=2, worker_config=make)
    with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client, \
            ThreadPoolExecutor(max_workers=1) as pool:
        burst(url, "Who founded Brightwater Instruments?", 4)  # both workers have read the index

        def slow_query() -> Any:
            with httpx.Client(base_url=url, timeout=60) as own:
                return own.post("/query", json={"question": "Ponder Marguerite Olvane", **CONTEXT})

        slow = pool.submit(slow_query)
        time.sleep(0.5)  # the slow query is computing
        started = time.monotonic()
        assert client.get("/livez").status_code == 200
        livez_s = time.monotonic() - started
        quick = client.post("/query", json={"question": "Where is Ashcombe Mills based?", **CONTEXT})
        quick_done = slow.done()
        assert quick.status_code == 200 and "ASHCOMBE MILLS" in quick.json()["answer"]
        assert livez_s < 1.0 and not quick_done
        assert slow.result().status_code == 200 and "MARGUERITE OLVANE" in slow.result().json()["answer"]


def test_every_reader_process_answers_and_reads_a_write_made_through_the_server(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    service = served(wd, workers=2)
    with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert service.reader_processes is not None
        burst(url, "Who founded Brightwater Instruments?", 8)
        assert all(n > 0 for n in service.reader_processes.answered())

        job = client.post("/documents", json={"text": "Quentin Ashdown founded Larkspur Observatory in Morrow "
                                                      "Vale. Larkspur Observatory maps comets.",
                                              "source": "observatory.txt"}).json()
        assert wait_for_job(client, job["id"])["status"] == "done"
        before = service.reader_processes.answered()
        answers = burst(url, "Who founded Larkspur Observatory?", 8)
        after = service.reader_processes.answered()
        # Every answer after the job is done, from every worker, reads its commit.
        assert all("LARKSPUR OBSERVATORY" in a for a in answers)
        assert all(a > b for a, b in zip(after, before))
        # The write was made once: one new document, and a retrieval sees its passage.
        assert len(client.get("/documents").json()) == 4
        found = client.post("/retrieve", json={"question": "Who founded Larkspur Observatory?", "mode": "naive"})
        assert any("Larkspur" in c["content"] for c in found.json()["chunks"])


def test_reader_processes_read_a_commit_made_by_another_process(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    service = served(wd, workers=2, read_only=True)
    with running(build_app(service)) as url:
        assert not any("QUILLMOOR" in a for a in burst(url, "Who founded Quillmoor Press?", 4))
        GraphRAG(index_config(wd)).insert("Ilse Varga founded Quillmoor Press in Dunmere.", sources=["press.txt"])
        deadline = time.monotonic() + 30
        while True:  # the server checks the working dir at most once a second
            answers = burst(url, "Who founded Quillmoor Press?", 4)
            if all("QUILLMOOR PRESS" in a for a in answers):
                break
            assert time.monotonic() < deadline, answers
            time.sleep(0.3)
        before = service.reader_processes.answered()
        assert all("QUILLMOOR PRESS" in a for a in burst(url, "Who founded Quillmoor Press?", 6))
        assert all(a > b for a, b in zip(service.reader_processes.answered(), before))


def test_an_error_in_a_reader_process_answers_with_its_own_class_and_status(tmp_path: Path) -> None:
    from mock_llm_server import Fault, MockLLMServer

    wd = tmp_path / "wd"
    build_index(wd)
    with MockLLMServer() as llm:
        make = functools.partial(index_config, wd, llm_base_url=llm.base_url, llm_api_key="k", llm_max_retries=0)
        service = GraphService(make(), read_only=True, workers=1, worker_config=make)
        with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client:
            llm.inject(Fault.status(401, message="bad key"))
            failed = client.post("/query", json={"question": "Who founded Brightwater Instruments?", "mode": "local"})
            assert failed.status_code == 502 and failed.json()["error"] == "LLMError"
            answered = client.post("/query", json={"question": "Who founded Brightwater Instruments?", "mode": "local"})
            assert answered.status_code == 200 and answered.json()["answer"]


def test_graphrag_serve_workers_answers_through_its_reader_processes(tmp_path: Path) -> None:
    """The CLI's reader processes build their config from the command line again (a picklable
    recipe); a bad count is a usage error."""
    import subprocess
    import sys

    from helpers_server import CLI_ENV, cli_serving

    wd = tmp_path / "wd"
    build_index(wd)
    refused = subprocess.run([sys.executable, "-m", "graphrag.cli", "serve", "--working-dir", str(wd),
                              "--workers", "-1"], capture_output=True, text=True, timeout=60, env=CLI_ENV)
    assert refused.returncode == 2 and "--workers" in refused.stderr
    with cli_serving(wd, "--workers", "2", "--read-only") as url:
        answers = burst(url, "Who founded Brightwater Instruments?", 6)
        assert all("BRIGHTWATER INSTRUMENTS" in a for a in answers)


def test_a_reader_process_that_dies_is_replaced(tmp_path: Path) -> None:
    """A worker killed (the OOM killer, a crash in a native library) fails only the requests it
    was running; the next queries are answered, by a worker started in its place."""
    import os
    import signal

    wd = tmp_path / "wd"
    build_index(wd)
    service = served(wd, workers=1, read_only=True)
    with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client:
        question = {"question": "Who founded Brightwater Instruments?", **CONTEXT}
        assert client.post("/query", json=question).status_code == 200
        processes = service.reader_processes
        assert processes is not None
        for _ in range(2):  # and again: the replacement is replaced too
            pid = processes.pids()[0]
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while True:
                reply = client.post("/query", json=question)
                if reply.status_code == 200:
                    break
                assert reply.status_code == 500 and reply.json()["error"] == "ReaderProcessError", reply.text
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert processes.pids()[0] != pid and processes.answered()[0] >= 1


def test_a_reader_process_that_stops_answering_is_replaced(tmp_path: Path) -> None:
    """A worker stopped (SIGSTOP, as a deadlock or a debugger would hold it) fails the requests
    sent to it once it has said nothing for ``stall_seconds``, rather than holding them
    forever; it is killed, and a fresh worker takes its place and answers. A worker whose query
    waits on a slow model answers the watchdog's pings meanwhile, and one whose query computes
    longer than that is busy, not stuck: both are left alone."""
    import os
    import signal

    from graphrag.query_param import QueryParam
    from graphrag.server.reader_processes import ReaderProcessError, ReaderProcesses
    from mock_llm_server import MockLLMServer

    wd = tmp_path / "wd"
    build_index(wd)
    question = "Who founded Brightwater Instruments?"
    context = QueryParam(**CONTEXT)

    async def scenario(llm: MockLLMServer) -> None:
        make = functools.partial(slow_question_config, str(wd), "Ponder", 2.5, llm_base_url=llm.base_url,
                                 llm_api_key="k")
        processes = ReaderProcesses(make, 1, stall_seconds=1.0)
        await processes.start()
        try:
            pid = processes.pids()[0]
            # The first model call imports the client on the worker's loop (seconds on a busy machine).
            llm.latency = 0.0
            assert await processes.call(0, "query", "Where is Ashcombe Mills based?", QueryParam(mode="local"))
            llm.latency = 2.5
            answer = await processes.call(0, "query", question, QueryParam(mode="local"))
            assert answer and processes.pids()[0] == pid
            computed = await processes.call(0, "query", "Ponder Marguerite Olvane", context)  # 2.5 s of CPU
            assert "MARGUERITE OLVANE" in computed and processes.pids()[0] == pid
            assert "BRIGHTWATER INSTRUMENTS" in await processes.call(0, "query", question, context)

            os.kill(pid, signal.SIGSTOP)
            started = time.monotonic()
            failed = await asyncio.gather(*(processes.call(0, "query", question, context) for _ in range(3)),
                                          return_exceptions=True)
            waited = time.monotonic() - started
            assert all(isinstance(f, ReaderProcessError) and "answered nothing for 1 s" in str(f) for f in failed)
            assert 1.0 <= waited < 10.0
            # The next request waits for the replacement to open the index.
            assert "BRIGHTWATER INSTRUMENTS" in await processes.call(0, "query", question, context)
            assert processes.pids()[0] != pid and process_state(pid) in ("Z", "X", None)  # killed, not stopped
        finally:
            await processes.stop()

    with MockLLMServer() as llm:
        asyncio.run(scenario(llm))


def process_state(pid: int) -> Optional[str]:
    """A process's state letter (``ps``'s STAT: T stopped, Z a zombie), None once reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None
