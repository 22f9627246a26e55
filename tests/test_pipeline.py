"""End-to-end indexing pipeline over real HTTP: the openai client talks to the mock server.

A scripted responder answers each extraction prompt with hand-written, deliberately messy
tuple records for the document it recognises, so every entity, edge weight and source
chunk of the resulting graph is known exactly.
"""
from __future__ import annotations

import asyncio
import base64
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np
import pytest

from graphrag.embedding import EmbeddingFunc, hash_embedding
from graphrag.graphrag import GraphRAG
from graphrag.indexing.pipeline import Pipeline
from graphrag.llm import LLMError
from graphrag.operators.chunking import doc_id_for
from graphrag.schema import GRAPH_FIELD_SEP
from graphrag.storage.files import StorageFileError
from mock_llm_server import Fault, MockLLMServer, detect_kind, realistic_responder, recognise

DATA = Path(__file__).parent / "data" / "pipeline"
HARBOUR = (DATA / "harbour.txt").read_text(encoding="utf-8")
GUILD = (DATA / "guild.txt").read_text(encoding="utf-8")
FESTIVAL = (DATA / "festival.txt").read_text(encoding="utf-8")
WEATHER = (DATA / "weather.txt").read_text(encoding="utf-8")
DOCS = [HARBOUR, GUILD, FESTIVAL]

T, R, DONE = "<|>", "##", "<|COMPLETE|>"

# What the "model" reads in each document: (name as written, type as written, description).
ENTITIES: dict[str, list[tuple[str, str, str]]] = {
    "harbour": [
        ("Mara Quill", "person", "Mara Quill is the elected warden of the Saltmere Harbour Trust."),
        ("Saltmere Harbour Trust", "organization", "The Saltmere Harbour Trust keeps the quays of Saltmere in repair."),
        ("SALTMERE", "geo", "Saltmere is a harbour town whose sea wall broke in the winter storms."),
        ("Tobias Fenn", "Person", "Tobias Fenn is a carpenter hired to rebuild the fish market roof."),
    ],
    "guild": [
        ("Tobias Fenn", "person", "Tobias Fenn trains the apprentices of the Lantern Guild in Greyhaven."),
        ("Lantern Guild", "organization", "The Lantern Guild makes the paper lanterns that light the coast road."),
        ("Greyhaven", "geo", "Greyhaven is the coastal town where the Lantern Guild has its hall."),
        ("mara quill", "PERSON", "Mara Quill visited the Guild hall to ask Tobias Fenn for his help."),
    ],
    "festival": [
        ("Lantern Festival", "event", "The Lantern Festival carries light along the coast road each October."),
        ("Tobias Fenn", "organization", "Tobias Fenn led the festival procession with the largest lantern."),
        ("Saltmere", "geo", "Fishing crews from Saltmere met the festival walkers at the harbour gate."),
        ("Greyhaven", "geo", "Greyhaven is where the autumn festival procession sets out every year."),
    ],
}
# (source, target, description, strength as written, strength as read)
RELATIONS: dict[str, list[tuple[str, str, str, str, float]]] = {
    "harbour": [
        ("Mara Quill", "Saltmere Harbour Trust", "Mara Quill leads the Trust.", "high", 8.0),
        ("Saltmere Harbour Trust", "Saltmere", "The Trust repairs the quays.", "7", 7.0),
        ("Mara Quill", "Tobias Fenn", "She hired him.", "5", 5.0),
    ],
    "guild": [
        ("Tobias Fenn", "Lantern Guild", "He is a Guild member.", "9", 9.0),
        ("Lantern Guild", "Greyhaven", "The Guild hall is there.", "moderate", 5.0),
        ("Tobias Fenn", "Mara Quill", "She asked him for help.", "seven", 7.0),
        # Reversed direction, and the Trust has no entity record in this chunk.
        ("Saltmere Harbour Trust", "Mara Quill", "The Trust buys lanterns.", "2", 2.0),
    ],
    "festival": [
        ("Lantern Festival", "Greyhaven", "The festival starts there.", "6", 6.0),
        ("Lantern Festival", "Saltmere", "The festival ends there.", "6", 6.0),
        ("Tobias Fenn", "Lantern Festival", "He led the procession.", "8/10", 8.0),
        ("Saltmere", "Greyhaven", "The towns share a supper.", "weak", 2.0),
    ],
}
# One gleaning turn finds something the first pass missed in the guild notes.
GLEANED = {
    "guild": ([("Coast Road", "geo", "The coast road is lit by the Guild lanterns every autumn.")],
              [("Lantern Guild", "Coast Road", "The Guild lights the road.", "3", 3.0)]),
}
MARKERS = {"harbour": "Saltmere Harbour Ledger", "guild": "Lantern Guild hall in Greyhaven",
           "festival": "A letter about the Lantern Festival", "weather": "A weather diary"}
TEXTS = {"harbour": HARBOUR, "guild": GUILD, "festival": FESTIVAL, "weather": WEATHER}

