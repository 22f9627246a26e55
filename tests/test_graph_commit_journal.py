"""A commit into a large GraphML appends the nodes, edges and graph attributes it changed to
``graph_<ns>.journal.jsonl`` instead of rewriting the GraphML, its lookup index and walk file;
a reader answers through the journal laid over the index; the journal folds by the KV
journal's rules; a kill during the append is finished by recovery."""
from __future__ import annotations

import json
import os
import random

import networkx as nx
import pytest
from helpers_storage import commit_killed_mid_append, committed, graph, run, run_journaling_writer

import graphrag.storage.files as files
import graphrag.storage.journal as commit_journal
from graphrag.storage import recover_pending_commit

JOURNAL = "graph_chunk_entity_relation.journal.jsonl"
GRAPHML = "graph_chunk_entity_relation.graphml"


@pytest.fixture
def journaled(monkeypatch):
    """Every store journals (whatever its file's size) and folds only when told to."""
    monkeypatch.setattr(commit_journal, "JOURNAL_FROM_BYTES", 0)
    monkeypatch.setattr(commit_journal, "FOLD_AT_SHARE", 1000.0)


def clusters(*ids: int) -> str:
    return json.dumps([{"level": i, "cluster": c} for i, c in enumerate(ids)])


def answers(store, names: list[str]) -> dict:
    """Everything a query reads of the graph through the store's point reads (a node's edges as
    a set: the writer's live graph lists them in the order it added them, a reader in the file's)."""
    async def read():
        got = {}
        for a in names:
            edges = await store.get_node_edges(a)
            got[a] = (await store.has_node(a), await store.get_node(a), await store.node_degree(a),
                      None if edges is None else sorted(edges))
            for b in names:
                got[a, b] = (await store.has_edge(a, b), await store.get_edge(a, b))
        nodes, edges = await store.get_walk_links()
        got["walk"] = (sorted(nodes), sorted(tuple(sorted(e)) for e in edges))
        return got
    return run(read())


def random_commits(config, directory, rng: random.Random, commits: int):
    """A store after a first whole commit and ``commits`` journaled ones of random changes."""
    store = graph(config)
    names = [f"N{i}" for i in range(30)]

    async def change(first: bool) -> None:
        for _ in range(40 if first else 12):
            op = rng.random()
            a, b = rng.sample(names, 2)
            if op < 0.35 or first:
                await store.upsert_node(a, {"source_id": f"c{rng.randrange(9)}", "description": f"d{rng.random()}",
                                            "weight": rng.randrange(5), "clusters": clusters(rng.randrange(3))})
                await store.upsert_edge(a, b, {"weight": rng.random(), "description": "rel"})
            elif op < 0.5:
                await store.upsert_edge(a, f"NEW{rng.randrange(5)}", {"weight": 1.0})  # adds the far end
            elif op < 0.65:
                await store.delete_node(a)
            elif op < 0.8:
                await store.delete_edge(a, b)
            elif op < 0.9:
                await store.update_node_clusters({n: clusters(rng.randrange(3)) if rng.random() < 0.7 else ""
                                                  for n in rng.sample(names, 4) if await store.has_node(n)})
            else:
                await store.set_graph_attribute("version", str(rng.random()))

    for i in range(commits + 1):
        run(change(i == 0))
        committed(store, directory)
    return store, names + [f"NEW{i}" for i in range(5)]


def same_graph(a: nx.Graph, b: nx.Graph) -> None:
    assert dict(a.nodes(data=True)) == dict(b.nodes(data=True))
    assert {tuple(sorted((x, y))): d for x, y, d in a.edges(data=True)} == {
        tuple(sorted((x, y))): d for x, y, d in b.edges(data=True)}
    assert {k: v for k, v in a.graph.items() if k not in ("node_default", "edge_default")} == {
        k: v for k, v in b.graph.items() if k not in ("node_default", "edge_default")}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_journaled_commits_read_back_as_the_writers_graph(config, tmp_path, journaled, seed):
    rng = random.Random(seed)
    store, names = random_commits(config, tmp_path, rng, commits=4)
    graphml = (tmp_path / GRAPHML).read_bytes()
    assert len((tmp_path / JOURNAL).read_text().splitlines()) >= 4
    expected = answers(store, names)  # the writer's parsed, live graph

    reader = graph(config)  # through the index and the journal laid over it
    assert answers(reader, names) == expected
    parsed = graph(config)
    same_graph(parsed.graph, store.graph)  # parsed whole, the journal applied

    run(store.fold())
    committed(store, tmp_path)
    assert not (tmp_path / JOURNAL).exists() and (tmp_path / GRAPHML).read_bytes() != graphml
    same_graph(nx.Graph(nx.read_graphml(tmp_path / GRAPHML)), store.graph)  # whole for other tools
    assert answers(graph(config), names) == expected


