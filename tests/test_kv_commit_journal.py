"""A commit into a large KV store appends its changes to the store's journal instead of
rewriting the JSON file; the journal folds into the file at a threshold; a kill during the
append is finished by recovery."""
from __future__ import annotations

import json
import os

import pytest
from helpers_storage import commit_killed_mid_append, committed, kv, run, run_journaling_writer

import graphrag.storage.files as files
import graphrag.storage.journal as commit_journal
from graphrag.storage import commit_transaction, recover_pending_commit


@pytest.fixture
def journaled(monkeypatch):
    """Every store journals (whatever its file's size) and folds only when told to."""
    monkeypatch.setattr(commit_journal, "JOURNAL_FROM_BYTES", 0)
    monkeypatch.setattr(commit_journal, "FOLD_AT_SHARE", 1000.0)


def two_commits(config, directory):
    """A store whose file holds {a} and whose journal holds {b}."""
    store = kv(config, "docs")
    run(store.upsert({"a": {"v": 1}}))
    committed(store, directory)
    run(store.upsert({"b": {"v": 2}}))
    committed(store, directory)
    return store


def test_a_small_commit_appends_and_leaves_the_json_file_alone(config, tmp_path, journaled):
    store = kv(config, "reports", lookup=True)
    run(store.upsert({"a": {"v": 1}, "b": {"v": 2}, "c": {"v": 3}}))
    committed(store, tmp_path)  # no file yet: written whole
    json_file = tmp_path / "kv_store_reports.json"
    before = json_file.read_bytes()
    run(store.upsert({"b": {"v": 20}, "d": {"v": 4}}))
    run(store.delete(["a"]))
    committed(store, tmp_path)
    assert json_file.read_bytes() == before
    lines = (tmp_path / "kv_store_reports.journal.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"b": {"v": 20}, "d": {"v": 4}}, ["a"]]

    # A reader through the lookup index sees the journal over the file's records...
    reader = kv(config, "reports", lookup=True)
    assert run(reader.get_by_ids(["a", "b", "c", "d"])) == [None, {"v": 20}, {"v": 3}, {"v": 4}]
    assert run(reader.count()) == 3
    assert reader._parsed is None  # answered without parsing the file
    # ...and so does one that parses it whole.
    assert sorted(run(kv(config, "reports").all_keys())) == ["b", "c", "d"]


def test_the_journal_folds_into_the_file_when_it_outgrows_its_share(config, tmp_path, journaled, monkeypatch):
    store = kv(config, "docs")
    run(store.upsert({f"k{i}": {"text": "x" * 50} for i in range(20)}))
    committed(store, tmp_path)
    run(store.upsert({"k0": {"text": "changed"}}))
    committed(store, tmp_path)
    journal = tmp_path / "kv_store_docs.journal.jsonl"
    assert journal.exists()
    monkeypatch.setattr(commit_journal, "FOLD_AT_SHARE", 0.0)
    run(store.upsert({"k1": {"text": "changed too"}}))
    committed(store, tmp_path)
    assert not journal.exists()
    on_disk = json.loads((tmp_path / "kv_store_docs.json").read_text())
    assert len(on_disk) == 20 and on_disk["k0"] == {"text": "changed"} and on_disk["k1"] == {"text": "changed too"}


def test_fold_writes_the_whole_file_at_the_next_commit(config, tmp_path, journaled):
    store = two_commits(config, tmp_path)
    assert store.journal_pending()
    run(store.fold())
    committed(store, tmp_path)
    assert not store.journal_pending()
    assert json.loads((tmp_path / "kv_store_docs.json").read_text()) == {"a": {"v": 1}, "b": {"v": 2}}


def test_another_processes_append_is_noticed_at_index_start(config, tmp_path, journaled):
    writer, reader = kv(config, "docs"), None
    run(writer.upsert({"a": {"v": 1}}))
    committed(writer, tmp_path)
    reader = kv(config, "docs")
    run(writer.upsert({"b": {"v": 2}}))
    committed(writer, tmp_path)
    assert reader.reload_if_changed()
    assert run(reader.get_by_id("b")) == {"v": 2}
    assert not writer.reload_if_changed()  # its own commit is not mistaken for another's


def test_an_append_cut_by_a_kill_is_redone_by_recovery(config, tmp_path, journaled, monkeypatch):
    store = two_commits(config, tmp_path)
    journal = tmp_path / "kv_store_docs.journal.jsonl"
    good = journal.read_bytes()

    run(store.upsert({"c": {"v": 3}}))
    commit_killed_mid_append(store, tmp_path, monkeypatch, b'{"c": {"v"')
    assert journal.read_bytes() == good + b'{"c": {"v"'  # torn on disk
    assert os.path.exists(tmp_path / files.MANIFEST_NAME)

    assert recover_pending_commit(str(tmp_path))
    assert recover_pending_commit(str(tmp_path)) is False  # done once, nothing left
    assert journal.read_bytes().startswith(good) and journal.read_bytes().endswith(b"\n")
    assert run(kv(config, "docs").get_by_ids(["a", "b", "c"])) == [{"v": 1}, {"v": 2}, {"v": 3}]


def test_a_write_that_fails_before_the_manifest_leaves_the_journal_as_it_was(config, tmp_path, journaled):
    store = two_commits(config, tmp_path)
    journal = tmp_path / "kv_store_docs.journal.jsonl"
    before = journal.read_bytes()
    run(store.upsert({"c": {"v": 3}}))
    with pytest.raises(RuntimeError):
        with commit_transaction(str(tmp_path)):
            run(store.index_done_callback())
            raise RuntimeError("insert failed")
    assert journal.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["kv_store_docs.journal.jsonl", "kv_store_docs.json"]
    assert run(kv(config, "docs").get_by_id("c")) is None


def test_a_write_ahead_then_a_later_change_in_one_commit_keeps_both(config, tmp_path, journaled):
    store = kv(config, "docs")
    run(store.upsert({"a": {"v": 1}}))
    committed(store, tmp_path)

    async def write() -> None:
        await store.upsert({"b": {"v": 2}})
        await store.write_ahead()
        await store.upsert({"c": {"v": 3}})
        await store.index_done_callback()

    with commit_transaction(str(tmp_path)):
        run(write())
    assert run(kv(config, "docs").get_by_ids(["a", "b", "c"])) == [{"v": 1}, {"v": 2}, {"v": 3}]
    assert len((tmp_path / "kv_store_docs.journal.jsonl").read_text().splitlines()) == 1


def test_close_folds_what_this_instances_writes_journaled(tmp_path, journaled):
    """Sync calls leave journals (folding after each would cost the whole file again);
    ``close()`` folds them, so the JSON files nano-graphrag's tools read hold every record."""
    from graphrag import GraphRAG, hash_embedding

    wd = tmp_path / "wd"
    rag = GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(32), extraction="nlp", show_progress=False)
    rag.insert("Ada Lovelace wrote the first program for the Analytical Engine in London.")
    rag.insert("Charles Babbage designed the Analytical Engine in London.")
    journals = sorted(p.name for p in wd.glob("*.journal.jsonl"))
    assert {"kv_store_full_docs.journal.jsonl", "vdb_entities.journal.jsonl"} <= set(journals)
    assert len(json.loads((wd / "kv_store_full_docs.json").read_text())) == 1
    reader = GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(32), extraction="nlp", show_progress=False)
    assert len(reader.list_documents()) == 2  # the engine reads the journal
    reader.close()
    assert sorted(p.name for p in wd.glob("*.journal.jsonl")) == journals  # a reader folds nothing
    rag.close()
    assert not list(wd.glob("*.journal.jsonl"))
    assert len(json.loads((wd / "kv_store_full_docs.json").read_text())) == 2
    assert len(GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(32), extraction="nlp",
                        show_progress=False).list_documents()) == 2