EXPECTED_EDGES = {
    ("MARA QUILL", "SALTMERE HARBOUR TRUST"): 10.0,
    ("MARA QUILL", "TOBIAS FENN"): 12.0,
    ("SALTMERE", "SALTMERE HARBOUR TRUST"): 7.0,
    ("LANTERN GUILD", "TOBIAS FENN"): 9.0,
    ("GREYHAVEN", "LANTERN GUILD"): 5.0,
    ("COAST ROAD", "LANTERN GUILD"): 3.0,
    ("GREYHAVEN", "LANTERN FESTIVAL"): 6.0,
    ("LANTERN FESTIVAL", "SALTMERE"): 6.0,
    ("LANTERN FESTIVAL", "TOBIAS FENN"): 8.0,
    ("GREYHAVEN", "SALTMERE"): 2.0,
}
EXPECTED_TYPES = {
    "MARA QUILL": "PERSON", "SALTMERE HARBOUR TRUST": "ORGANIZATION", "SALTMERE": "GEO",
    "TOBIAS FENN": "PERSON",  # PERSON twice, ORGANIZATION once
    "LANTERN GUILD": "ORGANIZATION", "GREYHAVEN": "GEO", "LANTERN FESTIVAL": "EVENT", "COAST ROAD": "GEO",
}
# Which documents mention each entity (as an entity record or a relation endpoint).
EXPECTED_SOURCES = {
    "MARA QUILL": {"harbour", "guild"}, "SALTMERE HARBOUR TRUST": {"harbour", "guild"},
    "SALTMERE": {"harbour", "festival"}, "TOBIAS FENN": {"harbour", "guild", "festival"},
    "LANTERN GUILD": {"guild"}, "GREYHAVEN": {"guild", "festival"}, "LANTERN FESTIVAL": {"festival"},
    "COAST ROAD": {"guild"},
}


def _doc_of(text: str) -> Optional[str]:
    for doc, marker in MARKERS.items():
        if marker in text:
            return doc
    return None


def _records(ents: list[tuple[str, str, str]], rels: list[tuple[str, str, str, str, float]]) -> list[str]:
    rows = []
    for i, (name, etype, desc) in enumerate(ents):
        kw = "Entity" if i % 2 else '"entity"'  # capitalised, unquoted keyword now and then
        q = "'" if i % 3 == 2 else '"'
        rows.append(f'({kw}{T}{q}{name}{q}{T}"{etype}"{T}"{desc}")')
    for i, (src, tgt, desc, strength, _) in enumerate(rels):
        src = f"**{src}**" if i % 2 else f'"{src}"'
        rows.append(f'("relationship"{T}{src}{T}"{tgt}"{T}"{desc}"{T}{strength})')
    return rows


def scripted_extraction(doc: str) -> str:
    if doc not in ENTITIES:
        return DONE
    rows = _records(ENTITIES[doc], RELATIONS[doc])
    if doc == "harbour":  # fenced, with a preface
        return "Sure! Here is what I found:\n```text\n" + f"{R}\n".join(rows) + f"\n{DONE}\n```"
    if doc == "festival":  # one broken record the parser must skip
        rows.insert(2, f'("entity"{T}"BROKEN")')
        return f" {R} ".join(rows) + f" {DONE}"
    return f"{R}\n".join(rows) + f"\n{R}\n{DONE}"


def _summary_name(last: str) -> str:
    recognised = recognise(last)
    return recognised[1]["entity_name"].strip() if recognised else "?"


def make_responder(check_answer: str = "NO", extraction: Optional[Callable[[str], str]] = None
                   ) -> Callable[[dict], str]:
    extraction = extraction or scripted_extraction

    def respond(req: dict) -> str:
        kind = detect_kind(req)
        msgs = req.get("messages") or []
        first_user = next((str(m.get("content")) for m in msgs if m.get("role") == "user"), "")
        last = str(msgs[-1].get("content")) if msgs else ""
        if kind == "extraction":
            return extraction(_doc_of(last) or "")
        if kind == "gleaning_continue":
            doc = _doc_of(first_user) or ""
            already = sum(1 for m in msgs if m.get("role") == "assistant") > 1
            if doc in GLEANED and not already:
                return f"{R}\n".join(_records(*GLEANED[doc])) + f"\n{DONE}"
            return DONE
        if kind == "gleaning_check":
            return check_answer
        if kind == "summary":
            return f"Merged account of {_summary_name(last)}."
        return realistic_responder(req)

    return respond


@pytest.fixture
def server() -> Iterator[MockLLMServer]:
    s = MockLLMServer(responder=make_responder())
    s.start()
    try:
        yield s
    finally:
        s.stop()


def make_rag(workdir: Any, server: MockLLMServer, **overrides: Any) -> GraphRAG:
    kwargs: dict[str, Any] = dict(
        working_dir=str(workdir), embedding_func=hash_embedding(64), llm_base_url=server.base_url,
        llm_api_key="k", chunk_token_size=200, chunk_overlap_token_size=20, best_model_max_async=4,
        cheap_model_max_async=4, show_progress=False,
    )
    kwargs.update(overrides)
    return GraphRAG(**kwargs)


def chunks_by_doc(rag: GraphRAG) -> dict[str, list[str]]:
    out = {}
    for doc in rag.list_documents():
        name = next(k for k, text in TEXTS.items() if doc_id_for(text.strip()) == doc["id"])
        record = asyncio.run(rag.stores.full_docs.get_by_id(doc["id"]))
        out[name] = record["chunk_ids"]
    return out


def graph_state(rag: GraphRAG) -> dict[str, Any]:
    g = rag.stores.graph.graph
    return {
        "nodes": {n: dict(d) for n, d in g.nodes(data=True)},
        "edges": {tuple(sorted((a, b))): dict(d) for a, b, d in g.edges(data=True)},
    }


async def _all(store: Any) -> dict[str, Any]:
    keys = await store.all_keys()
    return dict(zip(keys, await store.get_by_ids(keys)))


def kv(store: Any) -> dict[str, Any]:
    return asyncio.run(_all(store))


# --------------------------------------------------------------------------- graph contents