def test_a_small_commit_leaves_the_other_nodes_answered_by_the_index(config, tmp_path, journaled):
    """A reader answers a node the journal does not touch from the index alone (its degree and
    edges are read per query); the changed nodes, the ends of changed edges and the neighbours
    of a removed node through the changes. Every answer is the writer's."""
    store = graph(config)
    names = [f"N{i}" for i in range(12)]
    for n in names + ["HUB"]:
        run(store.upsert_node(n, {"description": n}))
    for i, n in enumerate(names):
        run(store.upsert_edge("HUB", n, {"weight": 1.0}))
        run(store.upsert_edge(n, names[(i + 1) % len(names)], {"weight": 2.0}))
    run(store.upsert_edge("N0", "N0", {"weight": 3.0}))  # a self-loop: two degrees
    committed(store, tmp_path)
    first = graph(config)
    before = answers(first, names + ["HUB"])

    run(store.delete_node("N3"))  # N2, N4 and HUB lose an edge
    run(store.upsert_edge("N6", "N9", {"weight": 5.0}))
    run(store.upsert_node("N7", {"description": "changed"}))
    committed(store, tmp_path)
    assert (tmp_path / JOURNAL).exists()
    expected = answers(store, names + ["HUB", "NEW"])
    assert answers(graph(config), names + ["HUB", "NEW"]) == expected
    assert expected["N2"][2] == 2 and expected["HUB"][2] == 11 and expected["N0"][2] == 5
    assert answers(first, names + ["HUB"]) == before  # the version it opened
    assert first.reload_if_changed()  # another writer's commit: the reader answers the new version
    assert answers(first, names + ["HUB", "NEW"]) == expected


def test_a_small_commit_appends_only_what_it_changed(config, tmp_path, journaled):
    store = graph(config)
    for n in ("A", "B", "C"):
        run(store.upsert_node(n, {"description": n}))
    run(store.upsert_edge("A", "B", {"weight": 1.0}))
    run(store.upsert_edge("B", "C", {"weight": 2.0}))
    committed(store, tmp_path)  # no file yet: written whole
    before = {name: (tmp_path / name).read_bytes() for name in (GRAPHML, GRAPHML + ".index", GRAPHML + ".walk")}

    run(store.update_node_clusters({"A": clusters(4)}))
    run(store.delete_node("C"))
    committed(store, tmp_path)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    lines = [json.loads(x) for x in (tmp_path / JOURNAL).read_text().splitlines()]
    assert lines == [{"n\x1fA": {"description": "A", "clusters": clusters(4)}}, ["e\x1fB\x1fC", "n\x1fC"]]

    reader = graph(config)
    assert run(reader.get_node_edges("B")) == [("B", "A")] and run(reader.node_degree("B")) == 1
    assert run(reader.get_node("C")) is None and not run(reader.has_edge("C", "B"))
    assert run(reader.get_walk_links()) == ([("A", ""), ("B", "")], [("A", "B")])


def test_another_processes_append_is_noticed_and_read(config, tmp_path, journaled):
    writer = graph(config)
    run(writer.upsert_node("A", {"description": "a"}))
    committed(writer, tmp_path)
    reader = graph(config)
    assert not reader.reload_if_changed()
    run(writer.upsert_edge("A", "B", {"weight": 3.0}))
    committed(writer, tmp_path)
    assert reader.reload_if_changed()
    assert run(reader.get_edge("B", "A")) == {"weight": 3.0}
    assert not writer.reload_if_changed()  # its own commit is not mistaken for another's


def test_a_graphml_another_tool_wrote_is_written_whole_with_its_index_at_the_next_commit(config, tmp_path, journaled):
    """A GraphML no index describes is parsed whole by every reader: the next commit folds,
    writing the index again, rather than journaling on top of it."""
    store = two_commits(config, tmp_path)
    whole = store.graph.copy()
    nx.write_graphml(whole, tmp_path / GRAPHML)  # another tool: no seal, the index stale
    index = (tmp_path / (GRAPHML + ".index")).read_bytes()
    (tmp_path / JOURNAL).unlink()  # its entries are in the file
    reopened = graph(config)
    run(reopened.upsert_node("C", {"description": "c"}))
    committed(reopened, tmp_path)
    assert not (tmp_path / JOURNAL).exists() and (tmp_path / (GRAPHML + ".index")).read_bytes() != index
    assert b"graphrag-seal" in (tmp_path / GRAPHML).read_bytes()[-100:]
    assert run(graph(config).get_node("C")) == {"description": "c"}


def two_commits(config, directory):
    """A store whose GraphML holds A and whose journal holds B's upsert."""
    store = graph(config)
    run(store.upsert_node("A", {"description": "a"}))
    committed(store, directory)
    run(store.upsert_node("B", {"description": "b"}))
    committed(store, directory)
    return store


