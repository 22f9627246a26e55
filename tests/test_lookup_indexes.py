"""Lookup indexes beside the graph and the KV files: point reads that answer exactly as
the parsed file does, and are ignored when they do not describe it."""
from __future__ import annotations

import json
import os
import random
import shutil
from typing import Any

import networkx as nx
import pytest

from graphrag.config import GraphRAGConfig
from graphrag.storage import graph_networkx, graphml, journal, lookup_index
from graphrag.storage.graph_lookup import GraphLookup, build_lookup_index
from graphrag.storage.graphml import read_graphml, write_graphml
from graphrag.storage.kv_json import write_json_with_layout

from helpers_storage import committed, graph, kv, run

TRICKY_NAMES = ['"QUOTED"', "O'BRIEN", "BOTH \"'", "A & B <C>", "ÉLODIE ☃", " SPACED ", "TAB\tAND\nLINE",
                "", "0", "LONG " * 40]


def tricky_graph(seed: int = 3) -> nx.Graph:
    """Names XML must escape, a self-loop, an isolated node, every attribute type, and
    edges added in an order unrelated to the nodes' (so the read order of neighbours
    differs from the order they were added in)."""
    rnd = random.Random(seed)
    g = nx.Graph()
    names = TRICKY_NAMES + [f"NODE {i}" for i in range(60)]
    rnd.shuffle(names)
    for i, name in enumerate(names):
        g.add_node(name, entity_type="PERSON", description=f"about {name} <&>" if i % 7 else "",
                   rank=i, score=i / 4, core=i % 2 == 0)
    for _ in range(180):
        a, b = rnd.choice(names[1:]), rnd.choice(names[1:])
        g.add_edge(a, b, weight=float(rnd.randint(1, 9)), description=f"{a}-{b}", order=rnd.randint(1, 3))
    g.add_edge("NODE 5", "NODE 5", weight=1.0, description="self", order=1)
    g.add_node("LONELY", description="no edges")
    return g


def write_with_index(g: nx.Graph, folder: Any) -> tuple[str, str]:
    path, index = os.path.join(folder, "g.graphml"), os.path.join(folder, "g.graphml.index")
    layout = write_graphml(g, path)
    with open(index, "wb") as f:
        f.write(build_lookup_index(layout))
    return path, index


def open_lookup(path: str, index: str) -> GraphLookup:
    with open(path, "rb") as f:
        lookup = GraphLookup.open(f, index)
    assert lookup is not None
    return lookup


def assert_answers_as_parsed(lookup: GraphLookup, parsed: nx.Graph) -> None:
    assert len(lookup) == parsed.number_of_nodes()
    for node in parsed:
        assert lookup.has_node(node)
        assert lookup.node(node) == parsed.nodes[node]
        assert lookup.degree(node) == parsed.degree(node)
        assert lookup.node_edges(node) == list(parsed.edges(node))  # same order, not only same set
    for a, b, data in parsed.edges(data=True):
        for x, y in ((a, b), (b, a)):
            assert lookup.has_edge(x, y)
            assert lookup.edge(x, y) == data
    nodes = list(parsed)
    absent_pairs = [(a, b) for a in nodes[:20] for b in nodes[:20] if not parsed.has_edge(a, b)]
    for a, b in absent_pairs:
        assert not lookup.has_edge(a, b) and lookup.edge(a, b) is None
    for missing in ("MISSING", "node 5", "NODE 5 ", "\"QUOTED"):
        assert not lookup.has_node(missing)
        assert lookup.node(missing) is None and lookup.degree(missing) == 0 and lookup.node_edges(missing) is None
        assert lookup.edge(missing, "NODE 5") is None


def test_lookup_answers_exactly_as_the_parsed_graph(tmp_path: Any) -> None:
    g = tricky_graph()
    path, index = write_with_index(g, tmp_path)
    parsed = read_graphml(path)
    # A fresh parse orders some neighbours unlike the graph that was written; the lookup follows the parse.
    assert any(list(parsed.adj[n]) != list(g.adj[n]) for n in g)
    assert_answers_as_parsed(open_lookup(path, index), parsed)
    assert_answers_as_parsed(open_lookup(path, index), nx.Graph(nx.read_graphml(path)))


def test_lookup_tells_hash_collisions_apart(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookup_index, "key_hash", lambda text: len(text) % 3)  # everything collides
    g = tricky_graph(seed=5)
    path, index = write_with_index(g, tmp_path)
    assert_answers_as_parsed(open_lookup(path, index), read_graphml(path))