def test_a_deletion_from_the_eager_journal_waits_for_the_commit_which_folds(config, tmp_path, journaled):
    cache = kv(config, "cache", journal=True)
    run(cache.upsert({"h1": {"return": "one"}, "h2": {"return": "two"}}))
    committed(cache, tmp_path)
    run(cache.upsert({"h3": {"return": "three"}}))
    committed(cache, tmp_path)
    assert cache.journal_pending()  # kept as it arrived; the commit appended nothing more
    run(cache.delete(["h1"]))
    assert sorted(run(kv(config, "cache").all_keys())) == ["h1", "h2", "h3"]  # not before the commit
    committed(cache, tmp_path)
    assert not cache.journal_pending()
    assert sorted(json.loads((tmp_path / "kv_store_cache.json").read_text())) == ["h2", "h3"]


def test_a_script_that_never_closes_leaves_whole_json_files_at_exit(tmp_path):
    """nano-graphrag's examples insert and exit without ``close()``: the journals their large
    stores were given are folded as the interpreter exits, so the JSON files hold every record."""
    wd = tmp_path / "wd"
    stdout = run_journaling_writer(wd, f"""
        import glob, os
        print(len(glob.glob(os.path.join({str(wd)!r}, "vdb_*.journal.jsonl"))),
              len(glob.glob(os.path.join({str(wd)!r}, "graph_*.journal.jsonl"))),
              len(rag.stores.graph.graph))
    """)
    vector_journals, graph_journals, nodes = map(int, stdout.split()[-3:])
    assert vector_journals > 0 and graph_journals == 1  # journaled while the script ran
    assert not list(wd.glob("*.journal.jsonl"))
    assert len(json.loads((wd / "kv_store_full_docs.json").read_text())) == 2
    import networkx as nx

    assert nx.read_graphml(wd / "graph_chunk_entity_relation.graphml").number_of_nodes() == nodes > 0


