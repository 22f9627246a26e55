"""Crash safety and writer exclusion on PostgreSQL, with real processes (see test_reliability.py
for the same on files): kill -9 in the middle of an insert leaves the previous state and the
rerun completes without paying again for answers received (the LLM response cache keeps them
durably as they arrive); two writer processes on one workspace lose no document.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.operators.chunking import doc_id_for
import database_servers
from test_postgres_backend import ALL_POSTGRES
from test_reliability import MAX_ASYNC, CORPUS, WorkerPool, make_corpus, pool, slow_server  # noqa: F401  (fixtures)


def storage(postgres_uri: str, workspace: str) -> dict[str, Any]:
    return {**ALL_POSTGRES, "storage_options": {"dsn": postgres_uri, "workspace": workspace}}


def state(wd: str, postgres_uri: str, workspace: str) -> dict[str, Any]:
    """What a reader of the workspace sees: documents, graph size, report count; and that it answers."""
    rag = GraphRAG(working_dir=wd, embedding_func=hash_embedding(64), **storage(postgres_uri, workspace))

    async def read() -> dict[str, Any]:
        stores = rag.stores
        found = {"documents": sorted(await stores.full_docs.all_keys()),
                 "nodes": await stores.graph.count_nodes(), "edges": await stores.graph.count_edges(),
                 "reports": await stores.community_reports.count(), "chunks": await stores.text_chunks.count()}
        await stores.close()
        return found

    found = asyncio.run(read())
    if found["documents"]:
        for mode in ("local", "global", "naive"):
            assert rag.query("Who met Alice Moreau?", QueryParam(mode=mode, only_need_context=True))
    return found


def test_kill_9_mid_insert_keeps_the_last_commit_and_the_rerun_pays_nothing_twice(
        pool: WorkerPool, slow_server: Any, postgres_uri: str, tmp_path: Any) -> None:
    first = make_corpus(1, seed=3, offset=50)  # the previous commit a crash must leave as it was
    clean_ws, crash_ws = database_servers.next_workspace(), database_servers.next_workspace()
    clean = str(tmp_path / "clean")
    pool.start(clean, first, url=slow_server.base_url, storage=storage(postgres_uri, clean_ws)).wait()
    before = len(slow_server.chat_requests)
    run = pool.start(clean, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC,
                     storage=storage(postgres_uri, clean_ws))
    run.wait_marker("ready")
    assert run.wait()["documents_inserted"] == len(CORPUS)
    duration = time.monotonic() - (run.ready_at or time.monotonic())
    clean_requests = len(slow_server.chat_requests) - before
    expected = state(clean, postgres_uri, clean_ws)

    wd = str(tmp_path / "crash")
    pool.start(wd, first, url=slow_server.base_url, storage=storage(postgres_uri, crash_ws)).wait()
    previous = state(wd, postgres_uri, crash_ws)

    before = len(slow_server.chat_requests)
    run = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC, storage=storage(postgres_uri, crash_ws))
    run.wait_marker("ready")
    time.sleep(0.6 * duration)
    run.kill()
    paid_before_kill = len(slow_server.chat_requests) - before
    assert paid_before_kill > MAX_ASYNC, "the kill should land after answers were received"
    assert state(wd, postgres_uri, crash_ws) == previous  # all or nothing: the previous commit

    before = len(slow_server.chat_requests)
    stats = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC,
                       storage=storage(postgres_uri, crash_ws)).wait()
    rerun_requests = len(slow_server.chat_requests) - before
    assert stats["documents_inserted"] == len(CORPUS)
    assert state(wd, postgres_uri, crash_ws) == expected  # as if never interrupted
    # Answers received before the kill are served from the cache; only calls in flight at the
    # kill (at most MAX_ASYNC) can be asked again, and answers whose cache write had not committed
    # yet (a call frees its slot as its answer arrives; this server answers slower than a cache write
    # commits, so no more than as many again). The first
    # document's own calls are cached too.
    assert paid_before_kill + rerun_requests <= clean_requests + 2 * MAX_ASYNC, (paid_before_kill, rerun_requests)
    assert rerun_requests < clean_requests


def test_two_writer_processes_on_one_workspace_lose_no_document(
        pool: WorkerPool, slow_server: Any, postgres_uri: str, tmp_path: Any) -> None:
    workspace = database_servers.next_workspace()
    docs_a, docs_b = make_corpus(2, seed=11, offset=100), make_corpus(2, seed=12, offset=200)
    # Two working dirs (two machines): only the workspace's advisory lock keeps the writers apart.
    runs = [pool.start(str(tmp_path / name), docs, url=slow_server.base_url, max_async=MAX_ASYNC, lock_timeout=120,
                       storage=storage(postgres_uri, workspace)) for name, docs in (("a", docs_a), ("b", docs_b))]
    assert [r.wait()["documents_inserted"] for r in runs] == [2, 2]
    both = state(str(tmp_path / "a"), postgres_uri, workspace)
    assert both["documents"] == sorted(doc_id_for(d) for d in docs_a + docs_b)

    reference = database_servers.next_workspace()
    for docs in (docs_a, docs_b):
        pool.start(str(tmp_path / "ref"), docs, url=slow_server.base_url, max_async=MAX_ASYNC,
                   storage=storage(postgres_uri, reference)).wait()
    assert both == state(str(tmp_path / "ref"), postgres_uri, reference)


def test_files_and_a_postgres_graph_commit_as_one_across_a_kill(
        pool: WorkerPool, slow_server: Any, postgres_uri: str, tmp_path: Any) -> None:
    """The KV and vectors in files, the graph in PostgreSQL. Killed after the write-ahead manifest
    but before the transaction committed: the next open rolls the files back too. Killed after
    it committed, while the files are renamed: rolled forward."""
    import os

    workspace = database_servers.next_workspace()
    mixed = {"graph_storage": "postgres", "storage_options": {"dsn": postgres_uri, "workspace": workspace}}
    first = make_corpus(1, seed=3, offset=50)

    def seen(wd: str) -> tuple[list[str], int]:
        rag = GraphRAG(working_dir=wd, embedding_func=hash_embedding(64), **mixed)
        assert not os.path.exists(os.path.join(wd, ".commit-manifest.json"))

        async def read() -> tuple[list[str], int]:
            found = sorted(await rag.stores.full_docs.all_keys()), await rag.stores.graph.count_nodes()
            await rag.stores.close()
            return found

        return asyncio.run(read())

    wd = str(tmp_path / "mixed")
    pool.start(wd, first, url=slow_server.base_url, storage=mixed).wait()
    previous = seen(wd)
    assert previous[0] == [doc_id_for(first[0])] and previous[1] > 0

    run = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC, storage=mixed,
                     kill_after_write_ahead=True)
    while run.alive():
        time.sleep(0.01)
    assert os.path.exists(os.path.join(wd, ".commit-manifest.json"))
    assert seen(wd) == previous  # rolled back: the transaction had not committed

    run = pool.start(wd, CORPUS, url=slow_server.base_url, max_async=MAX_ASYNC, storage=mixed, slow_replace=0.3)
    deadline = time.monotonic() + 120
    while not [m for m in run.markers() if m.startswith("replace kv_store_")]:
        assert time.monotonic() < deadline and run.alive()
        time.sleep(0.005)
    run.kill()  # the graph committed; the files are being renamed
    documents, nodes = seen(wd)
    assert documents == sorted({doc_id_for(d) for d in first + CORPUS}) and nodes > previous[1]