def test_an_append_cut_by_a_kill_is_redone_by_recovery(config, tmp_path, journaled, monkeypatch):
    store = two_commits(config, tmp_path)
    journal = tmp_path / JOURNAL
    good = journal.read_bytes()

    run(store.upsert_edge("A", "C", {"weight": 1.0}))
    commit_killed_mid_append(store, tmp_path, monkeypatch, b'{"n\\u001fC": {}, "e\\u001fA')
    assert journal.read_bytes().startswith(good) and not journal.read_bytes().endswith(b"\n")  # torn on disk
    torn = graph(config)
    assert run(torn.has_node("B")) and not run(torn.has_node("C"))  # the torn line is skipped
    assert os.path.exists(tmp_path / files.MANIFEST_NAME)

    assert recover_pending_commit(str(tmp_path))
    assert journal.read_bytes().startswith(good) and journal.read_bytes().endswith(b"\n")
    recovered = graph(config)
    assert run(recovered.get_node_edges("C")) == [("C", "A")] and run(recovered.get_edge("A", "C")) == {"weight": 1.0}


@pytest.mark.parametrize("whole", ["drop", "set_node_clusters"])
def test_a_change_to_the_whole_graph_folds(config, tmp_path, journaled, whole):
    store = two_commits(config, tmp_path)
    assert store.journal_pending()
    if whole == "drop":
        run(store.drop())
    else:
        run(store.set_node_clusters({"A": clusters(1), "B": clusters(2)}))
    committed(store, tmp_path)
    assert not store.journal_pending()
    expected = {} if whole == "drop" else {"A": clusters(1), "B": clusters(2)}
    assert dict(graph(config).graph.nodes(data="clusters")) == expected


def test_a_killed_writers_journaled_graph_is_read_by_the_next_process(tmp_path):
    """A writer process killed after its commits (no close, no exit fold) leaves its latest
    graph changes in the journal only: the next process reads them through the index, and its
    next commit folds them into a GraphML networkx reads whole (the file is under the size
    from which this process journals)."""
    from graphrag import GraphRAG, hash_embedding

    wd = tmp_path / "wd"
    stdout = run_journaling_writer(wd, """
        import json, os
        print(json.dumps(sorted(rag.stores.graph.graph.nodes)), flush=True)
        os._exit(0)  # killed: no close, no fold at exit
    """)
    written = json.loads(stdout.strip().splitlines()[-1])  # the writer's node names
    assert (wd / JOURNAL).exists()
    on_disk = set(nx.read_graphml(wd / GRAPHML).nodes)
    late = [n for n in written if n not in on_disk]
    assert late, "the second insert's entities should be in the journal only"

    rag = GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(32), extraction="nlp", show_progress=False)
    graph_store = rag.stores.graph

    async def read():
        return [await graph_store.get_node(n) for n in written], await graph_store.get_walk_links()

    nodes, (walk_nodes, _) = run(read())
    assert all(nodes) and sorted(n for n, _ in walk_nodes) == written
    rag.insert("Ada Lovelace met Charles Babbage in London.")
    rag.close()
    assert not (wd / JOURNAL).exists()
    assert set(written) <= set(nx.read_graphml(wd / GRAPHML).nodes)


def test_a_carriage_return_reads_back_the_same_from_the_journal_and_from_the_graphml(config, tmp_path, journaled):
    """XML parsers turn a raw \\r in text into \\n: the GraphML writes it as a character reference
    (as networkx's writer does), so a value reads the same before a fold and after."""
    store = graph(config)
    run(store.upsert_node("A", {"description": "a"}))
    committed(store, tmp_path)  # written whole
    value = "line one\r\nline two\rend"
    run(store.upsert_node("B", {"description": value}))
    run(store.upsert_edge("A", "B", {"description": value, "weight": 1.0}))
    run(store.set_graph_attribute("note", value))
    committed(store, tmp_path)  # journaled
    expected = answers(store, ["A", "B"])
    assert answers(graph(config), ["A", "B"]) == expected
    run(store.fold())
    committed(store, tmp_path)
    assert not (tmp_path / JOURNAL).exists()
    assert answers(graph(config), ["A", "B"]) == expected
    assert run(graph(config).get_graph_attribute("note")) == value
    on_disk = nx.read_graphml(tmp_path / GRAPHML)
    assert on_disk.nodes["B"]["description"] == value == on_disk.graph["note"]


def test_a_fold_killed_before_the_journal_is_removed_does_not_replay_older_values(config, tmp_path, journaled,
                                                                                   monkeypatch):
    """A fold's commit writes the GraphML whole, with its own changes; a kill after the commit's
    files are in place but before the journal is removed must not let the journal's older
    values (and deletions) override the newer ones in the file at the next open."""
    store = graph(config)
    for n in ("A", "B", "C"):
        run(store.upsert_node(n, {"description": f"{n} first"}))
    committed(store, tmp_path)  # written whole
    run(store.upsert_node("A", {"description": "A journaled"}))
    run(store.delete_node("C"))
    committed(store, tmp_path)  # journaled
    run(store.upsert_node("A", {"description": "A folded"}))
    run(store.upsert_node("C", {"description": "C again"}))
    run(store.fold())
    monkeypatch.setattr(commit_journal.JournaledFile, "_truncate_journal", lambda self: None)  # killed
    committed(store, tmp_path)
    expected = answers(store, ["A", "B", "C"])
    assert run(store.get_node("A")) == {"description": "A folded"} and run(store.has_node("C"))
    assert answers(graph(config), ["A", "B", "C"]) == expected