def test_a_script_whose_instance_is_dropped_before_exit_still_leaves_whole_files(tmp_path):
    """nano-graphrag's examples insert in a function (``def insert(): rag = GraphRAG(...);
    rag.insert(...)``): the instance is gone before the interpreter exits, and its journals are
    folded at exit all the same."""
    wd = tmp_path / "wd"
    stdout = run_journaling_writer(wd, """
        import gc
        print(len(rag.stores.graph.graph))
        del rag
        gc.collect()
    """)
    nodes = int(stdout.split()[-1])
    assert not list(wd.glob("*.journal.jsonl"))
    assert len(json.loads((wd / "kv_store_full_docs.json").read_text())) == 2
    import networkx as nx

    assert nx.read_graphml(wd / "graph_chunk_entity_relation.graphml").number_of_nodes() == nodes > 0


def test_a_write_through_the_lookup_index_matches_a_parsed_store_and_leaves_the_file_unparsed(config, tmp_path,
                                                                                             journaled):
    """A writer over an indexed file holds its changes apart instead of parsing the file, and
    reads, key order, counts and the file a fold writes are a parsed store's, a key deleted and
    written again included (it moves to the end, as in a parsed store)."""
    indexed_dir, parsed_dir = tmp_path / "indexed", tmp_path / "parsed"
    stores = []
    for directory, lookup in ((indexed_dir, True), (parsed_dir, False)):
        directory.mkdir()
        cfg = type(config)(working_dir=str(directory))
        store = kv(cfg, "reports", lookup=True)
        run(store.upsert({k: {"v": i} for i, k in enumerate("abcdef")}))
        committed(store, directory)  # the file and its index
        run(store.upsert({"b": {"v": 10}}))
        committed(store, directory)  # a journal line over them
        stores.append((kv(cfg, "reports", lookup=lookup), directory))

    def same(step):
        results = []
        for store, directory in stores:
            run(step(store))
            results.append((run(store.all_keys()), run(store.get_by_ids(list("abcdefgh"))), run(store.count()),
                            run(store.filter_keys(list("abcdefgh")))))
        assert results[0] == results[1]

    indexed = stores[0][0]
    run(indexed.index_start_callback())
    same(lambda s: s.upsert({"c": {"v": 30}, "g": {"v": 7}}))
    same(lambda s: s.delete(["a", "g", "zz"]))
    same(lambda s: s.upsert({"h": {"v": 8}}))
    assert indexed._parsed is None  # all of the above without parsing the file
    same(lambda s: s.upsert({"a": {"v": 100}}))  # deleted, then written again: to the end
    assert run(indexed.all_keys())[-1] == "a"
    for store, directory in stores:
        committed(store, directory)
        run(store.fold())
        committed(store, directory)
    assert (indexed_dir / "kv_store_reports.json").read_bytes() == (parsed_dir / "kv_store_reports.json").read_bytes()


def test_a_read_of_more_records_than_the_lookup_keeps_decoded_parses_the_file_once(config, tmp_path, monkeypatch):
    """Record by record, such a read would decode every record again at each call."""
    import graphrag.storage.kv_json as kv_json

    monkeypatch.setattr(kv_json, "DECODED_KEPT", 3)
    store = kv(config, "reports", lookup=True)
    run(store.upsert({k: {"v": i} for i, k in enumerate("abcdef")}))
    committed(store, tmp_path)
    reader = kv(config, "reports", lookup=True)
    assert run(reader.get_by_ids(["a", "c", "zz"])) == [{"v": 0}, {"v": 2}, None]
    assert reader._parsed is None
    keys = run(reader.all_keys())
    assert keys == list("abcdef") and reader._parsed is None
    assert run(reader.get_by_ids(keys)) == [{"v": i} for i in range(6)]
    assert reader._parsed is not None