@pytest.mark.parametrize("colliding", [False, True])
def test_neighbours_read_first_are_then_answered_as_parsed(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                           colliding: bool) -> None:
    """A neighbour list's names are remembered at their slots as they are read: the degrees and
    edges asked of them next (before any lookup of their own) are the parsed graph's, also when
    every name's hash collides."""
    if colliding:
        monkeypatch.setattr(lookup_index, "key_hash", lambda text: len(text) % 3)
    g = tricky_graph(seed=11)
    path, index = write_with_index(g, tmp_path)
    parsed = read_graphml(path)
    for node in parsed:
        lookup = open_lookup(path, index)  # nothing looked up yet
        assert lookup.node_edges(node) == list(parsed.edges(node))
        for _, other in parsed.edges(node):
            assert lookup.degree(other) == parsed.degree(other)
            assert lookup.edge(other, node) == parsed.edges[node, other]
            assert lookup.node_edges(other) == list(parsed.edges(other))


def test_lookup_of_empty_and_edgeless_graphs(tmp_path: Any) -> None:
    for g in (nx.Graph(), nx.Graph([("A", "A")]), nx.empty_graph(["X", "Y"])):
        path, index = write_with_index(g, tmp_path)
        assert_answers_as_parsed(open_lookup(path, index), read_graphml(path))