def test_graph_entities_edges_and_reports(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path, server)
    stats = rag.insert(DOCS)
    assert stats["documents_inserted"] == 3 and stats["chunks_inserted"] == 3
    assert stats["malformed_records_skipped"] == 1
    chunk_of = {doc: ids[0] for doc, ids in chunks_by_doc(rag).items()}
    assert all(len(ids) == 1 for ids in chunks_by_doc(rag).values())

    state = graph_state(rag)
    assert set(state["nodes"]) == set(EXPECTED_TYPES)
    for name, data in state["nodes"].items():
        assert data["entity_type"] == EXPECTED_TYPES[name], name
        assert data["source_id"].split(GRAPH_FIELD_SEP) == sorted(chunk_of[d] for d in EXPECTED_SOURCES[name])
    # Descriptions from every chunk that described the entity, in chunk-id order.
    described = {}
    for doc, ents in {**ENTITIES, "guild": ENTITIES["guild"] + GLEANED["guild"][0]}.items():
        for name, _, desc in ents:
            described.setdefault(name.upper(), []).append((chunk_of[doc], desc))
    for name, parts in described.items():
        assert state["nodes"][name]["description"] == GRAPH_FIELD_SEP.join(d for _, d in sorted(parts)), name
    # The Trust is only an endpoint in the guild notes: its description comes from the ledger alone.
    assert state["nodes"]["SALTMERE HARBOUR TRUST"]["description"] == ENTITIES["harbour"][1][2]

    assert {k: d["weight"] for k, d in state["edges"].items()} == EXPECTED_EDGES
    trust_edge = state["edges"][("MARA QUILL", "SALTMERE HARBOUR TRUST")]
    assert trust_edge["source_id"].split(GRAPH_FIELD_SEP) == sorted([chunk_of["harbour"], chunk_of["guild"]])
    assert set(trust_edge["description"].split(GRAPH_FIELD_SEP)) == {
        "Mara Quill leads the Trust.", "The Trust buys lanterns."}

    # Communities: every node with an edge sits in a level-0 community; one report each.
    schema = asyncio.run(rag.stores.graph.community_schema())
    level0 = {n for c in schema.values() if c["level"] == 0 for n in c["nodes"]}
    connected = {n for n in state["nodes"] if rag.stores.graph.graph.degree(n) > 0}
    assert connected == set(state["nodes"]) and connected <= level0
    for name, data in state["nodes"].items():
        assert any(c["level"] == 0 for c in json.loads(data["clusters"])), name
    reports = kv(rag.stores.community_reports)
    assert set(reports) == set(schema) and stats["communities"] == len(schema) >= 1
    assert stats["reports_generated"] == len(schema) == server.calls_by_kind["report"]
    for cid, rec in reports.items():
        report = rec["report_json"]
        assert report["title"] and report["summary"] and report["findings"], cid
        assert isinstance(report["rating"], float)
        assert all(f["summary"] and f["explanation"] for f in report["findings"])
        assert report["title"] in rec["report_string"]
        assert rec["nodes"] == schema[cid]["nodes"]

    # Everything was committed: a fresh instance reads the same graph and reports.
    again = make_rag(tmp_path, server)
    assert graph_state(again) == state
    assert kv(again.stores.community_reports) == reports
    assert len(again.stores.entities_vdb) == len(EXPECTED_TYPES)
    assert len(again.stores.chunks_vdb) == 3


def test_gleaning_turns_are_counted(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path / "one", server, entity_extract_max_gleaning=1)
    stats = rag.insert(DOCS)
    llm = stats["llm"]
    assert llm["extraction"]["calls"] == 3 and llm["gleaning"]["calls"] == 3
    assert server.calls_by_kind["extraction"] == 3 and server.calls_by_kind["gleaning_continue"] == 3
    assert server.calls_by_kind["gleaning_check"] == 0
    assert llm["extraction"]["prompt_tokens"] > 0 and llm["gleaning"]["completion_tokens"] > 0

    server.reset()
    rag = make_rag(tmp_path / "none", server, entity_extract_max_gleaning=0)
    stats = rag.insert(DOCS)
    assert "gleaning" not in stats["llm"] and server.calls_by_kind["gleaning_continue"] == 0
    assert "COAST ROAD" not in rag.stores.graph.graph  # only gleaning found it


@pytest.mark.parametrize("answer, per_chunk", [("YES", 3), ("NO", 2)])
def test_gleaning_loop_follows_the_check(tmp_path: Path, answer: str, per_chunk: int) -> None:
    # max_gleaning=2: continue, check, (continue again only on YES).
    with MockLLMServer(responder=make_responder(check_answer=answer)) as srv:
        rag = make_rag(tmp_path, srv, entity_extract_max_gleaning=2)
        stats = rag.insert(DOCS)
        assert stats["llm"]["extraction"]["calls"] == 3
        assert stats["llm"]["gleaning"]["calls"] == 3 * per_chunk
        assert srv.calls_by_kind["gleaning_check"] == 3
        assert srv.calls_by_kind["gleaning_continue"] == 3 * (per_chunk - 1)
        # Each conversation carries the previous turns.
        checks = [r for r in srv.chat_requests if detect_kind(r) == "gleaning_check"]
        assert all(len(r["messages"]) == 5 for r in checks)


# --------------------------------------------------------------------------- caching


def test_reinserting_costs_nothing(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path / "a", server)
    rag.insert(DOCS)
    state = graph_state(rag)
    paid = len(server.chat_requests)
    assert paid > 0

    stats = rag.insert(DOCS)
    assert stats["documents_already_indexed"] == 3 and stats["documents_inserted"] == 0
    assert stats["chunks_inserted"] == 0 and stats["reports_generated"] == 0
    assert all(s["calls"] == 0 for s in stats["llm"].values())
    assert len(server.chat_requests) == paid

    other = make_rag(tmp_path / "a", server)
    stats = other.insert(list(reversed(DOCS)))
    assert stats["documents_already_indexed"] == 3 and len(server.chat_requests) == paid
    assert graph_state(other) == state

    # A fresh dir seeded with the response cache rebuilds the same index without HTTP calls.
    fresh = tmp_path / "b"
    fresh.mkdir()
    for f in (tmp_path / "a").glob("kv_store_llm_response_cache*"):
        shutil.copy(f, fresh / f.name)
    rebuilt = make_rag(fresh, server)
    stats = rebuilt.insert(DOCS)
    assert len(server.chat_requests) == paid
    assert stats["documents_inserted"] == 3
    assert sum(s["cached"] for s in stats["llm"].values()) == paid
    assert all(s["calls"] == 0 for s in stats["llm"].values())
    assert graph_state(rebuilt) == state


