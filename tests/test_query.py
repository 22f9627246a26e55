"""Query modes over hand-built stores: context content, token budgets, LLM call counts."""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import string
from typing import Any, Optional

import pytest

from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.llm import LLMClient, UsageCounter, openai_model_func
from graphrag.operators.report_parsing import stored_rating
from graphrag.operators.extractive_report import render_report_markdown
from graphrag.operators.query_context import (
    csv_section,
    fail_response,
    largest_fitting_prefix,
    doubling_slices,
    pack_csv_section,
    pack_texts,
    pack_while_reading,
    row_cost,
    rows_to_csv_table,
    section_counter,
)
from graphrag.operators.query_global import build_global_context, global_query, parse_points
from graphrag.operators.query_local import (
    RELATION_HEADER,
    SOURCE_HEADER,
    _clusters,
    _find_entities,
    build_local_context,
    local_query,
)
from graphrag.operators.query_naive import build_naive_context, naive_query
from graphrag.operators.text_cache import TextCache
from graphrag.operators.tokenizer import get_tokenizer
from graphrag.query_param import QueryParam
from graphrag.schema import GRAPH_FIELD_SEP
from graphrag.stores import Stores, open_stores
from mock_llm_server import MockLLMServer, prompt_of

SEP = GRAPH_FIELD_SEP
TOKENIZER = get_tokenizer("gpt-4o")

# --------------------------------------------------------------------------- corpora

DOCS = {
    "doc-a": {
        "chunk-a1": "Marisol Vane founded the Copperleaf Observatory on the hill above Dunmore. "
                    "The observatory was built to follow the comet Halvard on its slow return.",
    },
    "doc-b": {
        "chunk-b1": "Teodor Kask is the chief engineer of the Copperleaf Observatory. "
                    "Kask built the brass telescope Ondine from salvaged ship lenses in 1911.",
    },
    "doc-c": {
        "chunk-c1": "Every autumn the Guild of Glassblowers holds the Lantern Festival in Dunmore. "
                    "Its master, Ilse Brandt, makes the first lantern in honour of Marisol Vane.",
    },
}

ENTITIES = {
    "MARISOL VANE": ("person", ["Marisol Vane founded the Copperleaf Observatory.",
                                "Marisol Vane is honoured by the first lantern of the festival."], ["chunk-a1", "chunk-c1"]),
    "COPPERLEAF OBSERVATORY": ("organization", ["An observatory above Dunmore that follows the comet Halvard.",
                                                "Its chief engineer is Teodor Kask."], ["chunk-a1", "chunk-b1"]),
    "DUNMORE": ("geo", ["A hill town, home of the observatory and the Lantern Festival."], ["chunk-a1", "chunk-c1"]),
    "HALVARD": ("event", ["A comet whose slow return the observatory follows."], ["chunk-a1"]),
    "TEODOR KASK": ("person", ["Teodor Kask is the chief engineer who built the brass telescope Ondine."], ["chunk-b1"]),
    "ONDINE": ("organization", ["A brass telescope made from salvaged ship lenses in 1911."], ["chunk-b1"]),
    "GUILD OF GLASSBLOWERS": ("organization", ["The guild that holds the Lantern Festival every autumn."], ["chunk-c1"]),
    "ILSE BRANDT": ("person", ["Ilse Brandt is master of the Guild of Glassblowers."], ["chunk-c1"]),
    "LANTERN FESTIVAL": ("event", ["An autumn festival of lanterns held in Dunmore."], ["chunk-c1"]),
}

RELATIONS = [
    ("MARISOL VANE", "COPPERLEAF OBSERVATORY", "Marisol Vane founded the Copperleaf Observatory.", 9.0, ["chunk-a1"]),
    ("COPPERLEAF OBSERVATORY", "DUNMORE", "The observatory stands above Dunmore.", 5.0, ["chunk-a1"]),
    ("COPPERLEAF OBSERVATORY", "HALVARD", "The observatory follows the comet Halvard.", 7.0, ["chunk-a1"]),
    ("TEODOR KASK", "COPPERLEAF OBSERVATORY", "Teodor Kask is chief engineer of the observatory.", 8.0, ["chunk-b1"]),
    ("TEODOR KASK", "ONDINE", "Teodor Kask built the telescope Ondine.", 9.0, ["chunk-b1"]),
    ("GUILD OF GLASSBLOWERS", "LANTERN FESTIVAL", "The guild holds the Lantern Festival.", 8.0, ["chunk-c1"]),
    ("ILSE BRANDT", "GUILD OF GLASSBLOWERS", "Ilse Brandt is master of the guild.", 8.0, ["chunk-c1"]),
    ("LANTERN FESTIVAL", "DUNMORE", "The festival is held in Dunmore.", 6.0, ["chunk-c1"]),
    ("ILSE BRANDT", "MARISOL VANE", "Ilse Brandt makes a lantern in honour of Marisol Vane.", 4.0, ["chunk-c1"]),
]


def _config(tmp: Any) -> GraphRAGConfig:
    return GraphRAGConfig(working_dir=str(tmp), embedding_func=hash_embedding(64), query_better_than_threshold=-1.0)


async def _build(tmp: Any, docs: dict, entities: dict, relations: list, ratings: Any = None,
                 max_cluster_size: int = 10) -> Stores:
    config = _config(tmp)
    config.max_graph_cluster_size = max_cluster_size
    emb = hash_embedding(64)
    stores = open_stores(config, emb)
    chunks = {}
    for doc_id, doc_chunks in docs.items():
        await stores.full_docs.upsert({doc_id: {"content": " ".join(doc_chunks.values())}})
        for order, (cid, text) in enumerate(doc_chunks.items()):
            chunks[cid] = {"content": text, "tokens": TOKENIZER.count(text),
                           "full_doc_id": doc_id, "chunk_order_index": order}
    await stores.text_chunks.upsert(chunks)
    await stores.chunks_vdb.upsert({cid: {"content": c["content"], "full_doc_id": c["full_doc_id"]}
                                    for cid, c in chunks.items()})
    for name, (etype, descs, sources) in entities.items():
        await stores.graph.upsert_node(name, {"entity_type": etype, "description": SEP.join(descs),
                                              "source_id": SEP.join(sources)})
    for a, b, desc, weight, sources in relations:
        await stores.graph.upsert_edge(a, b, {"weight": weight, "description": desc, "source_id": SEP.join(sources)})
    await stores.graph.clustering("leiden")
    await stores.entities_vdb.upsert({
        f"ent-{i}": {"content": name + " " + " ".join(descs), "entity_name": name}
        for i, (name, (_, descs, _)) in enumerate(entities.items())
    })
    schema = await stores.graph.community_schema()
    reports = {}
    for key, community in schema.items():
        nodes = community["nodes"]
        rating = ratings(key, community) if ratings else float(len(nodes))
        report_json = {
            "title": f"Community of {nodes[0].title()}",
            "summary": " ".join(entities[n][1][0] for n in nodes),
            "rating": rating,
            "rating_explanation": f"{len(nodes)} members.",
            "findings": [{"summary": f"About {n.title()}", "explanation": " ".join(entities[n][1])} for n in nodes],
        }
        reports[key] = {**community, "report_json": report_json,
                        "report_string": render_report_markdown(report_json), "fingerprint": f"fp-{key}"}
    await stores.community_reports.upsert(reports)
    return stores


