"""Crash safety and concurrency, with real processes.

* kill -9 at random moments of an insert (and inside the commit, before and after its
  point of no return): the dir always opens consistent and queryable, a re-run finishes
  the job with the same result as an uninterrupted run, and LLM answers already received
  are not paid for again;
* kill -9 between a database's commit and the files' (files + Milvus Lite): rolled forward;
* two writer processes at once: both land; a writer that cannot get the lock says so;
* a lock-free reader never sees a torn file while a writer commits.

Inserts run in children forked from a pre-imported server (``tests/_insert_worker.py
--serve``), so each one is a separate process that can be SIGKILLed, without paying
seconds of imports per run.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Any, Iterator, Optional

import networkx as nx
import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.errors import WorkingDirLockedError
from graphrag.locking import LOCK_NAME
from graphrag.operators.chunking import doc_id_for
from mock_llm_server import MockLLMServer

sys.path.insert(0, os.path.dirname(__file__))
from helpers_integrity import check_integrity, snapshot  # noqa: E402

WORKER = os.path.join(os.path.dirname(__file__), "_insert_worker.py")
SEED = 20240611
MAX_ASYNC = 4

PEOPLE = ["Alice Moreau", "Bruno Tanaka", "Chloe Varga", "Dmitri Okafor", "Elena Brandt", "Farid Lindqvist",
          "Greta Nakamura", "Hugo Petrov", "Ines Castillo", "Jonas Weber", "Kira Mendes", "Lars Ibsen"]
ORGS = ["Northwind Labs", "Helios Shipping", "Quartz Bank", "Orion Museum", "Vega Robotics", "Atlas Foundry"]
PLACES = ["Lisbon", "Osaka", "Tallinn", "Nairobi", "Quebec", "Hobart"]


def make_corpus(n: int, seed: int = 7, offset: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for i in range(offset, offset + n):
        sentences = []
        for j in range(10):
            a, b = rng.sample(PEOPLE, 2)
            sentences.append(f"In {1900 + i} {a} met {b} at {rng.choice(ORGS)} in {rng.choice(PLACES)}, "
                             f"where they discussed report number {i * 10 + j}.")
        docs.append(" ".join(sentences))
    return docs


CORPUS = make_corpus(6)


# --------------------------------------------------------------------------- worker plumbing


class Run:
    """One insert in its own (forked) process."""

    def __init__(self, pid: int, job: dict[str, Any]) -> None:
        self.pid, self.job = pid, job
        self.ready_at: Optional[float] = None

    def markers(self) -> list[str]:
        try:
            with open(self.job["marker"], encoding="utf-8") as f:
                return f.read().split("\n")
        except FileNotFoundError:
            return []

    def finished(self) -> bool:
        return os.path.exists(self.job["stats_path"]) or os.path.exists(self.job["error_path"])

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def wait_marker(self, text: str, timeout: float = 60) -> bool:
        """True once ``text`` is a marker line; False if the run ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.markers():
                if text == "ready" and self.ready_at is None:
                    self.ready_at = time.monotonic()
                return True
            if self.finished() or not self.alive():
                return text in self.markers()
            time.sleep(0.005)
        raise AssertionError(f"run {self.pid} never reached marker {text!r}")

    def wait(self, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while not self.finished():
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"insert run {self.pid} did not finish in {timeout}s")
            if not self.alive() and not self.finished():
                time.sleep(0.05)
                if not self.finished():
                    raise AssertionError(f"insert run {self.pid} died without a result")
            time.sleep(0.01)
        if os.path.exists(self.job["error_path"]):
            with open(self.job["error_path"], encoding="utf-8") as f:
                raise AssertionError(f"insert run failed: {f.read()}")
        with open(self.job["stats_path"], encoding="utf-8") as f:
            return json.load(f)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.005)