def test_elements_as_the_writer_writes_them_are_read_without_an_xml_parser(tmp_path: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A query reads ~100 single elements of the GraphML: those the writer writes (escaped
    text, carriage returns as references, newlines, tabs, other scripts, empty values, every
    type) are read without an XML parser, to the same values as the full parse."""
    g = nx.Graph()
    texts = ["plain", "a & b <c> \"q\" 'a'", "carriage\rreturn\r\n", "lines\nand\ttabs", "ends in ]]>", "",
             "ÉLODIE ☃ 中文", "&amp; written out", "x" * 3000]
    for i, text in enumerate(texts):
        g.add_node(f"N{i}", description=text, rank=i, score=i / 3, core=i % 2 == 0)
    for i in range(len(texts) - 1):
        g.add_edge(f"N{i}", f"N{i + 1}", weight=float(i), description=texts[-2 - i], order=i)
    path, index = write_with_index(g, tmp_path)
    parsed = read_graphml(path)
    parsers: list[Any] = []
    real = graphml.expat.ParserCreate
    monkeypatch.setattr(graphml.expat, "ParserCreate", lambda *a: parsers.append(a) or real(*a))
    assert_answers_as_parsed(open_lookup(path, index), parsed)
    assert parsers == []


@pytest.mark.parametrize("element, expected", [
    ('<node id="A"><data key="d0">x<!-- note -->y</data></node>', {"description": "xy"}),
    ('<node id="A"><data key="d0"><![CDATA[<raw> & text]]></data></node>', {"description": "<raw> & text"}),
    ('<node id="A"><data key="d0">line&#10;&#x41;</data></node>', {"description": "line\nA"}),
    ('<node id="A"><data key="d0">a\r\nb\rc</data></node>', {"description": "a\nb\nc"}),
    ("<node id=\"A\">\n  <data key='d0'>spaced</data>\n  <data key=\"d1\">2</data></node>",
     {"description": "spaced", "rank": 2}),
    ('<node id="A"><data key="d0"/><data key="d1">7</data></node>', {"description": "", "rank": 7}),
    ('<edge source="A &amp; B" target="C"><data key="d1">3</data></edge>', {"rank": 3}),
])
def test_other_elements_are_read_as_an_xml_parser_reads_them(element: str, expected: dict[str, Any]) -> None:
    """What the writer does not write (comments, CDATA, numeric references, raw carriage returns,
    whitespace between elements, empty-element tags, escaped attributes) reads as XML says."""
    keys = graphml.key_decoders({"d0": ("description", "string"), "d1": ("rank", "long")})
    assert graphml.element_data(element.encode("utf-8"), keys) == expected


def test_an_element_xml_cannot_read_is_refused_either_way() -> None:
    keys = graphml.key_decoders({"d0": ("description", "string")})
    for element in ('<node id="A"><data key="d0">a &unknown; b</data></node>',
                    '<node id="A"><data key="d0">a & b</data></node>',
                    '<node id="A"><data key="d0">a ]]> b</data></node>',
                    '<node id="A"><data key="d0">bell \x07</data></node>'):
        with pytest.raises(Exception):
            graphml.element_data(element.encode("utf-8"), keys)
    with pytest.raises(KeyError):  # a key the file does not declare, as the full parse
        graphml.element_data(b'<node id="A"><data key="d9">x</data></node>', keys)


def test_index_of_another_version_is_ignored(tmp_path: Any) -> None:
    g = tricky_graph()
    path, index = write_with_index(g, tmp_path)
    old_index = tmp_path / "old.index"
    shutil.copy(index, old_index)
    g.nodes["NODE 1"]["description"] = "changed"
    write_graphml(g, path)
    with open(path, "rb") as f:
        assert GraphLookup.open(f, str(old_index)) is None  # the seal differs
    nx.write_graphml(g, path)  # another tool rewrote the graph: no seal at all
    with open(path, "rb") as f:
        assert GraphLookup.open(f, index) is None
    path, index = write_with_index(g, tmp_path)
    whole = open(index, "rb").read()
    for damaged in (b"", b"not an index", whole[:40], whole[:60] + b"{" + whole[61:]):
        with open(index, "wb") as out:
            out.write(damaged)
        with open(path, "rb") as f:
            assert GraphLookup.open(f, index) is None


# ------------------------------------------------------------------ through the store


def _counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    parses: list[Any] = []
    real = graph_networkx.read_graphml
    monkeypatch.setattr(graph_networkx, "read_graphml", lambda source: parses.append(source) or real(source))
    return parses


def _store_with(config: Any, g: nx.Graph) -> None:
    async def main() -> None:
        store = graph(config)
        for node, data in g.nodes(data=True):
            await store.upsert_node(node, data)
        for a, b, data in g.edges(data=True):
            await store.upsert_edge(a, b, data)
        await store.index_done_callback()

    run(main())


def test_store_answers_point_reads_without_parsing_the_graph(config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    g = tricky_graph()
    _store_with(config, g)
    parses = _counting_parses(monkeypatch)
    reference = read_graphml(os.path.join(config.working_dir, "graph_chunk_entity_relation.graphml"))

    async def main() -> None:
        store = graph(config)
        nodes = list(reference)
        assert await store.get_nodes_batch(nodes) == [reference.nodes[n] for n in nodes]
        assert await store.node_degrees_batch(nodes) == [reference.degree(n) for n in nodes]
        assert await store.get_nodes_edges_batch(nodes) == [list(reference.edges(n)) for n in nodes]
        edges = list(reference.edges())
        assert await store.get_edges_batch(edges) == [reference.edges[e] for e in edges]
        assert await store.edge_degrees_batch(edges) == [reference.degree(a) + reference.degree(b) for a, b in edges]
        assert not parses
        # Whatever needs the whole graph parses it, once, and then answers from it.
        assert nx.utils.graphs_equal(store.graph, reference)
        assert len(parses) == 1
        assert await store.get_node_edges("NODE 5") == list(reference.edges("NODE 5"))
        assert len(parses) == 1

    run(main())


def test_store_without_a_matching_index_parses_the_graph(config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    g = tricky_graph()
    _store_with(config, g)
    path = os.path.join(config.working_dir, "graph_chunk_entity_relation.graphml")
    g.nodes["NODE 1"]["description"] = "written by networkx"
    nx.write_graphml(g, path)
    parses = _counting_parses(monkeypatch)

    async def main() -> None:
        store = graph(config)
        assert len(parses) == 1
        assert (await store.get_node("NODE 1"))["description"] == "written by networkx"
        assert await store.get_node_edges("NODE 5") == list(read_graphml(path).edges("NODE 5"))
        # The next commit writes a matching index again.
        await store.upsert_node("NEW", {"description": "added"})
        await store.index_done_callback()
        again = graph(config)
        assert (await again.get_node("NODE 1"))["description"] == "written by networkx"
        assert await again.has_node("NEW")
        assert len(parses) == 1

    run(main())


def test_reader_keeps_the_version_it_opened(config: Any) -> None:
    """A reader answers from the files it opened even after a writer replaces them, also
    when it parses the whole graph later; a reload then sees the new version."""
    g = tricky_graph()
    _store_with(config, g)

    async def main() -> None:
        reader = graph(config)
        assert (await reader.get_node("NODE 1"))["description"] == g.nodes["NODE 1"]["description"]
        writer = graph(config)
        await writer.upsert_node("NODE 1", {"description": "new version"})
        await writer.delete_node("NODE 2")
        await writer.index_done_callback()

        assert (await reader.get_node("NODE 1"))["description"] == g.nodes["NODE 1"]["description"]
        assert await reader.has_node("NODE 2")
        assert reader.graph.nodes["NODE 1"]["description"] == g.nodes["NODE 1"]["description"]
        assert reader.reload_if_changed()
        assert (await reader.get_node("NODE 1"))["description"] == "new version"
        assert not await reader.has_node("NODE 2")

    run(main())


# ------------------------------------------------------------------ KV records


RECORDS = {
    "report-1": {"title": "Ünïcode ☃ \"quoted\" \\ back", "rating": 7.5, "findings": [{"a": 1}, {"b": None}]},
    "": {"empty key": True},
    "chunk \"2\"": {"content": "line\nbreak\ttab", "tokens": 3},
    "nested": {"deep": {"er": [1, 2, {"x": "y"}]}},
    "plain": {"content": ""},
}


def test_kv_file_layout_is_plain_json_with_known_value_places() -> None:
    import io

    import xxhash

    for data in (RECORDS, {}, {"only": {"v": 1}}):
        f = io.BytesIO()
        layout = write_json_with_layout(f, data)
        body = f.getvalue()
        assert body == json.dumps(data, ensure_ascii=False).encode("utf-8")
        assert layout.size == len(body) and layout.hash == xxhash.xxh3_128_hexdigest(body)
        assert [json.loads(body[o:o + n]) for o, n in zip(layout.offsets, layout.lengths)] == list(data.values())


def _kv_store(config: Any, records: dict[str, Any]) -> None:
    async def main() -> None:
        store = kv(config, "reports", lookup=True)
        await store.upsert(records)
        await store.index_done_callback()

    run(main())


def test_kv_store_reads_single_records_without_parsing_the_file(config: Any) -> None:
    _kv_store(config, RECORDS)

    async def main() -> None:
        store = kv(config, "reports", lookup=True)
        assert store._points() is not None
        assert await store.get_by_ids(list(RECORDS) + ["missing"]) == list(RECORDS.values()) + [None]
        assert await store.get_by_id("nested") == RECORDS["nested"]
        assert await store.get_by_ids(["chunk \"2\"", "missing"], fields={"tokens"}) == [{"tokens": 3}, None]
        assert store._points() is not None  # still not parsed whole
        # Every key in the order a parse gives (the file's), answered from the index alone.
        assert await store.all_keys() == list(RECORDS)
        assert store._points() is not None
        assert await store.get_by_id("nested") == RECORDS["nested"]

    run(main())


FIELD_RECORDS: dict[str, Any] = {
    "report": {"level": 1, "nodes": ["A", "B, \"report_string\": C"], "report_json": {"rating": 7.5},
               "report_string": "text, \"report_json\": 1", "fingerprint": "f"},
    "nested first": {"level": 0, "nodes": [{"report_string": "inner", "report_json": 1}], "report_json": {},
                     "report_string": "outer", "tail": 1},
    "nested after": {"report_json": {"report_string": "inner"}, "level": 2, "report_string": "outer"},
    "first keys": {"report_string": "first", "report_json": {"rating": 1.0}, "nodes": ["x"]},
    "missing one": {"level": 3, "report_string": "no rating"},
    "missing both": {"level": 4, "nodes": [{"report_string": "nested only"}]},
    "not a dict": ["report_string", "report_json"],
    "odd text": {"nodes": ["\\", "\\\"", ", \"report_json\": "], "report_json": {"rating": "8/10"},
                 "report_string": "ends in a backslash \\"},
}


def test_kv_store_reads_fields_as_the_whole_record_cut(config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A context reads a report's text and rating only: those last keys are decoded from the
    record's tail where they are the record's own keys, and every answer is the whole record
    cut to the fields, whatever the record holds (the names nested, in strings, first, missing)."""
    _kv_store(config, FIELD_RECORDS)
    fields = {"report_string", "report_json"}

    def cut(record: Any) -> Any:
        return {k: v for k, v in record.items() if k in fields} if isinstance(record, dict) else record

    store = kv(config, "reports", lookup=True)
    assert store._points() is not None
    ids = list(FIELD_RECORDS) + ["missing"]
    assert run(store.get_by_ids(ids, fields=fields)) == [cut(r) for r in FIELD_RECORDS.values()] + [None]
    assert run(store.get_by_ids(ids, fields={"level"})) == [
        {k: v for k, v in r.items() if k == "level"} if isinstance(r, dict) else r
        for r in FIELD_RECORDS.values()] + [None]
    monkeypatch.setattr(journal, "JOURNAL_FROM_BYTES", 0)  # a small commit: a journal line over the file
    run(store.upsert({"report": {"report_string": "changed", "level": 9}}))
    committed(store, config.working_dir)
    assert os.path.exists(os.path.join(config.working_dir, "kv_store_reports.journal.jsonl"))
    reader = kv(config, "reports", lookup=True)
    assert reader._points() is not None
    assert run(reader.get_by_ids(["report", "first keys"], fields=fields)) == [
        {"report_string": "changed"}, cut(FIELD_RECORDS["first keys"])]


def test_kv_lookup_collisions(config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookup_index, "key_hash", lambda text: 7)
    _kv_store(config, RECORDS)
    store = kv(config, "reports", lookup=True)
    assert store._points() is not None
    assert run(store.get_by_ids(list(RECORDS) + ["missing"])) == list(RECORDS.values()) + [None]


def test_kv_index_follows_the_file_it_describes(config: Any, tmp_path: Any) -> None:
    _kv_store(config, RECORDS)
    path = os.path.join(config.working_dir, "kv_store_reports.json")

    # A copied working dir: other mtime and inode, same content -> still used.
    copy = tmp_path.parent / f"{tmp_path.name}-copy"
    shutil.copytree(config.working_dir, copy)
    copied = kv(GraphRAGConfig(working_dir=str(copy)), "reports", lookup=True)
    assert copied._points() is not None and run(copied.get_by_id("plain")) == RECORDS["plain"]

    # Edited in place by something else, even to the same size -> ignored, file parsed.
    body = open(path, "rb").read()
    with open(path, "r+b") as f:
        f.seek(body.index(b"7.5"))
        f.write(b"8.5")
    os.utime(path, ns=(1, 1))
    edited = kv(config, "reports", lookup=True)
    assert edited._points() is None
    assert run(edited.get_by_id("report-1"))["rating"] == 8.5

    # Rewritten by a writer without the index (another tool, an older version) -> ignored.
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"other": {"v": 1}}, f, indent=2)
    rewritten = kv(config, "reports", lookup=True)
    assert rewritten._points() is None and run(rewritten.all_keys()) == ["other"]