def small_stores(tmp: Any) -> Stores:
    return asyncio.run(_build(tmp, DOCS, ENTITIES, RELATIONS))


_WORDS = ("amber basalt cobalt delta ember fjord granite harbor island juniper kestrel lagoon meadow nickel "
          "orchard prairie quartz ridge summit tundra upland valley willow xenon yarrow zephyr archive beacon "
          "canal dynamo engine foundry garrison hangar").split()


def large_corpus() -> tuple[dict, dict, list]:
    rnd = random.Random(7)

    def text(n: int) -> str:
        return " ".join(rnd.choice(_WORDS) for _ in range(n)) + "."

    docs: dict[str, dict[str, str]] = {}
    chunk_ids = []
    for d in range(20):
        docs[f"doc-{d}"] = {}
        for c in range(5):
            cid = f"chunk-{d}-{c}"
            docs[f"doc-{d}"][cid] = f"Record {d}.{c}: " + text(350)
            chunk_ids.append(cid)
    names = [f"NODE {i:03d}" for i in range(300)]
    entities = {
        n: ("organization", [f"{n.title()} " + text(120), text(80)], rnd.sample(chunk_ids, 3)) for n in names
    }
    relations = []
    seen = set()
    for i, a in enumerate(names):
        for _ in range(3):
            b = names[(i + rnd.randint(1, 40)) % len(names)]
            key = tuple(sorted((a, b)))
            if key in seen:
                continue
            seen.add(key)
            sources = rnd.sample(entities[a][2] + entities[b][2], 2)
            relations.append((a, b, f"{a.title()} and {b.title()} " + text(60), float(rnd.randint(1, 10)), sources))
    return docs, entities, relations


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    docs, entities, relations = large_corpus()
    tmp = tmp_path_factory.mktemp("big")
    return asyncio.run(_build(tmp, docs, entities, relations, ratings=lambda k, c: float(int(k) % 10)))


def make_llm(server: MockLLMServer) -> LLMClient:
    func = openai_model_func("gpt-4o-mini", base_url=server.base_url, api_key="test-key", timeout=20.0)
    return LLMClient(func, model_id="gpt-4o-mini", max_async=8, usage=UsageCounter(), max_retries=1,
                     backoff_base=0.01, backoff_max=0.1)


def sections(context: str) -> dict[str, str]:
    parts = re.split(r"(?m)^(?=-----(?:Reports|Entities|Relationships|Sources)-----$)", context)
    out = {}
    for p in parts:
        p = p.rstrip("\n")
        if p:
            out[p.split("-----")[1]] = p
    return out


def table_rows(section: str) -> list[list[str]]:
    import csv
    import io

    body = section.split("```csv\n", 1)[1].rsplit("\n```", 1)[0]
    return list(csv.reader(io.StringIO(body)))[1:]


# --------------------------------------------------------------------------- helpers


def test_csv_table_quotes() -> None:
    table = rows_to_csv_table(["id", "text"], [[0, 'say "hi", then\nleave'], [1, "plain"]])
    import csv
    import io

    assert list(csv.reader(io.StringIO(table))) == [["id", "text"], ["0", 'say "hi", then\nleave'], ["1", "plain"]]


@pytest.mark.parametrize("budget", [0, 5, 20, 37, 64, 150, 1000])
def test_pack_csv_section_never_exceeds(budget: int) -> None:
    rows = [[i, f"row {i} " + "lorem ipsum, dolor \"sit\" amet " * (i % 4 + 1)] for i in range(40)]
    text, kept, _ = pack_csv_section("Entities", ["id", "content"], rows, budget, TOKENIZER)
    assert TOKENIZER.count(text) <= budget
    if text:
        assert text.startswith("-----Entities-----\n```csv\nid,content")
        assert len(table_rows(text)) == kept
        if kept < len(rows):  # the next row would not have fit
            assert TOKENIZER.count(csv_section("Entities", ["id", "content"], rows[:kept + 1])) > budget
    joined, n = pack_texts(["alpha beta"] * 30, "\n--New Chunk--\n", budget, TOKENIZER)
    assert TOKENIZER.count(joined) <= budget and (n == 0) == (joined == "")