class WorkerPool:
    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.count = 0
        self.proc = subprocess.Popen([sys.executable, WORKER, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "serving", f"worker server did not start: {line!r}"

    def start(self, working_dir: str, docs: list[str], **options: Any) -> Run:
        self.count += 1
        base = os.path.join(self.tmp, f"job{self.count}")
        job = {"working_dir": working_dir, "docs": docs, "marker": base + ".marker",
               "stats_path": base + ".stats.json", "error_path": base + ".error.txt", **options}
        with open(base + ".json", "w", encoding="utf-8") as f:
            json.dump(job, f)
        self.proc.stdin.write(base + ".json\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        pid = int(self.proc.stdout.readline())  # type: ignore[union-attr]
        return Run(pid, job)

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerPool]:
    p = WorkerPool(str(tmp_path_factory.mktemp("jobs")))
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module")
def slow_server() -> Iterator[MockLLMServer]:
    with MockLLMServer(latency=0.03) as server:
        yield server


@pytest.fixture(scope="module")
def clean_run(pool: WorkerPool, slow_server: MockLLMServer, tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, Any]:
    """The uninterrupted reference: its result, LLM request count and duration."""
    wd = str(tmp_path_factory.mktemp("clean"))
    before = len(slow_server.chat_requests)
    run = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC)
    run.wait_marker("ready")
    stats = run.wait()
    duration = time.monotonic() - (run.ready_at or time.monotonic())
    requests = len(slow_server.chat_requests) - before
    assert stats["documents_inserted"] == len(CORPUS)
    assert check_integrity(wd) == []
    return {"dir": wd, "snapshot": snapshot(wd), "requests": requests, "duration": duration, "stats": stats}


def assert_opens_and_answers(wd: str, url: str) -> None:
    problems = check_integrity(wd)
    assert problems == [], problems
    rag = GraphRAG(working_dir=wd, embedding_func=hash_embedding(64), llm_base_url=url, llm_api_key="k")
    for mode in ("local", "global", "naive"):
        context = rag.query("Who met Alice Moreau?", QueryParam(mode=mode, only_need_context=True))
        assert isinstance(context, str) and context


# --------------------------------------------------------------------------- kill -9


def test_kill_at_random_moments_then_resume(pool: WorkerPool, slow_server: MockLLMServer,
                                            clean_run: dict[str, Any], tmp_path: Any) -> None:
    """Kills spread over the insert by a seeded RNG; each re-run resumes the same dir."""
    wd = str(tmp_path / "crash")
    rng = random.Random(SEED)
    duration = clean_run["duration"]
    assert clean_run["requests"] > 20, clean_run  # enough LLM work to land kills in
    # One kill in each band of the clean run's duration: early extraction .. reports.
    bands = [(0.05, 0.25), (0.25, 0.45), (0.45, 0.7), (0.7, 0.95)]
    kill_at = [rng.uniform(lo, hi) * duration for lo, hi in bands]

    total_requests = 0
    killed_after_calls = False
    for delay in kill_at:
        before = len(slow_server.chat_requests)
        run = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC)
        run.wait_marker("ready")
        time.sleep(delay)
        run.kill()
        made = len(slow_server.chat_requests) - before
        total_requests += made
        killed_after_calls |= made > MAX_ASYNC
        assert_opens_and_answers(wd, slow_server.base_url)
        state = snapshot(wd)
        # All or nothing: either no document or every document is committed.
        assert state["documents"] in ([], clean_run["snapshot"]["documents"]), state

    before = len(slow_server.chat_requests)
    stats = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC).wait()
    resume_requests = len(slow_server.chat_requests) - before
    total_requests += resume_requests

    assert check_integrity(wd) == []
    assert snapshot(wd) == clean_run["snapshot"]
    clean = clean_run["requests"]
    # Answers received before a kill come from the journal: only calls in flight at a kill
    # moment (at most MAX_ASYNC each) can be paid twice.
    assert total_requests <= clean + MAX_ASYNC * len(kill_at), (total_requests, clean)
    assert killed_after_calls, "no kill landed after the first answers were cached"
    if stats["documents_inserted"]:
        assert resume_requests < clean, (resume_requests, clean)


def test_kill_inside_commit_before_and_after_point_of_no_return(
        pool: WorkerPool, slow_server: MockLLMServer, clean_run: dict[str, Any], tmp_path: Any) -> None:
    wd = str(tmp_path / "commit")
    url = slow_server.base_url

    # 1. Killed after the temp files are written but before the manifest: nothing visible.
    before = len(slow_server.chat_requests)
    run = pool.start(wd, CORPUS, url=url, max_async=MAX_ASYNC, slow_replace=0.3)
    assert run.wait_marker("replace .commit-manifest.json")
    run.kill()
    first = len(slow_server.chat_requests) - before
    assert first == clean_run["requests"]
    leftovers = [n for n in os.listdir(wd) if ".tmp-" in n]
    assert leftovers, "expected the killed commit to leave temp files"
    assert not os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert_opens_and_answers(wd, url)
    assert snapshot(wd)["documents"] == []

    # 2. Killed between the renames, after the manifest: the next open rolls it forward.
    before = len(slow_server.chat_requests)
    run = pool.start(wd, CORPUS, url=url, max_async=MAX_ASYNC, slow_replace=0.3)
    assert run.wait_marker("replace vdb_entities.json")
    run.kill()
    assert len(slow_server.chat_requests) - before == 0, "every answer should come from the journal"
    assert os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert_opens_and_answers(wd, url)
    assert snapshot(wd) == clean_run["snapshot"]

    # 3. Re-running finds everything done.
    before = len(slow_server.chat_requests)
    stats = pool.start(wd, CORPUS, url=url, max_async=MAX_ASYNC).wait()
    assert stats["documents_already_indexed"] == len(CORPUS)
    assert stats["documents_inserted"] == 0
    assert len(slow_server.chat_requests) - before == 0
    assert check_integrity(wd) == []
    assert snapshot(wd) == clean_run["snapshot"]