def test_kv_reader_keeps_the_version_it_opened(config: Any) -> None:
    _kv_store(config, RECORDS)

    async def main() -> None:
        reader = kv(config, "reports", lookup=True)
        assert await reader.get_by_id("plain") == RECORDS["plain"]
        writer = kv(config, "reports", lookup=True)
        await writer.upsert({"plain": {"content": "new"}})
        await writer.delete(["nested"])
        await writer.index_done_callback()
        assert await reader.get_by_id("plain") == RECORDS["plain"]
        assert await reader.get_by_id("nested") == RECORDS["nested"]
        assert sorted(await reader.all_keys()) == sorted(RECORDS)  # parsed whole: still that version
        assert reader.reload_if_changed()
        assert await reader.get_by_id("plain") == {"content": "new"}
        assert await reader.get_by_id("nested") is None

    run(main())


def test_a_graph_writer_parses_its_file_up_front_and_a_kv_writer_keeps_its_lookup(config: Any) -> None:
    """A graph writer reads and changes much of the graph, so it parses it once; a KV writer
    holds its write's changes apart over the lookup, so a small write into a large store does
    not parse it (reads through it are checked in test_kv_commit_journal)."""
    _store_with(config, tricky_graph())
    _kv_store(config, RECORDS)
    store = graph(config)
    assert store._points() is not None
    run(store.index_start_callback())
    assert store._points() is None
    records = kv(config, "reports", lookup=True)
    run(records.index_start_callback())
    assert records._points() is not None
    assert run(records.get_by_id("nested")) == RECORDS["nested"]