# --------------------------------------------------------------------------- summaries


def test_long_descriptions_are_summarised_by_the_cheap_model(tmp_path: Path, server: MockLLMServer) -> None:
    limit = 20
    rag = make_rag(tmp_path, server, entity_summary_to_max_tokens=limit)
    count = rag.tokenizer.count
    joined: dict[str, list[str]] = {}
    for doc in ENTITIES:
        ents = ENTITIES[doc] + (GLEANED[doc][0] if doc in GLEANED else [])
        for name, _, desc in ents:
            joined.setdefault(name.upper(), []).append(desc)
        rels = RELATIONS[doc] + (GLEANED[doc][1] if doc in GLEANED else [])
        for src, tgt, desc, _, _ in rels:
            a, b = sorted((src.upper(), tgt.upper()))
            joined.setdefault(f"{a}, {b}", []).append(desc)
    sizes = {k: count(GRAPH_FIELD_SEP.join(v)) for k, v in joined.items()}
    assert all(abs(s - limit) >= 3 for s in sizes.values()), sizes  # order of parts cannot matter
    expected = {k for k, s in sizes.items() if s > limit}
    assert expected == {"MARA QUILL", "SALTMERE", "TOBIAS FENN", "GREYHAVEN"}

    stats = rag.insert(DOCS)
    summaries = [r for r in server.chat_requests if detect_kind(r) == "summary"]
    names = [_summary_name(r["messages"][-1]["content"]) for r in summaries]
    assert sorted(names) == sorted(expected)
    assert all(r["model"] == "gpt-4o-mini" and r.get("max_tokens") == limit for r in summaries)
    assert stats["llm"]["summary"]["calls"] == len(expected)
    nodes = graph_state(rag)["nodes"]
    for name in expected:
        assert nodes[name]["description"] == f"Merged account of {name}."
    assert nodes["LANTERN GUILD"]["description"] == ENTITIES["guild"][1][2]
    # Other stages went to the best model.
    assert {r["model"] for r in server.chat_requests if detect_kind(r) != "summary"} == {"gpt-4o"}


def test_clustering_runs_while_descriptions_are_summarised(tmp_path: Path, server: MockLLMServer) -> None:
    """Clustering needs only the structure: it does not wait for the summaries, but the
    community reports and entity vectors do."""
    rag: Any = None
    clustered_before_answer: list[bool] = []

    def clustered() -> bool:
        return any("clusters" in d for _, d in rag.stores.graph.graph.nodes(data=True))

    async def cheap(prompt: str, system_prompt: Any = None, history_messages: Any = None, **kwargs: Any) -> str:
        for _ in range(500):  # a pipeline that clusters only after the summaries would time out here
            if clustered():
                break
            await asyncio.sleep(0.01)
        clustered_before_answer.append(clustered())
        return f"Merged account of {_summary_name(prompt)}."

    rag = make_rag(tmp_path, server, entity_summary_to_max_tokens=20, cheap_model_func=cheap)
    rag.insert(DOCS)
    assert len(clustered_before_answer) == 4 and all(clustered_before_answer)
    nodes = graph_state(rag)["nodes"]
    summarised = {n for n, d in nodes.items() if d["description"].startswith("Merged account of")}
    assert summarised == {"MARA QUILL", "SALTMERE", "TOBIAS FENN", "GREYHAVEN"}
    prompts = " ".join(r["messages"][-1]["content"] for r in server.chat_requests if detect_kind(r) == "report")
    for name in summarised:
        assert f"Merged account of {name}." in prompts
    # The entity's vector was made from its summary: that exact text finds it first.
    hits = asyncio.run(rag.stores.entities_vdb.query("MARA QUILL Merged account of MARA QUILL.", top_k=3))
    assert hits[0]["entity_name"] == "MARA QUILL"


# --------------------------------------------------------------------------- failures


def test_transient_errors_are_retried(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path, server)
    server.inject(Fault.status(429, retry_after=1), Fault.status(500))
    stats = rag.insert(DOCS)
    assert stats["documents_inserted"] == 3
    total = {f: sum(s[f] for s in stats["llm"].values()) for f in ("calls", "retries", "failures")}
    assert total["retries"] == 2 and total["failures"] == 0
    assert len(server.chat_requests) == total["calls"]
    assert set(graph_state(rag)["nodes"]) == set(EXPECTED_TYPES)
    assert {k: d["weight"] for k, d in graph_state(rag)["edges"].items()} == EXPECTED_EDGES