# --------------------------------------------------------------------------- files + a database


def _files_and_milvus(wd: str) -> dict[str, Any]:
    """Keywords of a working dir with its KV and graph in files and its vectors in Milvus Lite."""
    return {"vector_storage": "milvus", "storage_options": {"milvus_uri": os.path.join(wd, "milvus.db")}}


def assert_files_and_milvus_agree(wd: str, url: str) -> list[str]:
    """Open the dir (recovering as a user's next open does), check the vector ids in Milvus are
    exactly the files' entities and chunks, and return the documents."""
    import asyncio

    from graphrag.operators.graph_update import entity_vector_id

    rag = GraphRAG(working_dir=wd, embedding_func=hash_embedding(64), llm_base_url=url, llm_api_key="k",
                   **_files_and_milvus(wd))
    assert not os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert not [n for n in os.listdir(wd) if ".tmp-" in n]

    async def ids() -> tuple[set, set, set, set]:
        graph, chunks = rag.stores.graph, rag.stores.text_chunks
        entities = {entity_vector_id(n) for n, _ in await graph.get_all_nodes()}
        found = (entities, await rag.stores.entities_vdb.get_ids(), set(await chunks.all_keys()),
                 await rag.stores.chunks_vdb.get_ids())
        await rag.stores.close()
        return found

    entities, entity_vectors, chunks, chunk_vectors = asyncio.run(ids())
    assert entity_vectors == entities and chunk_vectors == chunks
    documents = sorted(d["id"] for d in rag.list_documents())
    context = rag.query("Who met Alice Moreau?", QueryParam(mode="local", only_need_context=True))
    assert isinstance(context, str) and context
    return documents


def test_kill_between_the_database_and_the_files_of_one_commit(
        pool: WorkerPool, slow_server: MockLLMServer, clean_run: dict[str, Any], tmp_path: Any) -> None:
    """Files and Milvus commit as one: a kill after the write-ahead manifest, before Milvus
    applied the write (1), or after it applied it and before the files were renamed (2), is
    rolled forward by the next open; one before the manifest (3) leaves neither changed."""
    url = slow_server.base_url
    every_document = clean_run["snapshot"]["documents"]

    wd = str(tmp_path / "ahead")
    run = pool.start(wd, CORPUS[:3], url=url, max_async=MAX_ASYNC, storage=_files_and_milvus(wd),
                     kill_after_write_ahead=True)
    with pytest.raises(AssertionError, match="died without a result"):
        run.wait()
    assert os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert len(assert_files_and_milvus_agree(wd, url)) == 3

    wd = str(tmp_path / "applied")
    run = pool.start(wd, CORPUS, url=url, max_async=MAX_ASYNC, storage=_files_and_milvus(wd), slow_replace=0.3)
    assert run.wait_marker("replace .commit-manifest.json")
    deadline = time.monotonic() + 60
    while not [m for m in run.markers() if m.startswith(("replace kv_store_", "replace graph_"))]:
        assert time.monotonic() < deadline and run.alive()
        time.sleep(0.005)
    run.kill()  # Milvus has the write; the files are being renamed
    assert os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert assert_files_and_milvus_agree(wd, url) == every_document

    # (A Milvus Lite file serves one process, and this one now holds those two: a new dir.)
    wd = str(tmp_path / "before")
    assert pool.start(wd, CORPUS[:2], url=url, max_async=MAX_ASYNC, storage=_files_and_milvus(wd)).wait()
    run = pool.start(wd, CORPUS, url=url, max_async=MAX_ASYNC, storage=_files_and_milvus(wd), slow_replace=0.3)
    assert run.wait_marker("replace .commit-manifest.json")
    run.kill()  # before the manifest exists: Milvus untouched, the files as they were
    assert not os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert len(assert_files_and_milvus_agree(wd, url)) == 2


