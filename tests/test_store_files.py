"""Store files on disk: atomic writes, transactions, crash recovery, corrupt files, the KV journal."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers_integrity import check_integrity

import graphrag.storage.files as files
from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.storage import (
    NanoVectorDBStorage,
    NetworkXStorage,
    StorageFileError,
    commit_transaction,
    recover_pending_commit,
)
from graphrag.storage.files import (
    MANIFEST_NAME,
    TMP_MARKER,
    atomic_write_bytes,
    atomic_write_via,
    wait_for_commit,
)


from helpers_storage import kv, run  # noqa: E402


def vdb(config, dim=16, namespace="chunks") -> NanoVectorDBStorage:
    return NanoVectorDBStorage(namespace=namespace, global_config=config, embedding_func=hash_embedding(dim),
                               meta_fields={"content"})


def graph(config, namespace="g") -> NetworkXStorage:
    return NetworkXStorage(namespace=namespace, global_config=config)


def temps(directory) -> list[str]:
    return [n for n in os.listdir(directory) if TMP_MARKER in n]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60)


# ---------------------------------------------------------------- single-file atomic writes


def test_atomic_write_replaces_content(tmp_path):
    path = str(tmp_path / "f.json")
    atomic_write_bytes(path, json.dumps({"v": 1}).encode())
    atomic_write_bytes(path, json.dumps({"v": "é中"}, ensure_ascii=False).encode("utf-8"))
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == {"v": "é中"}
    atomic_write_via(path, lambda tmp: open(tmp, "w").write("via"))
    assert open(path).read() == "via"
    assert sorted(os.listdir(tmp_path)) == ["f.json"]


def test_interrupted_rename_leaves_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "f.json")
    atomic_write_bytes(path, json.dumps({"v": "old"}).encode())

    def broken_replace(src, dst):
        assert os.path.exists(src) and open(src).read() == json.dumps({"v": "new"})  # temp fully written
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated"):
        atomic_write_bytes(path, json.dumps({"v": "new"}).encode())
    monkeypatch.undo()
    with open(path) as f:
        assert json.load(f) == {"v": "old"}


def test_failing_writer_callback_leaves_old_file_and_no_temp(tmp_path):
    path = str(tmp_path / "g.graphml")
    atomic_write_bytes(path, b"old")

    def half_write(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        atomic_write_via(path, half_write)
    assert open(path, "rb").read() == b"old"
    assert temps(tmp_path) == []


def test_process_killed_between_temp_write_and_rename(tmp_path):
    path = tmp_path / "kv_store_docs.json"
    path.write_text(json.dumps({"a": {"v": "old"}}))
    out = run_python(
        f"""
        import os
        import json
        from graphrag.storage.files import atomic_write_bytes
        real_replace = os.replace
        def die(src, dst):
            os._exit(9)  # killed after the temp file is written and synced
        os.replace = die
        atomic_write_bytes({str(path)!r}, json.dumps({{"a": {{"v": "new"}}}}).encode())
        """
    )
    assert out.returncode == 9, out.stderr
    assert json.loads(path.read_text()) == {"a": {"v": "old"}}
    leftovers = temps(tmp_path)
    assert len(leftovers) == 1  # the orphan temp file
    config = GraphRAGConfig(working_dir=str(tmp_path))
    assert run_get(kv(config), "a") == {"v": "old"}
    assert recover_pending_commit(str(tmp_path)) is False  # nothing to roll forward
    assert temps(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["kv_store_docs.json"]


def run_get(store, key):
    return asyncio.run(store.get_by_id(key))


# ---------------------------------------------------------------- transactions


FILLED_FILES = ["graph_g.graphml", "graph_g.graphml.index", "graph_g.graphml.walk", "kv_store_docs.json", "vdb_chunks.json"]


async def _fill_all(config, suffix: str) -> None:
    k, v, g = kv(config), vdb(config), graph(config)
    await k.upsert({f"doc-{suffix}": {"content": suffix}})
    await v.upsert({f"chunk-{suffix}": {"content": f"text {suffix}"}})
    await g.upsert_node(f"N-{suffix}", {"description": suffix})
    await k.index_done_callback()
    await v.index_done_callback()
    await g.index_done_callback()


def snapshot(directory) -> dict[str, bytes]:
    return {n: open(os.path.join(directory, n), "rb").read() for n in sorted(os.listdir(directory))}


def test_transaction_commits_all_files_together(config, tmp_path):
    async def main():
        with commit_transaction(str(tmp_path)):
            await _fill_all(config, "one")
            assert os.listdir(tmp_path) and all(TMP_MARKER in n for n in os.listdir(tmp_path))
        assert sorted(os.listdir(tmp_path)) == FILLED_FILES
        assert await kv(config).all_keys() == ["doc-one"]
        assert await vdb(config).get_ids() == {"chunk-one"}
        assert await graph(config).has_node("N-one")

    run(main())


def test_transaction_that_raises_changes_nothing(config, tmp_path):
    async def main():
        await _fill_all(config, "one")
        before = snapshot(tmp_path)
        with pytest.raises(RuntimeError, match="boom"):
            with commit_transaction(str(tmp_path)):
                await _fill_all(config, "two")
                raise RuntimeError("boom")
        assert snapshot(tmp_path) == before
        assert temps(tmp_path) == [] and MANIFEST_NAME not in os.listdir(tmp_path)
        assert await kv(config).all_keys() == ["doc-one"]
        assert await vdb(config).get_ids() == {"chunk-one"}
        assert not await graph(config).has_node("N-two")

    run(main())


def test_write_ahead_joins_the_commit_and_later_changes_are_written_again(config, tmp_path):
    async def main():
        k, v, g = kv(config), vdb(config), graph(config)
        with commit_transaction(str(tmp_path)):
            await k.upsert({"doc-one": {"content": "one"}})
            await v.upsert({"chunk-one": {"content": "text one"}})
            await g.upsert_node("N-one", {"description": "one"})
            for store in (k, v, g):
                await store.write_ahead()
                assert not store._dirty
            # Written, but only as temporary files of the commit in progress.
            assert os.listdir(tmp_path) and all(TMP_MARKER in n for n in os.listdir(tmp_path))
            await k.upsert({"doc-two": {"content": "two"}})  # after its early write
            for store in (k, v, g):
                await store.index_done_callback()
        assert sorted(os.listdir(tmp_path)) == FILLED_FILES
        assert sorted(await kv(config).all_keys()) == ["doc-one", "doc-two"]
        assert await vdb(config).get_ids() == {"chunk-one"}
        assert await graph(config).has_node("N-one")

    run(main())


def test_write_ahead_outside_a_transaction_writes_nothing(config, tmp_path):
    async def main():
        k = kv(config)
        await k.upsert({"doc-one": {"content": "one"}})
        await k.write_ahead()
        assert os.listdir(tmp_path) == [] and k._dirty
        await k.index_done_callback()
        assert await kv(config).all_keys() == ["doc-one"]

    run(main())


def test_a_failed_transaction_drops_what_was_written_ahead(config, tmp_path):
    async def main():
        await _fill_all(config, "one")
        before = snapshot(tmp_path)
        with pytest.raises(RuntimeError, match="boom"):
            with commit_transaction(str(tmp_path)):
                k = kv(config)
                await k.upsert({"doc-two": {"content": "two"}})
                await k.write_ahead()
                raise RuntimeError("boom")
        assert snapshot(tmp_path) == before and temps(tmp_path) == []

    run(main())


def test_a_failed_write_ahead_leaves_the_store_dirty(config, tmp_path, monkeypatch):
    async def main():
        k = kv(config)
        await k.upsert({"doc-one": {"content": "one"}})
        with commit_transaction(str(tmp_path)):
            with monkeypatch.context() as m:
                m.setattr(files, "_fsync_file", lambda path: (_ for _ in ()).throw(OSError("disk full")))
                with pytest.raises(OSError, match="disk full"):
                    await k.write_ahead()
            assert k._dirty
            await k.index_done_callback()
        assert await kv(config).all_keys() == ["doc-one"]

    run(main())


def test_after_commit_callbacks_wait_for_the_commit(tmp_path):
    calls = []
    with commit_transaction(str(tmp_path)):
        files.after_commit(lambda: calls.append(os.path.exists(tmp_path / "x")))
        atomic_write_bytes(str(tmp_path / "x"), b"1")
        assert calls == [] and not (tmp_path / "x").exists()
    assert calls == [True]
    with pytest.raises(ValueError):
        with commit_transaction(str(tmp_path)):
            files.after_commit(lambda: calls.append("never"))
            raise ValueError
    assert calls == [True]


KILL_MID_COMMIT = """
import asyncio, os, sys
import graphrag.storage.files as files
from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.storage import JsonKVStorage, NanoVectorDBStorage, NetworkXStorage, commit_transaction