@pytest.mark.parametrize("encoding", ["gpt-4o", "cl100k_base"])
def test_joined_texts_are_counted_from_their_parts(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Naive's passages (and global's reports) are packed by the count of their join, which is
    each text's count less what changes around the separators: the texts are encoded once and
    the join never whole, and what is kept is the largest prefix whose join fits, as counting
    the join says. Texts without a space between two Latin letters are counted joined."""
    tokenizer = get_tokenizer(encoding)
    rnd = random.Random(11)
    edges = ["", "  ", "\n", "'s", "42", ".", '"', "/", "中文", "é", "—"]

    def text() -> str:
        words = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(2, 40)))
        return rnd.choice(edges) + words + rnd.choice(edges) + rnd.choice(["", " tail", ", more."])

    real = tokenizer.encode
    for separator in ("\n--New Chunk--\n", "\n\n", " ", "/"):
        texts = [text() for _ in range(25)]
        whole = [len(real(separator.join(texts[:k]))) for k in range(len(texts) + 1)]
        for budget in (0, 5, whole[1], whole[7] - 1, whole[7], whole[-1], whole[-1] + 100):
            encoded: list[str] = []
            monkeypatch.setattr(tokenizer, "encode", lambda t: encoded.append(t) or real(t))
            joined, kept = pack_texts(texts, separator, budget, tokenizer)
            monkeypatch.setattr(tokenizer, "encode", real)
            expected = max((k for k in range(1, len(texts) + 1) if whole[k] <= budget), default=0)
            assert kept == expected and joined == separator.join(texts[:kept])
            assert all(len(t) <= max(map(len, texts)) for t in encoded)  # no join of two texts encoded
    unsplit = ["中文的描述。" * 3, "word", "two words"]
    joined, kept = pack_texts(unsplit, "\n\n", 1000, tokenizer)
    assert (joined, kept) == ("\n\n".join(unsplit), 3)
    assert pack_texts(unsplit, "\n\n", len(real("\n\n".join(unsplit[:2]))), tokenizer)[1] == 2


def test_largest_fitting_prefix_is_exact_whatever_the_estimate() -> None:
    """The estimate (an upper guess) only bounds the search and saves counting: the answer
    is the largest fitting prefix up to it, and a right estimate costs at most four counts;
    two where it takes every item and they all fit."""
    rng = random.Random(7)
    words = [" ".join(["word"] * rng.randint(1, 30)) for _ in range(25)]

    class Counting:
        calls = 0

        def count(self, text: str) -> int:
            Counting.calls += 1
            return TOKENIZER.count(text)

    def render(k: int) -> str:
        return "\n".join(words[:k])

    for budget in (0, 5, 40, 120, 400, 10_000):
        fits = [k for k in range(len(words) + 1) if TOKENIZER.count(render(k)) <= budget]
        expected = max(fits) if fits else -1
        for estimate in (None, 0, 1, 2, 3, expected - 3, expected, expected + 2, expected + 5, len(words)):
            if estimate is not None and estimate < 0:
                continue
            k, text = largest_fitting_prefix(len(words), render, budget, TOKENIZER, estimate)
            bounded = expected if estimate is None else min(expected, estimate)
            assert (k, text) == ((bounded, render(bounded)) if expected >= 0 else (-1, ""))
        if 3 <= expected + 2 <= len(words):
            Counting.calls = 0
            largest_fitting_prefix(len(words), render, budget, Counting(), expected + 2)
            assert Counting.calls <= 3 + 1  # render(0), then estimate - 2 upwards
        if expected == len(words):
            Counting.calls = 0
            assert largest_fitting_prefix(len(words), render, budget, Counting(), len(words))[0] == expected
            assert Counting.calls == 2  # render(0), then every item at once


# --------------------------------------------------------------------------- QueryParam


def test_query_param_defaults() -> None:
    p = QueryParam()
    assert p.mode == "global" and p.top_k == 20 and p.level == 2
    assert p.global_special_community_map_llm_kwargs == {"response_format": {"type": "json_object"}}
    assert QueryParam().global_special_community_map_llm_kwargs is not p.global_special_community_map_llm_kwargs


@pytest.mark.parametrize("field,value", [
    ("mode", "mixed"), ("top_k", -1), ("level", -2), ("naive_max_token_for_text_unit", -5),
    ("local_max_token_for_text_unit", -1), ("local_max_token_for_local_context", -1),
    ("local_max_token_for_community_report", -1), ("global_max_consider_community", -1),
    ("global_max_token_for_community_report", -1), ("top_k", "10"),
    ("global_special_community_map_llm_kwargs", None),
])
def test_query_param_rejects_bad_values(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        QueryParam(**{field: value})


# --------------------------------------------------------------------------- local


def test_local_context_holds_entity_relations_and_source(tmp_path: Any) -> None:
    stores = small_stores(tmp_path)
    param = QueryParam(mode="local", top_k=4, only_need_context=True)
    ctx = asyncio.run(build_local_context("Who is Teodor Kask and what did Kask build?", stores, param, TOKENIZER))
    assert ctx is not None
    parts = sections(ctx)
    assert set(parts) == {"Reports", "Entities", "Relationships", "Sources"}
    entities = table_rows(parts["Entities"])
    assert entities[0][1] == "TEODOR KASK" and entities[0][2] == "person"
    assert "TEODOR KASK" in {r[1] for r in entities}
    assert [r[0] for r in entities] == [str(i) for i in range(len(entities))]
    relations = {(r[1], r[2]) for r in table_rows(parts["Relationships"])}
    assert ("ONDINE", "TEODOR KASK") in relations or ("TEODOR KASK", "ONDINE") in relations
    sources = [r[1] for r in table_rows(parts["Sources"])]
    assert any("brass telescope Ondine" in s for s in sources)
    assert "Community of" in parts["Reports"]
    # the public entry point returns the same context without calling any model
    assert asyncio.run(local_query("Who is Teodor Kask and what did Kask build?", stores, param,
                                   llm=None, tokenizer=TOKENIZER)) == ctx


_OTHER_PROCESS = """
import asyncio, json, sys
from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding
from graphrag.operators.query_local import build_local_context
from graphrag.operators.tokenizer import get_tokenizer
from graphrag.query_param import QueryParam
from graphrag.stores import open_stores

working_dir, question, change = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

async def main():
    stores = open_stores(GraphRAGConfig(working_dir=working_dir, embedding_func=hash_embedding(64),
                                        query_better_than_threshold=-1.0), hash_embedding(64))
    if change:
        await stores.index_start()
        for name, description in change["nodes"].items():
            await stores.graph.upsert_node(name, {**await stores.graph.get_node(name), "description": description})
        chunks = await stores.text_chunks.get_by_ids(list(change["chunks"]))
        await stores.text_chunks.upsert({c: {**old, "content": new} for (c, new), old in zip(change["chunks"].items(), chunks)})
        await stores.index_done()
    param = QueryParam(mode="local", top_k=4, only_need_context=True)
    print(json.dumps(await build_local_context(question, stores, param, get_tokenizer("gpt-4o"))))