def test_hashing_writer_hashes_and_counts_what_it_writes_across_flushes() -> None:
    import io

    import xxhash

    from graphrag.storage.lookup_index import HashingWriter

    f = io.BytesIO()
    out = HashingWriter(f, buffer_bytes=5)  # flushes every few pieces
    pieces = [b"{", b'"a": ', b"[1, 2, 3]", b"", b", ", "\"é\": \"中\"".encode("utf-8"), b"}"]
    lengths = [out.write(p) for p in pieces]
    digest = out.hexdigest()
    body = b"".join(pieces)
    assert f.getvalue() == body and out.position == len(body) and lengths == [len(p) for p in pieces]
    assert digest == xxhash.xxh3_128_hexdigest(body)


def test_a_dropped_lookup_unmaps_its_files_without_waiting_for_the_collector(tmp_path: Any) -> None:
    """A lookup answered from its caches holds no reference cycle: the last reference gone,
    its maps of a replaced version close at once, not at the next full collection."""
    import gc
    import weakref

    g = tricky_graph()
    path, index = write_with_index(g, tmp_path)
    lookup = open_lookup(path, index)
    assert_answers_as_parsed(lookup, read_graphml(path))  # every cache filled
    gone = weakref.ref(lookup)
    gc.disable()
    try:
        del lookup
        assert gone() is None
    finally:
        gc.enable()