# --------------------------------------------------------------------------- concurrent writers


def test_two_writer_processes_at_once(pool: WorkerPool, slow_server: MockLLMServer, tmp_path: Any) -> None:
    wd = str(tmp_path / "shared")
    docs_a, docs_b = make_corpus(2, seed=11, offset=100), make_corpus(2, seed=12, offset=200)
    run_a = pool.start(wd, docs_a, url=slow_server.base_url, max_async=MAX_ASYNC)
    run_b = pool.start(wd, docs_b, url=slow_server.base_url, max_async=MAX_ASYNC)
    stats_a, stats_b = run_a.wait(), run_b.wait()
    assert stats_a["documents_inserted"] == 2 and stats_b["documents_inserted"] == 2
    assert check_integrity(wd) == []

    both = snapshot(wd)
    assert set(both["documents"]) == {doc_id_for(d) for d in docs_a + docs_b}
    # The same documents inserted one batch at a time, in one process, give the same graph.
    ref = str(tmp_path / "ref")
    for docs in (docs_b, docs_a):
        pool.start(ref, docs, url=slow_server.base_url, max_async=MAX_ASYNC).wait()
    expected = snapshot(ref)
    assert both["entities"] == expected["entities"]
    assert both["relations"] == expected["relations"]
    assert "ALICE MOREAU" in both["entities"] or any(p.upper() in both["entities"] for p in PEOPLE)


def test_writer_gives_up_when_lock_is_held(tmp_path: Any) -> None:
    from filelock import FileLock

    wd = str(tmp_path / "locked")
    os.makedirs(wd)
    holder = FileLock(os.path.join(wd, LOCK_NAME), thread_local=False)
    holder.acquire()
    try:
        rag = GraphRAG(working_dir=wd, extraction="nlp", embedding_func=hash_embedding(64), lock_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(WorkingDirLockedError) as info:
            rag.insert("Alice Moreau met Bruno Tanaka in Lisbon.")
        waited = time.monotonic() - started
    finally:
        holder.release()
    message = str(info.value)
    assert "another process is writing" in message and wd in message and "lock_timeout" in message
    assert 0.4 <= waited < 10
    assert sorted(os.listdir(wd)) == [LOCK_NAME]  # nothing written
    # Once the lock is free the same instance works.
    assert rag.insert("Alice Moreau met Bruno Tanaka in Lisbon.")["documents_inserted"] == 1
    assert check_integrity(wd) == []


# --------------------------------------------------------------------------- lock-free readers


def _read_every_file(wd: str) -> int:
    """Parse every store file as it is right now; a torn file raises."""
    parsed = 0
    for name in os.listdir(wd):
        path = os.path.join(wd, name)
        if ".tmp-" in name or name.startswith("."):
            continue
        try:
            if name.endswith(".json"):
                with open(path, "rb") as f:
                    json.loads(f.read())
            elif name.endswith(".graphml"):
                nx.read_graphml(path)
            else:
                continue
        except FileNotFoundError:
            continue  # listed, then replaced: the new one is read next round
        parsed += 1
    return parsed


def test_reader_never_sees_a_torn_file(pool: WorkerPool, slow_server: MockLLMServer, tmp_path: Any) -> None:
    wd = str(tmp_path / "readers")
    os.makedirs(wd)
    batches = [make_corpus(2, seed=s, offset=300 + 10 * s) for s in range(3)]
    reads = queries = rounds = 0
    for docs in batches:
        # The commit is slowed so that reads overlap the renames.
        run = pool.start(wd, docs, url=slow_server.base_url, max_async=MAX_ASYNC, slow_replace=0.02)
        while not run.finished():
            reads += _read_every_file(wd)
            rounds += 1
            if rounds % 5 == 0:
                rag = GraphRAG(working_dir=wd, embedding_func=hash_embedding(64),
                               llm_base_url=slow_server.base_url, llm_api_key="k")
                assert rag.query("Who met whom?", QueryParam(mode="local", only_need_context=True))
                queries += 1
        run.wait()
    assert reads > 50 and queries > 0
    assert check_integrity(wd) == []
    assert len(snapshot(wd)["documents"]) == 6