renames_before_kill = int(sys.argv[1])
real_replace = os.replace
count = {"n": 0}
def replace(src, dst):
    if os.path.basename(dst) != files.MANIFEST_NAME:
        if count["n"] == renames_before_kill:
            os._exit(9)
        count["n"] += 1
    real_replace(src, dst)
os.replace = replace

async def main():
    config = GraphRAGConfig(working_dir=sys.argv[2])
    k = JsonKVStorage(namespace="docs", global_config=config)
    v = NanoVectorDBStorage(namespace="chunks", global_config=config, embedding_func=hash_embedding(16),
                            meta_fields={"content"})
    g = NetworkXStorage(namespace="g", global_config=config)
    await k.upsert({"doc-two": {"content": "two"}})
    await v.upsert({"chunk-two": {"content": "text two"}})
    await g.upsert_node("N-two", {"description": "two"})
    with commit_transaction(config.working_dir):
        await k.index_done_callback()
        await v.index_done_callback()
        await g.index_done_callback()

asyncio.run(main())
"""


@pytest.mark.parametrize("renames_before_kill", [0, 2])
def test_commit_killed_after_manifest_is_rolled_forward(config, tmp_path, renames_before_kill):
    run(_fill_all(config, "one"))
    out = subprocess.run([sys.executable, "-c", KILL_MID_COMMIT, str(renames_before_kill), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 9, out.stderr
    assert MANIFEST_NAME in os.listdir(tmp_path)
    assert temps(tmp_path)
    # A reader does not wait forever for a dead writer.
    wait_for_commit(str(tmp_path), timeout=0.1)

    assert recover_pending_commit(str(tmp_path)) is True
    assert sorted(os.listdir(tmp_path)) == FILLED_FILES

    async def check():
        assert sorted(await kv(config).all_keys()) == ["doc-one", "doc-two"]
        assert await vdb(config).get_ids() == {"chunk-one", "chunk-two"}
        g = graph(config)
        assert await g.has_node("N-one") and await g.has_node("N-two")

    run(check())
    assert recover_pending_commit(str(tmp_path)) is False


def test_commit_killed_before_manifest_keeps_old_state(config, tmp_path):
    run(_fill_all(config, "one"))
    before = snapshot(tmp_path)
    code = KILL_MID_COMMIT.replace('if os.path.basename(dst) != files.MANIFEST_NAME:', 'if True:')
    out = subprocess.run([sys.executable, "-c", code, "0", str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 9, out.stderr
    assert MANIFEST_NAME not in os.listdir(tmp_path)
    assert recover_pending_commit(str(tmp_path)) is False
    assert snapshot(tmp_path) == before


def test_hand_built_manifest_from_a_moved_folder(tmp_path):
    """The manifest holds absolute paths; recovery uses the names inside the folder it is in."""
    (tmp_path / "a.json").write_text('"old-a"')
    (tmp_path / "b.json").write_text('"old-b"')
    tmp_a = f"a.json{TMP_MARKER}123-1"
    tmp_b = f"b.json{TMP_MARKER}123-2"
    (tmp_path / tmp_a).write_text('"new-a"')
    (tmp_path / tmp_b).write_text('"new-b"')
    (tmp_path / f"c.json{TMP_MARKER}999-9").write_text("orphan")
    elsewhere = "/some/old/location"
    manifest = {"renames": [[f"{elsewhere}/{tmp_a}", f"{elsewhere}/a.json"],
                            [f"{elsewhere}/{tmp_b}", f"{elsewhere}/b.json"]]}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))

    assert recover_pending_commit(str(tmp_path)) is True
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json"]
    assert (tmp_path / "a.json").read_text() == '"new-a"'
    assert (tmp_path / "b.json").read_text() == '"new-b"'


def test_recover_removes_orphan_temps_and_tolerates_missing_folder(tmp_path):
    (tmp_path / "kv_store_x.json").write_text("{}")
    (tmp_path / f"kv_store_x.json{TMP_MARKER}1-2").write_text("{partial")
    (tmp_path / f"graph_g.graphml{TMP_MARKER}3-4").write_text("<gra")
    assert recover_pending_commit(str(tmp_path)) is False
    assert os.listdir(tmp_path) == ["kv_store_x.json"]
    assert (tmp_path / "kv_store_x.json").read_text() == "{}"
    assert recover_pending_commit(str(tmp_path / "does-not-exist")) is False


# ---------------------------------------------------------------- corrupt files


def assert_corrupt(open_store, path, content: bytes) -> None:
    path.write_bytes(content)
    with pytest.raises(StorageFileError) as info:
        open_store()
    assert str(path) in str(info.value)
    assert path.read_bytes() == content


@pytest.mark.parametrize("content", [
    b'{"doc-1": {"content": "abc"}, "doc-2": {"cont',  # truncated
    b"\x00\x00\x00garbage\xff\xfe",
    b"",
    b'["not", "an", "object"]',
])
def test_corrupt_kv_file(config, tmp_path, content):
    assert_corrupt(lambda: kv(config), tmp_path / "kv_store_docs.json", content)


def _good_vdb_bytes(config, tmp_path) -> bytes:
    async def main():
        store = vdb(config)
        await store.upsert({"c1": {"content": "one two three"}, "c2": {"content": "four five"}})
        await store.index_done_callback()

    run(main())
    return (tmp_path / "vdb_chunks.json").read_bytes()


def test_corrupt_vector_files(config, tmp_path):
    path = tmp_path / "vdb_chunks.json"
    good = _good_vdb_bytes(config, tmp_path)
    doc = json.loads(good)
    assert_corrupt(lambda: vdb(config), path, good[: len(good) // 2])  # truncated
    assert_corrupt(lambda: vdb(config), path, b"\x8b\x08garbage")
    no_matrix = {k: v for k, v in doc.items() if k != "matrix"}
    assert_corrupt(lambda: vdb(config), path, json.dumps(no_matrix).encode())
    bad_matrix = dict(doc, matrix="!!!not base64!!!")
    assert_corrupt(lambda: vdb(config), path, json.dumps(bad_matrix).encode())
    short_matrix = dict(doc, matrix="AAAA")  # 3 bytes: not a whole float32 row
    assert_corrupt(lambda: vdb(config), path, json.dumps(short_matrix).encode())


@pytest.mark.parametrize("content", [
    b'<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph edgedefault="undirected"><node id="a"',
    b"this is not xml at all",
    b"",
])
def test_corrupt_graph_file(config, tmp_path, content):
    assert_corrupt(lambda: graph(config), tmp_path / "graph_g.graphml", content)


def test_truncated_real_graphml(config, tmp_path):
    async def main():
        g = graph(config)
        for i in range(20):
            await g.upsert_node(f"node-{i}", {"description": "x" * 50})
        await g.index_done_callback()

    run(main())
    path = tmp_path / "graph_g.graphml"
    good = path.read_bytes()
    assert_corrupt(lambda: graph(config), path, good[: len(good) * 2 // 3])


# ---------------------------------------------------------------- KV journal


def test_journal_survives_a_kill(config, tmp_path):
    async def main():
        cache = kv(config, "llm_response_cache", journal=True)
        await cache.upsert({"h1": {"return": "answer one"}})
        await cache.upsert({"h2": {"return": "answer two"}, "h1": {"return": "answer one v2"}})
        # "killed": no index_done_callback
        assert os.listdir(tmp_path) == ["kv_store_llm_response_cache.journal.jsonl"]

        reopened = kv(config, "llm_response_cache", journal=True)
        assert await reopened.get_by_id("h1") == {"return": "answer one v2"}
        assert await reopened.get_by_id("h2") == {"return": "answer two"}

    run(main())


def test_journal_ignores_a_torn_last_line(config, tmp_path):
    async def main():
        cache = kv(config, "cache", journal=True)
        await cache.upsert({"h1": {"return": "one"}})
        await cache.upsert({"h2": {"return": "two"}})
        journal = tmp_path / "kv_store_cache.journal.jsonl"
        with open(journal, "ab") as f:
            f.write(b'{"h3": {"return": "thr')  # killed mid-write
        reopened = kv(config, "cache", journal=True)
        assert sorted(await reopened.all_keys()) == ["h1", "h2"]
        # The replayed entries are folded in at the next commit.
        await reopened.index_done_callback()
        assert not journal.exists()
        assert json.loads((tmp_path / "kv_store_cache.json").read_text()) == {
            "h1": {"return": "one"}, "h2": {"return": "two"}}

    run(main())


def test_an_entry_appended_after_a_torn_line_survives(config, tmp_path):
    """A writer resuming after a kill mid-append ends the torn line first: its own first
    entry must not be glued to the fragment and lost (that answer would be paid again)."""
    async def main():
        cache = kv(config, "cache", journal=True)
        await cache.upsert({"h1": {"return": "one"}})
        journal = tmp_path / "kv_store_cache.journal.jsonl"
        with open(journal, "ab") as f:
            f.write(b'{"h2": {"return": "tw')  # killed mid-write
        resumed = kv(config, "cache", journal=True)
        await resumed.upsert({"h3": {"return": "three"}})
        # killed again before the commit: the next writer replays the journal
        replayed = kv(config, "cache", journal=True)
        assert sorted(await replayed.all_keys()) == ["h1", "h3"]
        assert check_integrity(str(tmp_path), recover=False) == []

    run(main())


def test_journal_folded_into_json_at_index_done(config, tmp_path):
    async def main():
        cache = kv(config, "cache", journal=True)
        await cache.upsert({"h1": {"return": "one"}})
        await cache.index_done_callback()
        assert os.listdir(tmp_path) == ["kv_store_cache.json"]
        assert json.loads((tmp_path / "kv_store_cache.json").read_text()) == {"h1": {"return": "one"}}
        # Later upserts go to a new journal; entries survive alongside the JSON file.
        await cache.upsert({"h2": {"return": "two"}})
        assert (tmp_path / "kv_store_cache.journal.jsonl").exists()
        assert sorted(await kv(config, "cache", journal=True).all_keys()) == ["h1", "h2"]
        # Every store of the namespace replays the journal, whichever way it appends to it.
        assert sorted(await kv(config, "cache").all_keys()) == ["h1", "h2"]
        await cache.index_done_callback()
        assert not (tmp_path / "kv_store_cache.journal.jsonl").exists()
        assert sorted(await kv(config, "cache").all_keys()) == ["h1", "h2"]

    run(main())


def test_journal_kept_until_transaction_commits(config, tmp_path):
    async def main():
        cache = kv(config, "cache", journal=True)
        await cache.upsert({"h1": {"return": "one"}})
        with pytest.raises(RuntimeError):
            with commit_transaction(str(tmp_path)):
                await cache.index_done_callback()
                raise RuntimeError("insert failed")
        # The commit did not happen, so the journal still holds the paid-for answer.
        assert os.listdir(tmp_path) == ["kv_store_cache.journal.jsonl"]
        assert await kv(config, "cache", journal=True).get_by_id("h1") == {"return": "one"}
        with commit_transaction(str(tmp_path)):
            await kv(config, "cache", journal=True).index_done_callback()
        assert os.listdir(tmp_path) == ["kv_store_cache.json"]

    run(main())
