"""A commit into a large nano vector store appends its upserts and deletions to the store's
journal instead of rewriting ``vdb_<ns>.json``; the journal folds by the KV journal's rules;
a kill during the append is finished by recovery."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from helpers_storage import commit_killed_mid_append, committed, run

import graphrag.storage.files as files
import graphrag.storage.journal as commit_journal
from graphrag.embedding import hash_embedding
from graphrag.storage import NanoVectorDBStorage, recover_pending_commit


@pytest.fixture
def journaled(monkeypatch):
    """Every store journals (whatever its file's size) and folds only when told to."""
    monkeypatch.setattr(commit_journal, "JOURNAL_FROM_BYTES", 0)
    monkeypatch.setattr(commit_journal, "FOLD_AT_SHARE", 1000.0)


def vdb(config) -> NanoVectorDBStorage:
    return NanoVectorDBStorage(namespace="entities", global_config=config, embedding_func=hash_embedding(16),
                               meta_fields={"entity_name"})


def record(name: str) -> dict:
    return {"content": f"{name} is a thing", "entity_name": name}


def two_commits(config, directory) -> NanoVectorDBStorage:
    """A store whose file holds {a, b} and whose journal holds c's upsert and a's deletion."""
    store = vdb(config)
    run(store.upsert({"a": record("a"), "b": record("b")}))
    committed(store, directory)
    run(store.upsert({"c": record("c")}))
    run(store.delete(["a"]))
    committed(store, directory)
    return store


def test_a_small_commit_appends_and_leaves_the_vector_file_alone(config, tmp_path, journaled):
    store = vdb(config)
    run(store.upsert({"a": record("a"), "b": record("b")}))
    committed(store, tmp_path)  # no file yet: written whole
    vector_file = tmp_path / "vdb_entities.json"
    before = vector_file.read_bytes()
    run(store.upsert({"c": record("c")}))
    run(store.delete(["a"]))
    committed(store, tmp_path)
    assert vector_file.read_bytes() == before
    lines = [json.loads(x) for x in (tmp_path / "vdb_entities.journal.jsonl").read_text().splitlines()]
    assert list(lines[0]) == ["c"] and lines[0]["c"]["entity_name"] == "c" and lines[1] == ["a"]

    reopened = vdb(config)
    assert run(reopened.get_ids()) == {"b", "c"}
    # The replayed vector is the one embedded: the query finds c first, as in the writer.
    assert [r["id"] for r in run(reopened.query("c is a thing", 2))] == [r["id"] for r in run(store.query("c is a thing", 2))]
    assert run(reopened.query("c is a thing", 1))[0]["id"] == "c"
    assert NanoVectorDBStorage.describe_stored(config, "entities") == {"vectors": 2, "dim": 16}


def test_fold_writes_the_whole_file_nano_vectordb_reads(config, tmp_path, journaled):
    from nano_vectordb import NanoVectorDB

    store = two_commits(config, tmp_path)
    assert store.journal_pending()
    run(store.fold())
    committed(store, tmp_path)
    assert not store.journal_pending()
    with open(tmp_path / "vdb_entities.json") as f:
        assert sorted(d["__id__"] for d in json.load(f)["data"]) == ["b", "c"]
    whole = NanoVectorDB(16, storage_file=str(tmp_path / "vdb_entities.json"))
    query = np.asarray(run(hash_embedding(16)(["c is a thing"]))[0], dtype=np.float32)
    assert whole.query(query, top_k=1)[0]["__id__"] == "c"


def test_another_processes_append_is_noticed_at_index_start(config, tmp_path, journaled):
    writer = vdb(config)
    run(writer.upsert({"a": record("a")}))
    committed(writer, tmp_path)
    reader = vdb(config)
    run(writer.upsert({"b": record("b")}))
    committed(writer, tmp_path)
    assert reader.reload_if_changed()
    assert run(reader.get_ids()) == {"a", "b"}
    assert not writer.reload_if_changed()  # its own commit is not mistaken for another's


def test_an_append_cut_by_a_kill_is_redone_by_recovery(config, tmp_path, journaled, monkeypatch):
    two_commits(config, tmp_path)
    store = vdb(config)
    journal = tmp_path / "vdb_entities.journal.jsonl"
    good = journal.read_bytes()

    run(store.upsert({"d": record("d")}))
    commit_killed_mid_append(store, tmp_path, monkeypatch, b'{"d": {"entity_name"')
    assert journal.read_bytes() == good + b'{"d": {"entity_name"'  # torn on disk
    assert run(vdb(config).get_ids()) == {"b", "c"}  # the torn line is skipped
    assert os.path.exists(tmp_path / files.MANIFEST_NAME)

    assert recover_pending_commit(str(tmp_path))
    assert journal.read_bytes().startswith(good) and journal.read_bytes().endswith(b"\n")
    assert run(vdb(config).get_ids()) == {"b", "c", "d"}


def test_drop_folds(config, tmp_path, journaled):
    store = two_commits(config, tmp_path)
    run(store.drop())
    committed(store, tmp_path)
    assert not store.journal_pending()
    assert run(vdb(config).get_ids()) == set()


def test_uncommitted_upserts_are_no_change_by_another_process(config, tmp_path):
    """A store that never committed (no file, no journal) and one that did both see their own
    uncommitted upserts at index start: only another process's commit reloads the file."""
    store = vdb(config)
    run(store.upsert({"a": record("a")}))
    assert store.reload_if_changed() is False
    assert run(store.get_ids()) == {"a"}
    committed(store, tmp_path)
    run(store.upsert({"b": record("b")}))
    run(store.index_start_callback())
    assert run(store.get_ids()) == {"a", "b"}