asyncio.run(main())
"""


def test_local_context_follows_writes_of_this_and_another_process(tmp_path: Any) -> None:
    """What queries keep between them (row lines and token counts per record text, a graph
    lookup's answers per file version) never outlives a write: after this process's write and
    after another process's, the context shows the new texts and is the context a process
    that never queried before builds."""
    import subprocess
    import sys

    question = "Who is Teodor Kask and what did Kask build?"
    param = QueryParam(mode="local", top_k=4, only_need_context=True)
    stores = small_stores(tmp_path)
    asyncio.run(stores.index_done())

    def fresh_process(change: Optional[dict] = None) -> str:
        out = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(tmp_path), question, json.dumps(change)],
                             capture_output=True, text=True, timeout=120, check=True)
        return json.loads(out.stdout)

    def local(on: Stores) -> str:
        context = asyncio.run(build_local_context(question, on, param, TOKENIZER))
        assert context is not None
        return context

    def shown(context: str) -> str:  # the entities and passages (reports are not rewritten by these writes)
        parts = sections(context)
        return parts["Entities"] + parts["Sources"]

    before = shown(local(stores))
    assert "who built the brass telescope Ondine" in before and "Kask built the brass telescope" in before

    async def write() -> None:  # this process: same-length texts, so no size tells them apart
        await stores.index_start()
        node = await stores.graph.get_node("TEODOR KASK")
        await stores.graph.upsert_node("TEODOR KASK", {**node, "description": node["description"].replace(
            "who built the brass telescope Ondine", "who built the steel telescope Ondine")})
        chunk = (await stores.text_chunks.get_by_ids(["chunk-b1"]))[0]
        await stores.text_chunks.upsert({"chunk-b1": {**chunk, "content": chunk["content"].replace(
            "Kask built the brass telescope", "Kask built the steel telescope")}})
        await stores.index_done()

    asyncio.run(write())
    after_ours = local(stores)
    assert "who built the steel telescope Ondine" in shown(after_ours) and "Kask built the steel" in shown(after_ours)
    assert "who built the brass" not in shown(after_ours) and "Kask built the brass" not in shown(after_ours)
    assert after_ours == fresh_process() == local(open_stores(_config(tmp_path), hash_embedding(64)))

    theirs = fresh_process({"nodes": {"TEODOR KASK": "Teodor Kask designed the copper telescope Ondine."},
                            "chunks": {"chunk-b1": "Teodor Kask made the copper telescope Ondine in 1911."}})
    assert "designed the copper telescope" in shown(theirs) and "made the copper telescope" in shown(theirs)
    assert "steel" not in shown(theirs)
    again = open_stores(_config(tmp_path), hash_embedding(64))  # a reader opens the new commit
    assert local(again) == theirs


def test_reports_read_for_a_context_follow_rewrites_and_deletes(tmp_path: Any) -> None:
    """A context reads a report's text and rating through the reports' lookup index, kept per
    version of the file: after a write that rewrites one report and deletes another, the
    writer's context and a newly opened reader's show the new text and not the deleted one,
    and equal the context of a reader that parses the file whole."""
    question = "Who is Teodor Kask and what did Kask build?"
    param = QueryParam(mode="local", top_k=4, only_need_context=True)
    stores = small_stores(tmp_path)
    asyncio.run(stores.index_done())

    def local(on: Stores) -> str:
        context = asyncio.run(build_local_context(question, on, param, TOKENIZER))
        assert context is not None
        return context

    def reports_of(context: str) -> list[str]:
        return [row[1] for row in table_rows(sections(context)["Reports"])]

    reader = open_stores(_config(tmp_path), hash_embedding(64))
    shown = reports_of(local(reader))
    assert reader.community_reports._points() is not None  # read through the lookup index
    keys = asyncio.run(stores.community_reports.all_keys())
    records = dict(zip(keys, asyncio.run(stores.community_reports.get_by_ids(keys))))
    by_text = {r["report_string"]: k for k, r in records.items()}
    assert len(shown) >= 2 and all(text in by_text for text in shown)
    rewritten, deleted = by_text[shown[0]], by_text[shown[1]]

    async def write() -> None:
        await stores.index_start()
        await stores.community_reports.upsert({rewritten: {**records[rewritten],
                                                           "report_string": "# Rewritten\n\nA new text."}})
        await stores.community_reports.delete([deleted])
        await stores.index_done()

    asyncio.run(write())
    ours = local(stores)
    theirs = local(open_stores(_config(tmp_path), hash_embedding(64)))
    assert "# Rewritten\n\nA new text." in reports_of(ours) and shown[0] not in reports_of(ours)
    assert shown[1] not in reports_of(ours)
    os.remove(tmp_path / "kv_store_community_reports.json.index")
    parsed = open_stores(_config(tmp_path), hash_embedding(64))
    assert ours == theirs == local(parsed) and parsed.community_reports._points() is None


def test_local_context_is_the_same_through_lookup_indexes(tmp_path: Any) -> None:
    """A process that opens a working dir answers local queries through the lookup indexes
    of the graph, the reports and the chunks, never parsing those files whole, with the very
    context that parsing them gives. The walk that orders the Sources reads the graph's links
    from the file kept for it (``storage/graph_walk.py``)."""
    stores = asyncio.run(_build(tmp_path, *large_corpus()))
    asyncio.run(stores.index_done())
    questions = ["node 010 amber basalt harbor", "node 123 quartz ridge", "Who is connected to Node 200?"]

    def contexts() -> tuple[list[Any], list[bool]]:
        fresh = open_stores(_config(tmp_path), hash_embedding(64))
        param = QueryParam(mode="local", top_k=40)
        out = [asyncio.run(build_local_context(q, fresh, param, TOKENIZER)) for q in questions]
        return out, [store._points() is not None for store in (fresh.graph, fresh.community_reports,
                                                                fresh.text_chunks)]

    through_lookups, used = contexts()
    assert used == [True, True, True]
    for name in ("graph_chunk_entity_relation.graphml", "kv_store_community_reports.json",
                 "kv_store_text_chunks.json"):
        os.remove(tmp_path / f"{name}.index")
    parsed, used = contexts()
    assert used == [False, False, False]
    assert all(through_lookups) and through_lookups == parsed


@pytest.mark.parametrize("encoding", ["gpt-4o", "cl100k_base"])
def test_a_section_counts_as_the_sum_of_its_lines(encoding: str) -> None:
    """The line-by-line count packing uses equals the count of the whole section, for cells
    that end in quotes, spaces, punctuation or newlines, hold digits after a newline, or are
    not in Latin script: where a line's newline joins the token before it, it is counted there."""
    tokenizer = get_tokenizer(encoding)
    assert tokenizer.counts_add_by_line
    cells = ['plain words', 'a "quoted", cell', 'ends with a space ', 'ends with a newline\n', '1990\n2001 dates',
             'tail//', '```fenced```', '中文的描述。', 'emoji 🙂!', '', '  leading spaces', 'x' * 300, '42']
    rows = [[i, cells[i % len(cells)], cells[(i * 5) % len(cells)], i * 0.5] for i in range(40)]
    count = section_counter("Relationships", ["id", "source", "description", "weight"], rows, tokenizer)
    for k in range(1, len(rows) + 1):
        assert count(k) == tokenizer.count(csv_section("Relationships", ["id", "source", "description", "weight"],
                                                       rows[:k]))


@pytest.mark.parametrize("encoding", ["gpt-4o", "cl100k_base"])
def test_a_passage_row_is_encoded_once_for_its_cost_and_its_line(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row ending in punctuation (a quoted passage's closing quote, a full stop) is counted
    alone for its cost and with its newline for the section: its text before that punctuation
    is encoded once for both, and both counts are the whole texts' counts, whatever the ending
    (after letters, digits, apostrophes, spaces, other scripts, newlines)."""
    tokenizer = get_tokenizer(encoding)
    endings = ['a "quoted", passage.', "ends in a digit 42.", "O'Brien's", "ends in a quote'", 'spaced "',
               'café."', '中文。"', "why?!)", "newline\n.", "dots...", "slash//", "x", '"', "", "12,5;"]
    rows = [[i, f"{ending} {i}" if i % 2 else f"passage {i}, {ending}"] for i, ending in enumerate(endings * 2)]
    encoded: list[str] = []
    real = tokenizer.encode
    monkeypatch.setattr(tokenizer, "encode", lambda text: encoded.append(text) or real(text))
    count = section_counter("Sources", ["id", "content"], rows, tokenizer)
    costs = [row_cost(row, tokenizer) for row in rows]
    assert count(len(rows)) == len(real(csv_section("Sources", ["id", "content"], rows)))
    for row, cost in zip(rows, costs):
        assert cost == len(real(rows_to_csv_table([], [row])))
    long_texts = [text for text in encoded if len(text) > 12]
    assert len(long_texts) == len(set(long_texts))  # no text counted twice
    # Counted both alone and with the newline: only rows whose ending the pre-tokenizers may join
    # to the text before it (no ASCII letter or digit before the trailing punctuation).
    both = [text for text in long_texts if text + "\n" in long_texts]
    punctuation = "".join(c for c in string.punctuation if c != "'")
    assert both and all(not (text.rstrip(punctuation)[-1:].isascii() and text.rstrip(punctuation)[-1:].isalnum())
                        for text in both)
    assert len(both) < len(endings)


def _csv_reference(rows: list[list[Any]]) -> str:
    """What one csv writer writes for ``rows`` (cells as packing renders them), trailing newlines cut."""
    import csv
    import io

    def cell(v: Any) -> str:
        return "" if v is None else str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    for row in rows:
        writer.writerow([cell(v) for v in row])
    return buf.getvalue().rstrip("\n")


def test_rows_are_written_as_the_csv_module_writes_them() -> None:
    """Rows are joined as strings, not through a csv writer each: the same text for cells with
    commas, quotes, newlines, carriage returns, spaces, other scripts, empty cells, any count."""
    rnd = random.Random(5)
    alphabet = "ab ,\"'\n\r\t;|\\é中\x85\u2028"
    for _ in range(3000):
        rows = [[rnd.randint(0, 999)] + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 6)))
                                         for _ in range(rnd.randint(0, 4))] for _ in range(rnd.randint(1, 4))]
        header = ["id"] + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 3)))]
        assert rows_to_csv_table(header, rows) == _csv_reference([header, *rows])


@pytest.mark.parametrize("encoding", ["gpt-4o", "cl100k_base"])
def test_a_row_counts_as_its_number_plus_the_rest(encoding: str) -> None:
    """Rows are rendered and counted from their text after the number, kept per record: the
    table is what one csv writer writes, and each row's count is the whole row's, for numbers
    of any length and cells starting with digits, commas, quotes, spaces or other scripts.
    Cells equal as values but not as text (``True`` and ``1``, ``1.0`` and ``1``) stay apart."""
    tokenizer = get_tokenizer(encoding)
    cells = ['plain words', '"quoted" first', ',comma first', ' space first', '1990 starts with digits', '12,5', 'café',
             '中文的描述。', 'emoji 🙂!', '', 'ends with a newline\n', True, 1, 1.0, 2.5, None, 'x' * 300]
    numbers = [0, 7, 42, 999, 1000, 1234, 100000]
    rows: list[list[Any]] = [[numbers[i % len(numbers)], cells[i % len(cells)], cells[(i * 7 + 3) % len(cells)]]
                             for i in range(len(cells) * 3)]
    numbered = len(rows)  # sections hold numbered rows only (section_counter)
    rows += [[5, ""], [5], [], [""], ["text first", 1], [True, "a bool first"], [2.0, "a float first"]]
    for row in rows:
        whole = rows_to_csv_table([], [row])
        assert whole == "\n" + _csv_reference([row]) if row else whole == ""
        assert row_cost(row, tokenizer) == len(tokenizer.encode(whole))
    header = ["id", "a", "b"]
    assert rows_to_csv_table(header, rows) == _csv_reference([header, *rows])
    for k in (1, 10, numbered):
        text = csv_section("Entities", header, rows[:k])
        assert section_counter("Entities", header, rows, tokenizer)(k) == len(tokenizer.encode(text))


@pytest.mark.parametrize("budget", [0, 12, 40, 300, 5000])
def test_a_packed_section_reports_its_own_tokens(budget: int) -> None:
    """The count a packed section comes with is its text's, whether rows were kept whole, the
    first row was cut to fit, or nothing fit."""
    rnd = random.Random(budget)
    rows = [[i, f"NAME {i}", " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(3, 60))), i * 3]
            for i in range(30)]
    text, kept, tokens = pack_csv_section("Entities", ["id", "entity", "description", "rank"], rows, budget,
                                          TOKENIZER, cut_column=2)
    assert tokens == len(TOKENIZER.encode(text)) <= max(budget, 0)


def test_text_cache_keeps_the_recently_used_within_its_size() -> None:
    """Entries past the size go least recently used first; one larger than the whole size is
    computed but not kept."""
    computed: list[str] = []

    def value(key: str) -> Any:
        return lambda: computed.append(key) or key.upper()

    cache: TextCache[str, str] = TextCache(10, lambda key, _: len(key))
    for key in ("aaa", "bbb", "ccc"):
        assert cache.get(key, value(key)) == key.upper()
    assert cache.get("aaa", value("aaa")) == "AAA" and computed == ["aaa", "bbb", "ccc"]  # kept: not computed again
    cache.get("dddd", value("dddd"))  # 13 in all: the least recently used ("bbb") goes
    assert cache.bytes <= 10 and len(cache) == 3
    cache.get("bbb", value("bbb"))
    assert computed[-1] == "bbb"
    cache.get("x" * 11, value("x" * 11))
    assert len(cache) == 3 and cache.bytes <= 10
    cache.get("x" * 11, value("x" * 11))
    assert computed.count("x" * 11) == 2
    # peek: the kept value without computing one, and it counts as a use.
    assert cache.peek("zz") is None and cache.peek("ccc") is None and cache.peek("aaa") == "AAA"
    cache.get("ee", value("ee"))  # the least recently used goes: "dddd", not the peeked "aaa"
    assert cache.peek("aaa") == "AAA" and cache.peek("dddd") is None and "zz" not in computed


@pytest.mark.parametrize("budget", [0, 30, 200, 900, 5000])
def test_sections_read_in_rank_order_only_until_full(budget: int) -> None:
    """Reading batch by batch until packing stops short gives exactly the section that
    packing every row gives, and reads only what it must."""
    rnd = random.Random(budget)
    texts = [" ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(5, 120))) for _ in range(100)]
    ids = [str(i) for i in range(len(texts))]
    read: list[str] = []

    async def fetch(batch: list[str]) -> list[tuple[str, list[str]]]:
        read.extend(batch)
        return [(i, [texts[int(i)]]) for i in batch if int(i) % 7]  # some records are missing

    got = asyncio.run(pack_while_reading("Sources", SOURCE_HEADER, doubling_slices(ids), fetch, budget,
                                          TOKENIZER))
    present = [(i, t) for i, t in zip(ids, texts) if int(i) % 7]
    expected = pack_csv_section("Sources", SOURCE_HEADER, [[n, t] for n, (_, t) in enumerate(present)], budget,
                                TOKENIZER, cut_column=1)
    assert got == (expected[0], [i for i, _ in present[:expected[1]]])  # the section, and the items it holds
    assert read == ids[:len(read)]  # in rank order, never skipping one
    if expected[1] < 20:
        assert len(read) < len(ids)  # stopped early


def test_packing_splits_each_row_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row's number and rest are split once for its cost, the section's count and the text,
    in a section packed whole and in one read batch by batch; the sections are unchanged."""
    from graphrag.operators import query_context

    rnd = random.Random(3)
    rows = [[i, " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(5, 60)))] for i in range(60)]
    expected = pack_csv_section("Sources", SOURCE_HEADER, rows, 900, TOKENIZER, cut_column=1)
    split: list[str] = []
    numbered = query_context._numbered

    def counted(row: Any) -> Any:
        split.append(row[1])
        return numbered(row)

    monkeypatch.setattr(query_context, "_numbered", counted)
    assert pack_csv_section("Sources", SOURCE_HEADER, rows, 900, TOKENIZER, cut_column=1) == expected
    assert split and len(split) == len(set(split))

    async def fetch(batch: list[list[Any]]) -> list[tuple[int, list[str]]]:
        return [(row[0], row[1:]) for row in batch]

    split.clear()
    got = asyncio.run(pack_while_reading("Sources", SOURCE_HEADER, doubling_slices(rows), fetch, 900, TOKENIZER))
    assert got[0] == expected[0] and len(got[1]) == expected[1]
    assert split and len(split) == len(set(split))


@pytest.mark.parametrize("single", [False, True])
def test_local_reports_ranked_by_shared_entities_then_rating(big: Stores, single: bool) -> None:
    """Reports read group by group give the section of all reports sorted by how many
    retrieved entities share the community, then rating."""
    param = QueryParam(mode="local", top_k=40, local_community_single_one=single,
                       local_max_token_for_community_report=10**6)
    q = "node 050 cobalt delta ember"
    ctx = asyncio.run(build_local_context(q, big, param, TOKENIZER))
    entities = asyncio.run(_find_entities(q, big, param))
    counts: dict[str, int] = {}
    for e in entities:
        for cid in dict.fromkeys(_clusters(e["data"], param.level)):
            counts[cid] = counts.get(cid, 0) + 1
    reports = [(c, r) for c, r in zip(counts, asyncio.run(big.community_reports.get_by_ids(list(counts)))) if r]
    reports.sort(key=lambda item: (-counts[item[0]], -stored_rating(item[1])))
    assert len({counts[c] for c, _ in reports}) > 1 and len({stored_rating(r) for _, r in reports}) > 1
    rows = [[i, r["report_string"]] for i, (_, r) in enumerate(reports[:1] if single else reports)]
    expected, kept, _ = pack_csv_section("Reports", ["id", "content"], rows, 10**6, TOKENIZER, cut_column=1)
    assert sections(ctx)["Reports"] == expected
    assert kept == len(rows)  # the whole order is compared (where reading stops is tested above)


@pytest.mark.parametrize("budget", [300, 1500, 10**6])
def test_local_relations_read_by_rank_only_until_full(big: Stores, budget: int, monkeypatch: Any) -> None:
    """The Relationships section is the packing of every relation of the entities sorted by
    rank, then weight (ties in order of first appearance), whatever the budget; a relation's
    data is read only for the rank groups packing reaches (the data of relations between two
    retrieved entities, which ranks the Sources, aside)."""
    param = QueryParam(mode="local", top_k=40, local_max_token_for_local_context=budget)
    q = "node 050 cobalt delta ember"
    read: list[tuple[str, str]] = []
    get_edges = big.graph.get_edges_batch

    async def counted(pairs: list[tuple[str, str]]) -> list[Any]:
        read.extend(pairs)
        return await get_edges(pairs)

    monkeypatch.setattr(big.graph, "get_edges_batch", counted)
    ctx = sections(asyncio.run(build_local_context(q, big, param, TOKENIZER)))
    monkeypatch.undo()
    entities = asyncio.run(_find_entities(q, big, param))
    names = [e["entity_name"] for e in entities]
    keys = list(dict.fromkeys(tuple(sorted(e)) for edges in asyncio.run(big.graph.get_nodes_edges_batch(names))
                              for e in edges))
    ranks = asyncio.run(big.graph.edge_degrees_batch(keys))
    datas = asyncio.run(big.graph.get_edges_batch(keys))
    relations = sorted(((k, d, r) for k, d, r in zip(keys, datas, ranks) if d is not None),
                       key=lambda x: (-x[2], -float(x[1]["weight"])))
    assert len(set(ranks)) > 1 and any(  # both orders matter here: ranks, and weights within one
        a[2] == b[2] and a[1]["weight"] != b[1]["weight"] for a, b in zip(relations, relations[1:]))
    rows = [[i, a, b, d["description"], float(d["weight"]), r] for i, ((a, b), d, r) in enumerate(relations)]
    expected, kept, _ = pack_csv_section("Relationships", RELATION_HEADER, rows, budget - TOKENIZER.count(
        ctx["Entities"]), TOKENIZER, cut_column=3)
    assert ctx["Relationships"] == expected
    inner = {k for k in keys if k[0] in names and k[1] in names}
    by_rank = {k for k in read if k not in inner}
    if kept < len(rows) // 2:
        assert len(by_rank) < len(keys) - len(inner)  # stopped early
    assert {k for k, _, _ in relations[:kept]} <= set(read)


def test_local_single_community_and_level(tmp_path: Any) -> None:
    stores = small_stores(tmp_path)
    q = "Ilse Brandt and the Lantern Festival of Dunmore"
    one = asyncio.run(build_local_context(q, stores, QueryParam(mode="local", local_community_single_one=True),
                                          TOKENIZER))
    assert len(table_rows(sections(one)["Reports"])) == 1
    every = asyncio.run(build_local_context(q, stores, QueryParam(mode="local"), TOKENIZER))
    assert len(table_rows(sections(every)["Reports"])) >= 1


def test_local_sources_ranked_by_links_to_retrieved_entities(tmp_path: Any) -> None:
    stores = small_stores(tmp_path)
    # chunk-c1 is the source of most relations among these entities.
    q = "Guild of Glassblowers Ilse Brandt Lantern Festival Marisol Vane"
    ctx = asyncio.run(build_local_context(q, stores, QueryParam(mode="local", top_k=4), TOKENIZER))
    first = table_rows(sections(ctx)["Sources"])[0][1]
    assert first.startswith("Every autumn the Guild of Glassblowers")


def test_local_query_calls_llm_once_with_context(tmp_path: Any, llm_server: MockLLMServer) -> None:
    stores = small_stores(tmp_path)
    llm = make_llm(llm_server)
    answer = asyncio.run(local_query("What did Teodor Kask build?", stores,
                                     QueryParam(mode="local", response_type="One sentence"),
                                     llm=llm, tokenizer=TOKENIZER))
    assert answer
    reqs = llm_server.chat_requests
    assert len(reqs) == 1
    system, user = reqs[0]["messages"][0]["content"], reqs[0]["messages"][1]["content"]
    assert user == "What did Teodor Kask build?"
    assert "TEODOR KASK" in system and "One sentence" in system and "-----Sources-----" in system


def test_local_budgets_on_large_corpus(big: Stores) -> None:
    param = QueryParam(mode="local", top_k=60, local_max_token_for_local_context=1500,
                       local_max_token_for_text_unit=900, local_max_token_for_community_report=700)
    ctx = asyncio.run(build_local_context("node 010 amber basalt harbor", big, param, TOKENIZER))
    parts = sections(ctx)
    budgets = {"Reports": 700, "Sources": 900, "Entities": 750}
    for name, budget in budgets.items():
        assert name in parts, name
        assert 0 < TOKENIZER.count(parts[name]) <= budget, name
        assert len(table_rows(parts[name])) >= 1, name
    ent = TOKENIZER.count(parts["Entities"])
    rel = TOKENIZER.count(parts["Relationships"])
    assert ent + rel <= 1500
    # every section was cut: the corpus holds far more than the budgets
    assert len(table_rows(parts["Entities"])) < 60
    assert 1 <= len(table_rows(parts["Relationships"])) < 100
    assert len(table_rows(parts["Sources"])) < 20


def test_local_default_budgets_on_large_corpus(big: Stores) -> None:
    param = QueryParam(mode="local", top_k=200)
    ctx = asyncio.run(build_local_context("node 123 quartz ridge", big, param, TOKENIZER))
    parts = sections(ctx)
    assert TOKENIZER.count(parts["Reports"]) <= param.local_max_token_for_community_report
    assert TOKENIZER.count(parts["Sources"]) <= param.local_max_token_for_text_unit
    assert TOKENIZER.count(parts["Entities"]) <= param.local_max_token_for_local_context // 2
    assert (TOKENIZER.count(parts["Entities"]) + TOKENIZER.count(parts["Relationships"])
            <= param.local_max_token_for_local_context)


@pytest.mark.parametrize("budget", [0, 15, 40, 120, 400])
def test_local_tiny_budgets_never_exceeded(big: Stores, budget: int) -> None:
    param = QueryParam(mode="local", top_k=30, local_max_token_for_local_context=budget,
                       local_max_token_for_text_unit=budget, local_max_token_for_community_report=budget)
    ctx = asyncio.run(build_local_context("node 200 summit", big, param, TOKENIZER))
    parts = sections(ctx)
    for name in ("Reports", "Sources"):
        assert TOKENIZER.count(parts.get(name, "")) <= budget, name
    ent = TOKENIZER.count(parts.get("Entities", ""))
    assert ent <= budget // 2
    assert ent + TOKENIZER.count(parts.get("Relationships", "")) <= budget
    if budget >= 120:  # the best row of each section is kept, cut short if it must be
        for name in ("Reports", "Sources", "Entities", "Relationships"):
            assert len(table_rows(parts[name])) >= 1, name


# --------------------------------------------------------------------------- global


def test_global_groups_fit_budget_and_map_once_per_group(big: Stores, llm_server: MockLLMServer) -> None:
    param = QueryParam(mode="global", global_max_token_for_community_report=2500, level=1)
    groups = asyncio.run(build_global_context("What are the main themes?", big, param, TOKENIZER))
    assert groups and len(groups) >= 3
    for g in groups:
        assert TOKENIZER.count(g) <= 2500
    ctx = asyncio.run(global_query("What are the main themes?", big, QueryParam(
        mode="global", global_max_token_for_community_report=2500, level=1, only_need_context=True),
        llm=None, tokenizer=TOKENIZER))
    assert ctx == "\n\n".join(groups)

    llm = make_llm(llm_server)
    answer = asyncio.run(global_query("What are the main themes?", big, param, llm=llm, tokenizer=TOKENIZER))
    assert answer and answer != fail_response()
    assert llm_server.calls_by_kind["global_map"] == len(groups)
    assert llm_server.calls_by_kind["answer"] == 1
    prompts_sent = [(r, prompt_of(r)) for r in llm_server.chat_requests]
    maps = [r for r, (name, _) in prompts_sent if name == "global_map_rag_points"]
    assert len(maps) == len(groups)
    assert all(r.get("response_format") == {"type": "json_object"} for r in maps)
    assert all(r["messages"][-1]["content"] == "What are the main themes?" for r in maps)
    reduce = [data for _, (name, data) in prompts_sent if name == "global_reduce_rag_response"]
    assert len(reduce) == 1
    report_data = reduce[0]["report_data"]
    assert "----Analyst 0----" in report_data or "----Analyst 1----" in report_data
    assert "Importance Score:" in report_data


def test_global_tables_are_tokenised_once_per_state_of_the_reports(big: Stores) -> None:
    """The report tables do not depend on the question: a second global query over the same
    reports counts no tokens, and a changed report is seen at once."""

    class Counting:
        calls = 0

        def count(self, text: str) -> int:
            Counting.calls += 1
            return TOKENIZER.count(text)

        def truncate(self, text: str, max_tokens: int) -> str:
            Counting.calls += 1
            return TOKENIZER.truncate(text, max_tokens)

    tokenizer = Counting()
    param = QueryParam(mode="global", global_max_token_for_community_report=2500, level=1)
    first = asyncio.run(build_global_context("What are the main themes?", big, param, tokenizer))
    assert Counting.calls > 0
    Counting.calls = 0
    assert asyncio.run(build_global_context("Who matters most?", big, param, tokenizer)) == first
    assert Counting.calls == 0

    key = next(iter(asyncio.run(big.community_reports.all_keys())))
    record = asyncio.run(big.community_reports.get_by_id(key))
    asyncio.run(big.community_reports.upsert({key: {**record, "report_string": "# A rewritten report"}}))
    try:
        again = asyncio.run(build_global_context("Who matters most?", big, param, tokenizer))
        assert Counting.calls > 0 and again != first and "A rewritten report" in "".join(again)
    finally:
        asyncio.run(big.community_reports.upsert({key: record}))


def test_global_overlong_reports_are_cut_not_dropped(big: Stores) -> None:
    param = QueryParam(global_max_token_for_community_report=150, level=0, global_max_consider_community=20)
    groups = asyncio.run(build_global_context("q", big, param, TOKENIZER))
    assert groups
    assert all(TOKENIZER.count(g) <= 150 for g in groups)
    reports = asyncio.run(big.community_reports.get_by_ids(asyncio.run(big.community_reports.all_keys())))
    assert sum(len(table_rows(g)) for g in groups) == min(20, sum(1 for r in reports if r["level"] == 0))
    assert len(groups) == sum(len(table_rows(g)) for g in groups)  # each report alone, cut to fit


def test_global_rating_filter_level_and_limit(big: Stores) -> None:
    async def run(param: QueryParam) -> str:
        return await build_global_context("q", big, param, TOKENIZER)

    all_reports = asyncio.run(big.community_reports.get_by_ids(asyncio.run(big.community_reports.all_keys())))
    groups = asyncio.run(run(QueryParam(global_min_community_rating=9.0, level=5)))
    expected = sum(1 for r in all_reports if r["report_json"]["rating"] >= 9.0)
    assert sum(len(table_rows(g)) for g in groups) == expected
    groups = asyncio.run(run(QueryParam(global_max_consider_community=3, level=5)))
    assert sum(len(table_rows(g)) for g in groups) == 3
    groups = asyncio.run(run(QueryParam(level=0)))
    assert sum(len(table_rows(g)) for g in groups) == sum(1 for r in all_reports if r["level"] == 0)


def test_global_no_positive_points_gives_fail_response(tmp_path: Any, llm_server: MockLLMServer) -> None:
    stores = small_stores(tmp_path)
    llm_server.responder = lambda req: '```json\n{"points": [{"description": "Nothing relevant.", "score": "0"}]}\n```'
    answer = asyncio.run(global_query("What is the airspeed of a swallow?", stores, QueryParam(),
                                      llm=make_llm(llm_server), tokenizer=TOKENIZER))
    assert answer == fail_response()
    assert llm_server.calls_by_kind["answer"] == 0
    assert llm_server.calls_by_kind["global_map"] >= 1


def test_global_small_corpus_reduce_sees_points(tmp_path: Any, llm_server: MockLLMServer) -> None:
    stores = small_stores(tmp_path)
    llm_server.responder = lambda req: (
        "Sure! Here are the points:\n" + json.dumps([{"description": "Kask built Ondine.", "score": "80"},
                                                     {"description": "Irrelevant.", "score": 0}])
        if '"points"' in req["messages"][0]["content"] else "Final answer.")
    answer = asyncio.run(global_query("Who built Ondine?", stores, QueryParam(),
                                      llm=make_llm(llm_server), tokenizer=TOKENIZER))
    assert answer == "Final answer."
    reduce = llm_server.chat_requests[-1]["messages"][0]["content"]
    assert "Importance Score: 80\nKask built Ondine." in reduce and "Irrelevant." not in reduce


@pytest.mark.parametrize("text,expected", [
    ('{"points": [{"description": "a", "score": 70}]}', [("a", 70.0)]),
    ('```json\n{"points": [{"description": "a", "score": "55"}]}\n```', [("a", 55.0)]),
    ('Here you go:\n[{"description": "b", "score": "9/10"}, {"description": "", "score": 3}]', [("b", 9.0)]),
    ('{"description": "c", "score": 4}', [("c", 4.0)]),
    ('{"items": ["d"]}', [("d", 1.0)]),
    ("not json at all", []),
    ('{"points": "broken"', []),
])
def test_parse_points_is_tolerant(text: str, expected: list) -> None:
    assert [(p["description"], p["score"]) for p in parse_points(text)] == expected


# --------------------------------------------------------------------------- naive


def test_naive_finds_answer_chunk(tmp_path: Any, llm_server: MockLLMServer) -> None:
    stores = small_stores(tmp_path)
    q = "brass telescope salvaged ship lenses"
    ctx = asyncio.run(build_naive_context(q, stores, QueryParam(mode="naive", top_k=1), TOKENIZER))
    assert ctx is not None and "brass telescope Ondine" in ctx
    answer = asyncio.run(naive_query(q, stores, QueryParam(mode="naive", top_k=2),
                                     llm=make_llm(llm_server), tokenizer=TOKENIZER))
    assert answer
    assert len(llm_server.chat_requests) == 1
    assert "brass telescope Ondine" in llm_server.chat_requests[0]["messages"][0]["content"]


def test_naive_budget_on_large_corpus(big: Stores) -> None:
    param = QueryParam(mode="naive", top_k=50, naive_max_token_for_text_unit=1200)
    ctx = asyncio.run(build_naive_context("amber basalt cobalt", big, param, TOKENIZER))
    assert ctx and TOKENIZER.count(ctx) <= 1200
    assert 1 <= ctx.count("Record ") < 50


def test_naive_without_chunk_store(tmp_path: Any) -> None:
    config = GraphRAGConfig(working_dir=str(tmp_path), embedding_func=hash_embedding(64), enable_naive_rag=False)
    stores = open_stores(config, hash_embedding(64))
    out = asyncio.run(naive_query("q", stores, QueryParam(mode="naive"), llm=None, tokenizer=TOKENIZER))
    assert "enable_naive_rag=True" in out


# --------------------------------------------------------------------------- all modes


def test_only_need_context_makes_no_llm_call(tmp_path: Any, llm_server: MockLLMServer) -> None:
    stores = small_stores(tmp_path)
    llm = make_llm(llm_server)
    runners = {"local": local_query, "global": global_query, "naive": naive_query}
    for mode, run in runners.items():
        out = asyncio.run(run("Who founded the Copperleaf Observatory?", stores,
                              QueryParam(mode=mode, only_need_context=True), llm=llm, tokenizer=TOKENIZER))
        assert out and out != fail_response(), mode
    assert llm_server.requests == []
    assert llm.usage.total()["calls"] == 0


def test_empty_stores_answer_clearly(tmp_path: Any, llm_server: MockLLMServer) -> None:
    stores = open_stores(_config(tmp_path), hash_embedding(64))
    llm = make_llm(llm_server)
    runners = {"local": local_query, "global": global_query, "naive": naive_query}
    for mode, run in runners.items():
        for only in (False, True):
            out = asyncio.run(run("anything?", stores, QueryParam(mode=mode, only_need_context=only),
                                  llm=llm, tokenizer=TOKENIZER))
            assert out == fail_response(), (mode, only)
    assert llm_server.requests == []
    assert asyncio.run(build_local_context("x", stores, QueryParam(), TOKENIZER)) is None
    assert asyncio.run(build_global_context("x", stores, QueryParam(), TOKENIZER)) is None
    assert asyncio.run(build_naive_context("x", stores, QueryParam(), TOKENIZER)) is None


def test_fit_to_room_shrinks_only_the_modes_budgets_and_keeps_local_proportions():
    from graphrag import QueryParam
    from graphrag.operators.query_context import fit_to_room

    roomy = QueryParam(mode="local")
    assert fit_to_room(roomy, 30000) == roomy  # the defaults fit the default window
    local = fit_to_room(QueryParam(mode="local"), 6008)  # half of 4000 + 4800 + 3200, plus 8
    assert (local.local_max_token_for_text_unit, local.local_max_token_for_local_context,
            local.local_max_token_for_community_report) == (2000, 2400, 1600)
    assert local.naive_max_token_for_text_unit == roomy.naive_max_token_for_text_unit
    naive = fit_to_room(QueryParam(mode="naive"), 5000)
    assert naive.naive_max_token_for_text_unit == 5000 and naive.local_max_token_for_text_unit == 4000
    glob = fit_to_room(QueryParam(mode="global"), 5000)
    assert glob.global_max_token_for_community_report == 5000