def test_permanent_failure_keeps_the_committed_state(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path, server, llm_max_retries=2)
    rag.insert(HARBOUR)
    before_graph = graph_state(rag)
    before_docs = kv(rag.stores.full_docs)
    before_chunks = kv(rag.stores.text_chunks)
    before_reports = kv(rag.stores.community_reports)
    files_before = sorted(p.name for p in tmp_path.iterdir())

    server.inject(*[Fault.status(500)] * 10)
    with pytest.raises(LLMError) as info:
        rag.insert([GUILD, FESTIVAL])
    assert info.value.stage == "extraction" and "extraction" in str(info.value)
    assert info.value.attempts == 3
    server.reset()

    reopened = make_rag(tmp_path, server)
    assert graph_state(reopened) == before_graph
    assert kv(reopened.stores.full_docs) == before_docs
    assert kv(reopened.stores.text_chunks) == before_chunks
    assert kv(reopened.stores.community_reports) == before_reports
    assert len(reopened.stores.chunks_vdb) == 1
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert not [n for n in leftovers if ".tmp-" in n or n == ".commit-manifest.json"], leftovers
    assert set(files_before) <= set(leftovers)

    # The instance that failed still works, and finishes the job.
    stats = rag.insert([GUILD, FESTIVAL])
    assert stats["documents_inserted"] == 2
    assert set(graph_state(rag)["nodes"]) == set(EXPECTED_TYPES)


# --------------------------------------------------------------------------- limits


def test_in_flight_requests_never_exceed_max_async(tmp_path: Path) -> None:
    paragraphs = [
        f"Captain {name} sailed the {ship} from {port} to Saltmere in {month}, carrying {cargo} "
        f"for the Harbour Trust and letters for the Lantern Guild."
        for name, ship, port, month, cargo in zip(
            ["Ada Brisk", "Ned Harrow", "Ivo Stone", "Lena Marsh", "Orrin Vale", "Pell Drum", "Rue Ashby",
             "Sela Fane", "Tam Corrie", "Uma Reed", "Vic Hollis", "Wren Maddox"],
            ["Gull", "Heron", "Kestrel", "Osprey", "Petrel", "Plover", "Raven", "Swift", "Tern", "Wren",
             "Curlew", "Dunlin"],
            ["Greyhaven", "Northpoint", "Eastmarsh", "Kellstow", "Brindle", "Oakmouth", "Farrow", "Lindale",
             "Pennock", "Rosshaven", "Tidewell", "Underby"],
            ["January", "February", "March", "April", "May", "June", "July", "August", "September",
             "October", "November", "December"],
            ["salt", "timber", "rope", "tar", "wool", "grain", "cider", "slate", "iron", "glass", "cloth", "oil"],
        )
    ]
    text = "\n\n".join(p + " " + p.replace("sailed", "returned with") for p in paragraphs)
    with MockLLMServer(latency=0.05) as srv:
        rag = make_rag(tmp_path, srv, chunk_token_size=100, chunk_overlap_token_size=10,
                       best_model_max_async=3, cheap_model_max_async=3, entity_extract_max_gleaning=0)
        stats = rag.insert(text)
        assert stats["chunks_inserted"] >= 8
        assert srv.calls_by_kind["extraction"] == stats["chunks_inserted"]
        assert 2 <= srv.peak_concurrency <= 3


def _counting_embedding(dim: int, sizes: list[int]) -> EmbeddingFunc:
    inner = hash_embedding(dim)

    async def embed(texts: list[str]) -> np.ndarray:
        sizes.append(len(texts))
        return await inner.func(texts)

    return EmbeddingFunc(embedding_dim=dim, max_token_size=inner.max_token_size, func=embed)


def test_embedding_batches_and_dimension(tmp_path: Path, server: MockLLMServer) -> None:
    sizes: list[int] = []
    rag = make_rag(tmp_path, server, embedding_func=_counting_embedding(64, sizes), embedding_batch_num=4)
    rag.insert(DOCS)
    assert sizes and max(sizes) <= 4 and 4 in sizes
    assert sum(sizes) == len(EXPECTED_TYPES) + 3  # every entity and chunk embedded once

    for name, rows in (("vdb_entities.json", len(EXPECTED_TYPES)), ("vdb_chunks.json", 3)):
        data = json.loads((tmp_path / name).read_text())
        assert data["embedding_dim"] == 64
        matrix = np.frombuffer(base64.b64decode(data["matrix"]), dtype=np.float32)
        assert matrix.size == rows * 64

    with pytest.raises(StorageFileError) as info:
        make_rag(tmp_path, server, embedding_func=hash_embedding(32))
    message = str(info.value)
    assert str(tmp_path) in message and "vdb_" in message and "64" in message and "32" in message


# --------------------------------------------------------------------------- incremental


def test_insert_without_entities_keeps_reports(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path, server)
    rag.insert(DOCS)
    reports = kv(rag.stores.community_reports)
    state = graph_state(rag)
    server.reset()

    stats = rag.insert(WEATHER)
    assert stats["documents_inserted"] == 1 and stats["chunks_inserted"] == 1
    assert stats["entities_changed"] == 0 and stats["reports_generated"] == 0
    assert stats["communities"] == len(reports)
    assert server.calls_by_kind == {"extraction": 1, "gleaning_continue": 1}
    assert kv(rag.stores.community_reports) == reports
    assert graph_state(rag) == state
    assert len(rag.list_documents()) == 4
    reopened = make_rag(tmp_path, server)
    assert kv(reopened.stores.community_reports) == reports


def test_insert_accepts_str_list_and_async(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path, server)
    assert rag.insert(HARBOUR)["documents_inserted"] == 1
    assert rag.insert([GUILD, "   ", GUILD])["documents_inserted"] == 1
    assert rag.last_insert_stats["documents_skipped_empty"] == 1

    async def main() -> dict[str, Any]:
        return await rag.ainsert([FESTIVAL, HARBOUR])

    stats = asyncio.run(main())
    assert stats["documents_inserted"] == 1 and stats["documents_already_indexed"] == 1
    assert rag.last_insert_stats is stats
    assert set(graph_state(rag)["nodes"]) == set(EXPECTED_TYPES)
    assert {k: d["weight"] for k, d in graph_state(rag)["edges"].items()} == EXPECTED_EDGES


def test_report_failure_rolls_back_and_rerun_reuses_paid_answers(tmp_path: Path) -> None:
    failing = {"on": True}
    base = make_responder()

    def respond(req: dict) -> str:
        if failing["on"] and detect_kind(req) == "report":
            raise RuntimeError("report model down")  # the mock answers 500
        return base(req)

    with MockLLMServer(responder=respond) as srv:
        rag = make_rag(tmp_path, srv, llm_max_retries=1)
        with pytest.raises(LLMError) as info:
            rag.insert(DOCS)
        assert info.value.stage == "report" and "report" in str(info.value)
        assert srv.calls_by_kind["extraction"] == 3
        reopened = make_rag(tmp_path, srv)
        assert reopened.list_documents() == [] and graph_state(reopened)["nodes"] == {}
        assert kv(reopened.stores.community_reports) == {}

        failing["on"] = False
        srv.reset()
        stats = rag.insert(DOCS)
        # Extraction and gleaning answers were kept in the cache journal: only reports are asked.
        assert set(srv.calls_by_kind) == {"report"}
        assert stats["llm"]["extraction"] == {**stats["llm"]["extraction"], "calls": 0, "cached": 3}
        assert stats["reports_generated"] == stats["communities"] == srv.calls_by_kind["report"]
        assert {k: d["weight"] for k, d in graph_state(rag)["edges"].items()} == EXPECTED_EDGES


def stored_vectors(store: Any) -> dict[str, list[float]]:
    """A committed vector file's vectors by id, read as nano-vectordb writes it."""
    import base64
    import json

    with open(store.path_for(f"vdb_{store.namespace}.json"), encoding="utf-8") as f:
        stored = json.load(f)
    matrix = np.frombuffer(base64.b64decode(stored["matrix"]), dtype=np.float32).reshape(-1, stored["embedding_dim"])
    return {d["__id__"]: np.round(matrix[i], 5).tolist() for i, d in enumerate(stored["data"])}


def test_merging_ahead_of_the_last_extractions_changes_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    """Chunks extracted while the last calls are in flight are merged meanwhile; the index
    must be the one a single merge after extraction makes (realistic, messy answers)."""
    docs = [HARBOUR + "\n\n" + GUILD, FESTIVAL + "\n\n" + WEATHER]
    with MockLLMServer(responder=realistic_responder) as srv:
        # 12 slots: the last 3 chunks are left for after extraction, and they name entities.
        small = dict(chunk_token_size=40, chunk_overlap_token_size=8, entity_summary_to_max_tokens=30,
                     best_model_max_async=12)
        ahead = make_rag(tmp_path / "ahead", srv, **small)
        ahead.insert(docs)
        stats = ahead.last_insert_stats
        assert "merge_ahead" in stats["stage_seconds"] and stats["chunks_inserted"] >= 8
        assert stats["llm"]["summary"]["calls"] > 0

        extract = Pipeline.extract_chunks

        async def without_merging_ahead(self: Pipeline, chunks: Any, on_extracted: Any = None) -> Any:
            return await extract(self, chunks)

        monkeypatch.setattr(Pipeline, "extract_chunks", without_merging_ahead)
        single = make_rag(tmp_path / "single", srv, **small)
        single.insert(docs)
        assert "merge_ahead" not in single.last_insert_stats["stage_seconds"]
    assert graph_state(ahead) == graph_state(single)
    for name in ("entities_vdb", "chunks_vdb"):
        assert stored_vectors(getattr(ahead.stores, name)) == stored_vectors(getattr(single.stores, name))
    assert kv(ahead.stores.community_reports) == kv(single.stores.community_reports)
    assert stats["llm"] == single.last_insert_stats["llm"]


def test_an_insert_with_work_warms_the_llm_client_up_and_one_without_does_not(tmp_path: Path, server: MockLLMServer,
                                                                             monkeypatch: Any) -> None:
    from graphrag.llm import LLMClient

    warmed: list[str] = []
    warm_up = LLMClient.warm_up

    def recording_warm_up(self: LLMClient) -> None:
        warmed.append(self.model_id)
        warm_up(self)

    monkeypatch.setattr(LLMClient, "warm_up", recording_warm_up)
    rag = make_rag(tmp_path, server)
    rag.insert(DOCS)
    assert sorted(warmed) == ["gpt-4o", "gpt-4o-mini"]
    warmed.clear()
    rag.insert(DOCS)  # nothing new: no client is built
    assert warmed == []


def test_chunk_vectors_are_embedded_while_the_llm_extracts(tmp_path: Path) -> None:
    import time

    events: list[tuple[str, float]] = []
    base = hash_embedding(64)

    async def embed(texts: list[str]) -> np.ndarray:
        events.append(("embed", time.monotonic()))
        return await base.func(texts)

    answer = make_responder()

    async def model(prompt: str, system_prompt: Optional[str] = None, history_messages: Optional[list] = None,
                    **kwargs: Any) -> str:
        await asyncio.sleep(0.05)
        req = {"messages": [*(history_messages or []), {"role": "user", "content": prompt}]}
        if detect_kind(req).startswith(("extraction", "gleaning")):
            events.append(("extraction answer", time.monotonic()))
        return answer(req)

    rag = GraphRAG(working_dir=str(tmp_path), embedding_func=EmbeddingFunc(embedding_dim=64, max_token_size=8192,
                                                                           func=embed),
                   best_model_func=model, cheap_model_func=model, chunk_token_size=120, chunk_overlap_token_size=20,
                   best_model_max_async=2, enable_naive_rag=True, show_progress=False)
    rag.insert(DOCS)
    first_embedding = min(t for kind, t in events if kind == "embed")
    answers = sorted(t for kind, t in events if kind == "extraction answer")
    assert first_embedding < answers[-1]
    # Not before a first chunk is extracted (its extraction and gleaning answered): until
    # then the CPU goes to what the first requests wait for.
    assert first_embedding > answers[1]
    assert len(rag.stores.chunks_vdb) == rag.last_insert_stats["chunks_inserted"]


def test_stores_written_ahead_are_dropped_when_the_reports_fail(tmp_path: Path, monkeypatch: Any) -> None:
    import os
    import threading

    from graphrag.storage.files import TMP_MARKER
    from graphrag.stores import Stores

    written_ahead = threading.Event()
    write_ahead = Stores.write_ahead

    async def recording_write_ahead(self: Stores, names: list[str]) -> None:
        await write_ahead(self, names)
        written_ahead.set()

    monkeypatch.setattr(Stores, "write_ahead", recording_write_ahead)
    base = make_responder()

    def respond(req: dict) -> str:
        if detect_kind(req) == "report":
            assert written_ahead.wait(10)  # fail only once the other stores' files are written
            raise RuntimeError("report model down")
        return base(req)

    with MockLLMServer(responder=respond) as srv:
        rag = make_rag(tmp_path, srv, llm_max_retries=0)
        with pytest.raises(LLMError):
            rag.insert(DOCS)
    names = os.listdir(tmp_path)
    assert not [n for n in names if TMP_MARKER in n]
    assert not [n for n in names if n.endswith((".graphml", ".index")) or n.startswith("vdb_")]
    assert not [n for n in names if n.startswith("kv_store_") and "llm_response_cache" not in n]


def test_same_source_with_new_content_replaces_the_document(tmp_path: Path, server: MockLLMServer) -> None:
    rag = make_rag(tmp_path, server)
    rag.insert([HARBOUR, GUILD], sources=["ledger.txt", "guild.txt"])
    edited = HARBOUR.replace("spring entry", "spring entry, corrected")
    stats = rag.insert(edited, sources=["ledger.txt"])
    assert stats["documents_inserted"] == 1 and stats["documents_removed"] == 1
    docs = {d["source"]: d["id"] for d in rag.list_documents()}
    assert docs == {"ledger.txt": doc_id_for(edited.strip()), "guild.txt": doc_id_for(GUILD.strip())}
    new_chunk = asyncio.run(rag.stores.full_docs.get_by_id(docs["ledger.txt"]))["chunk_ids"][0]
    old_chunk = [c for c in kv(rag.stores.chunk_extractions) if c != new_chunk]
    assert len(old_chunk) == 1  # only the guild chunk besides the new one
    nodes = graph_state(rag)["nodes"]
    assert nodes["SALTMERE"]["source_id"] == new_chunk
    assert all(new_chunk in d["source_id"] or old_chunk[0] in d["source_id"] for d in nodes.values())
    assert len(rag.stores.chunks_vdb) == 2


class _ConcurrencyProbe:
    """An async embedding callable (nano-graphrag style: a plain object with the two
    attributes) that records how many of its calls overlapped."""

    embedding_dim = 32
    max_token_size = 8192

    def __init__(self) -> None:
        self.inner = hash_embedding(self.embedding_dim)
        self.in_flight = 0
        self.peak = 0
        self.calls = 0

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # long enough for every batch gathered meanwhile to start
            return await self.inner.func(texts)
        finally:
            self.in_flight -= 1


def test_embedding_func_max_async_limits_calls_in_flight(tmp_path: Path) -> None:
    probe = _ConcurrencyProbe()
    rag = GraphRAG(working_dir=str(tmp_path / "limited"), extraction="nlp", embedding_func=probe,
                   embedding_batch_num=1, embedding_func_max_async=2, show_progress=False)
    rag.insert(DOCS)
    assert probe.calls > 4 and probe.peak == 2
    assert isinstance(rag.embedding_func, EmbeddingFunc) and rag.embedding_func.embedding_dim == 32

    # The config's limit is the default; a func that carries its own keeps it, unmodified.
    own = EmbeddingFunc(embedding_dim=32, max_token_size=8192, func=_ConcurrencyProbe(), max_async=3)
    rag = GraphRAG(working_dir=str(tmp_path / "own"), extraction="nlp", embedding_func=own, embedding_batch_num=1,
                   embedding_func_max_async=1, show_progress=False)
    rag.insert(DOCS)
    assert rag.embedding_func is own and own.func.peak == 3

    shared = hash_embedding(32)
    GraphRAG(working_dir=str(tmp_path / "shared"), embedding_func=shared, embedding_func_max_async=5)
    assert shared.max_async is None  # the caller's object is left as it was

    with pytest.raises(TypeError, match="embedding_dim"):
        GraphRAG(working_dir=str(tmp_path / "bad"), embedding_func=lambda texts: texts)


def test_report_prompts_fit_the_best_models_window(tmp_path: Path) -> None:
    """``best_model_max_token_size`` bounds a report prompt: the community data shrinks to
    leave room for the prompt's own text and the answer. A window too small for any data
    fails before an LLM call is paid for."""
    from graphrag.windows import ANSWER_TOKENS
    from graphrag.operators.tokenizer import get_tokenizer

    tokenizer = get_tokenizer("gpt-4o")
    answer = make_responder()
    report_prompts: list[str] = []
    calls: list[str] = []

    async def model(prompt: str, system_prompt: Optional[str] = None, history_messages: Optional[list] = None,
                    **kwargs: Any) -> str:
        req = {"messages": [*(history_messages or []), {"role": "user", "content": prompt}]}
        calls.append(detect_kind(req))
        if calls[-1] == "report":
            report_prompts.append(prompt)
        return answer(req)

    def rag(wd: str, window: int) -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path / wd), embedding_func=hash_embedding(32), best_model_func=model,
                        cheap_model_func=model, best_model_max_token_size=window, show_progress=False)

    rag("roomy", 32768).insert(DOCS)
    longest = max(tokenizer.count(p) for p in report_prompts)
    window = longest + ANSWER_TOKENS - 100  # the longest prompt no longer fits as it was
    report_prompts.clear()
    stats = rag("tight", window).insert(DOCS)
    assert stats["reports_generated"] == stats["communities"] == len(report_prompts)
    assert max(tokenizer.count(p) for p in report_prompts) <= window - ANSWER_TOKENS

    calls.clear()
    with pytest.raises(ValueError, match="best_model_max_token_size=2100"):
        rag("tiny", 2100).insert(DOCS)
    assert calls == []


def test_summary_inputs_fit_the_cheap_models_window(tmp_path: Path, monkeypatch: Any) -> None:
    """``cheap_model_max_token_size`` bounds the descriptions a summary prompt carries, beside
    the prompt's own text and the summary; too small a window fails before any call."""
    import graphrag.operators.graph_update as graph_update
    from graphrag.prompts import SEAM_TOKENS, render

    bounds: list[Optional[int]] = []
    rebuild_graph = graph_update.rebuild_graph

    async def recording_rebuild(*args: Any, **kwargs: Any) -> Any:
        bounds.append(kwargs["summary_input_tokens"])
        return await rebuild_graph(*args, **kwargs)

    monkeypatch.setattr(graph_update, "rebuild_graph", recording_rebuild)

    calls: list[str] = []

    async def model(prompt: str, **kwargs: Any) -> str:
        calls.append(prompt)
        return "unused"

    def rag(wd: str, **kw: Any) -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path / wd), embedding_func=hash_embedding(32), best_model_func=model,
                        cheap_model_func=model, show_progress=False, **kw)

    template = rag("t").tokenizer.count(render("summarize_entity_descriptions", entity_name="", description_list=""))
    assert rag("default").windows.summary_input_tokens() == 4000  # max(4 x 500, 4000): the window does not bind
    small = rag("small", cheap_model_max_token_size=1500, entity_summary_to_max_tokens=200)
    assert small.windows.summary_input_tokens() == 1500 - template - 200 - SEAM_TOKENS
    small.insert(DOCS)  # the merge builds summary inputs within that bound
    assert bounds and set(bounds) == {1500 - template - 200 - SEAM_TOKENS}
    calls.clear()
    with pytest.raises(ValueError, match="cheap_model_max_token_size=300"):
        rag("tiny", cheap_model_max_token_size=300, entity_summary_to_max_tokens=100).insert(DOCS)
    assert calls == []


def test_chunks_longer_than_the_best_models_window_allows_fail_before_any_call(tmp_path: Path) -> None:
    """An extraction prompt carries a whole chunk; chunks too long for the window beside the
    prompt's text stop the insert before extraction, naming chunk_token_size, and leave the
    working dir as it was."""
    calls: list[str] = []
    answer = make_responder()

    async def model(prompt: str, system_prompt: Optional[str] = None, history_messages: Optional[list] = None,
                    **kwargs: Any) -> str:
        calls.append(prompt)
        return answer({"messages": [*(history_messages or []), {"role": "user", "content": prompt}]})

    def rag(**kw: Any) -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path / "wd"), embedding_func=hash_embedding(32), best_model_func=model,
                        cheap_model_func=model, show_progress=False, **kw)

    long_doc = " ".join([HARBOUR, GUILD, FESTIVAL] * 30)  # ~3300 tokens: a first chunk of 3000
    with pytest.raises(ValueError, match=r"lower chunk_token_size \(now 3000\)"):
        # Room enough for a report's data, not for a chunk of 3000 beside the extraction prompt.
        rag(best_model_max_token_size=3000, chunk_token_size=3000).insert([long_doc])
    assert calls == []
    # Nothing of the failed insert is left over: the document is new to a working insert.
    assert rag(best_model_max_token_size=4000, chunk_token_size=3000).insert([long_doc])["documents_inserted"] == 1
    assert calls


def test_a_block_inside_the_writes_frozen_heap_joins_it_and_the_collector_is_restored_after() -> None:
    """The write's block freezes the heap once; the stages' block inside it joins it (its
    settle sets aside what is alive then), and only the outer block's end unfreezes and puts
    the thresholds back, after an error too. A block alone owns the heap itself."""
    import gc

    from graphrag.indexing.heap import FULL_COLLECTIONS_RARER, FrozenHeap

    assert gc.get_freeze_count() == 0
    before = gc.get_threshold()
    kept: list[list[int]] = []
    try:
        with FrozenHeap():
            assert gc.get_freeze_count() > 0
            assert gc.get_threshold() == (before[0], before[1], before[2] * FULL_COLLECTIONS_RARER)
            with FrozenHeap() as inner:
                frozen = gc.get_freeze_count()
                kept.extend([i] for i in range(1000))  # tracked containers alive from here on
                inner.settle()
                assert gc.get_freeze_count() >= frozen + 1000
            # The inner block's end leaves the write's heap frozen and its thresholds as they are.
            assert gc.get_freeze_count() >= frozen + 1000
            assert gc.get_threshold() == (before[0], before[1], before[2] * FULL_COLLECTIONS_RARER)
            raise RuntimeError("the write failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    with FrozenHeap() as alone:
        assert gc.get_freeze_count() > 0
        alone.settle()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    # A heap someone else froze is left as it is, by both blocks.
    gc.freeze()
    try:
        with FrozenHeap():
            with FrozenHeap() as inner:
                inner.settle()
            assert gc.get_threshold() == before
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
