"""Merging is a pure, order-independent function of contributions; summaries only above the limit."""
from __future__ import annotations

import asyncio
import random
from typing import Any, Optional

from graphrag.operators.merge import (
    build_graph_records,
    group_contributions,
    long_descriptions,
    merge_entity,
    merge_relation,
    placeholder_entity,
    SUMMARY_PRIORITY,
    summarize_description,
    summarize_elements,
    summary_input,
    summary_input_budget,
)
from graphrag.schema import GRAPH_FIELD_SEP as SEP
from graphrag.schema import edge_key


async def merge_graph_records(entity_contribs: Any, relation_contribs: Any, *, llm: Any, tokenizer: Any,
                              summary_max_tokens: int, endpoint_relations: Any = None) -> Any:
    """The merge stage's record building as an insert chains it: build, then summarise the long."""
    nodes, edges = build_graph_records(entity_contribs, relation_contribs, endpoint_relations)
    long = long_descriptions(nodes, edges, tokenizer=tokenizer, max_tokens=summary_max_tokens)
    await summarize_elements(long, nodes, edges, llm=llm, tokenizer=tokenizer, summary_max_tokens=summary_max_tokens)
    return nodes, edges


class CharTokenizer:
    """One token per character: enough to exercise budgets deterministically."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens)

    def count(self, text: str) -> int:
        return len(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[:max_tokens]


class FakeLLM:
    def __init__(self, answer: str = "SUMMARY") -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def __call__(self, prompt: str, *, stage: str, history_messages: Optional[list] = None, **kw: Any) -> str:
        self.calls.append((prompt, stage, kw))
        await asyncio.sleep(0)
        return self.answer


def ent(t: str, d: str) -> dict:
    return {"name": "X", "type": t, "description": d}


def rel(d: str, w: float, s: str = "A", t: str = "B") -> dict:
    return {"source": s, "target": t, "description": d, "weight": w}


ENTITY_CONTRIBS = [
    ("c3", ent("PERSON", "a miser")),
    ("c1", ent("PERSON", "old man")),
    ("c2", ent("ORGANIZATION", "a firm")),
    ("c1", ent("PERSON", "a miser")),
    ("c2", ent("PERSON", "old man")),
]


def test_merge_entity_order_independent() -> None:
    expected = merge_entity("X", ENTITY_CONTRIBS)  # type: ignore[arg-type]
    rng = random.Random(7)
    for _ in range(20):
        shuffled = ENTITY_CONTRIBS[:]
        rng.shuffle(shuffled)
        assert merge_entity("X", shuffled) == expected  # type: ignore[arg-type]
    assert expected == {
        "entity_type": "PERSON",
        "description": SEP.join(["a miser", "old man", "a firm"]),
        "source_id": SEP.join(["c1", "c2", "c3"]),
    }


def test_majority_type_ties_alphabetical_and_unknown_last() -> None:
    tie = [("c1", ent("PERSON", "x")), ("c2", ent("GEO", "y"))]
    assert merge_entity("X", tie)["entity_type"] == "GEO"  # type: ignore[arg-type]
    unknown = [("c1", ent("UNKNOWN", "x")), ("c2", ent("UNKNOWN", "y")), ("c3", ent("EVENT", "z"))]
    assert merge_entity("X", unknown)["entity_type"] == "EVENT"  # type: ignore[arg-type]
    only_unknown = [("c1", ent("UNKNOWN", "x"))]
    assert merge_entity("X", only_unknown)["entity_type"] == "UNKNOWN"  # type: ignore[arg-type]


def test_merge_relation_weights_add_and_dedupe() -> None:
    contribs = [("c2", rel("partners", 3.0)), ("c1", rel("partners", 2.5)), ("c3", rel("rivals", 1.0))]
    expected = merge_relation("A", "B", contribs)  # type: ignore[arg-type]
    assert expected == {
        "weight": 6.5,
        "description": SEP.join(["partners", "rivals"]),
        "source_id": SEP.join(["c1", "c2", "c3"]),
        "order": 1,
    }
    for perm in ([2, 0, 1], [1, 2, 0], [2, 1, 0]):
        assert merge_relation("A", "B", [contribs[i] for i in perm]) == expected  # type: ignore[arg-type]


def test_edge_key_undirected() -> None:
    assert edge_key("B", "A") == edge_key("A", "B") == ("A", "B")


def test_group_contributions_normalises_and_merges_directions() -> None:
    extractions = {
        "c1": {"entities": [ent("PERSON", "d1") | {"name": "Scrooge"}], "relations": [rel("r1", 1, "Scrooge", "Marley")]},
        "c2": {"entities": [ent("PERSON", "d2") | {"name": '"SCROOGE"'}], "relations": [rel("r2", 2, "marley", "scrooge")]},
    }
    entities, relations = group_contributions(extractions)  # type: ignore[arg-type]
    assert list(entities) == ["SCROOGE"]
    assert [c for c, _ in entities["SCROOGE"]] == ["c1", "c2"]
    assert list(relations) == [("MARLEY", "SCROOGE")]
    assert [r["description"] for _, r in relations[("MARLEY", "SCROOGE")]] == ["r1", "r2"]


def test_summary_only_above_threshold() -> None:
    tok = CharTokenizer()
    llm = FakeLLM()
    short = SEP.join(["a" * 10, "b" * 10])
    assert asyncio.run(summarize_description("X", short, llm=llm, tokenizer=tok, max_tokens=len(short))) == short
    assert llm.calls == []
    long = SEP.join(["first description", "second description"])
    out = asyncio.run(summarize_description("X", long, llm=llm, tokenizer=tok, max_tokens=10))
    assert out == "SUMMARY"
    prompt, stage, kw = llm.calls[0]
    assert stage == "summary" and kw["max_tokens"] == 10
    assert kw["priority"] == SUMMARY_PRIORITY < -1000  # ahead of any report level
    assert "X" in prompt and "first description" in prompt and "second description" in prompt
    assert SEP not in prompt


def test_summary_input_truncated_to_budget() -> None:
    tok = CharTokenizer()
    llm = FakeLLM()
    budget = summary_input_budget(10)
    parts = ["p" * (budget - 5), "q" * 20, "r" * 3]
    asyncio.run(summarize_description("X", SEP.join(parts), llm=llm, tokenizer=tok, max_tokens=10))
    prompt = llm.calls[0][0]
    assert parts[0] in prompt and "q" * 20 not in prompt and "rrr" not in prompt
    huge = "z" * (budget * 2)
    asyncio.run(summarize_description("X", huge, llm=llm, tokenizer=tok, max_tokens=10))
    assert "z" * budget in llm.calls[1][0] and "z" * (budget + 1) not in llm.calls[1][0]


def test_long_descriptions_carry_their_summary_input() -> None:
    """The merge's worker thread decides what is long and builds each summary's input, so
    the summaries, sent from the event loop, count no tokens."""

    class Counting(CharTokenizer):
        counted = 0

        def count(self, text: str) -> int:
            self.counted += 1
            return len(text)

    tok = Counting()
    nodes = {"A": {"description": SEP.join(["alpha " * 3, "beta " * 3])}, "B": {"description": "short"}}
    edges = {("A", "B"): {"description": SEP.join(["one", "two " * 5])}}
    long = long_descriptions(nodes, edges, tokenizer=tok, max_tokens=12)
    assert long == {"A": summary_input(nodes["A"]["description"], tokenizer=tok, max_tokens=12),
                    ("A", "B"): summary_input(edges[("A", "B")]["description"], tokenizer=tok, max_tokens=12)}
    assert long["A"] == ("alpha " * 3) + "\n" + ("beta " * 3)
    assert summary_input("short", tokenizer=tok, max_tokens=12) is None

    tok.counted = 0
    llm = FakeLLM()
    asyncio.run(summarize_elements(long, nodes, edges, llm=llm, tokenizer=tok, summary_max_tokens=12))
    assert tok.counted == 0
    assert nodes["A"]["description"] == edges[("A", "B")]["description"] == "SUMMARY"
    assert nodes["B"]["description"] == "short" and len(llm.calls) == 2
    assert long["A"] in llm.calls[0][0] + llm.calls[1][0]


def test_summary_input_keeps_whole_parts_within_its_token_budget() -> None:
    tok = CharTokenizer()
    parts = ["a" * 10, "b" * 10, "c" * 10]
    assert summary_input(SEP.join(parts), tokenizer=tok, max_tokens=5, input_tokens=25) == "a" * 10 + "\n" + "b" * 10
    assert summary_input(SEP.join(parts), tokenizer=tok, max_tokens=5) == "\n".join(parts)  # default: 4000


def test_empty_summary_falls_back_to_truncation() -> None:
    out = asyncio.run(summarize_description("X", "abcdefghij", llm=FakeLLM("  "), tokenizer=CharTokenizer(), max_tokens=4))
    assert out == "abcd"


def test_merge_graph_records_creates_missing_endpoints_and_summarises() -> None:
    entity_contribs = {"A": [("c1", ent("PERSON", "alpha"))]}
    relation_contribs = {
        ("A", "B"): [("c2", rel("ab two", 2.0)), ("c1", rel("ab one", 1.0))],
        ("B", "C"): [("c3", rel("bc", 4.0, "C", "B"))],
    }
    llm = FakeLLM()
    nodes, edges = asyncio.run(
        merge_graph_records(entity_contribs, relation_contribs, llm=llm, tokenizer=CharTokenizer(), summary_max_tokens=1000)  # type: ignore[arg-type]
    )
    assert llm.calls == []
    assert nodes["A"] == {"entity_type": "PERSON", "description": "alpha", "source_id": "c1"}
    assert nodes["B"] == {
        "entity_type": "UNKNOWN",
        "description": SEP.join(["ab one", "ab two", "bc"]),
        "source_id": SEP.join(["c1", "c2", "c3"]),
    }
    assert nodes["C"] == placeholder_entity("C", relation_contribs[("B", "C")])  # type: ignore[arg-type]
    assert edges[("A", "B")]["weight"] == 3.0 and edges[("B", "C")]["weight"] == 4.0

    # Reversed insertion order gives identical output.
    rev_rel = {k: v[::-1] for k, v in reversed(list(relation_contribs.items()))}
    nodes2, edges2 = asyncio.run(
        merge_graph_records(entity_contribs, rev_rel, llm=llm, tokenizer=CharTokenizer(), summary_max_tokens=1000)  # type: ignore[arg-type]
    )
    assert nodes2 == nodes and edges2 == edges

    # A small limit summarises every long description (concurrently), nodes and edges alike.
    nodes3, edges3 = asyncio.run(
        merge_graph_records(entity_contribs, relation_contribs, llm=llm, tokenizer=CharTokenizer(), summary_max_tokens=5)  # type: ignore[arg-type]
    )
    assert nodes3["A"]["description"] == "alpha"  # 5 tokens: not above the limit
    assert nodes3["B"]["description"] == "SUMMARY" and edges3[("A", "B")]["description"] == "SUMMARY"
    assert all(stage == "summary" for _, stage, _ in llm.calls)


def test_endpoint_relations_override() -> None:
    relation_contribs = {("A", "B"): [("c1", rel("ab", 1.0))]}
    extra = {"A": [("c1", rel("ab", 1.0)), ("c9", rel("ax", 1.0, "A", "X"))]}
    nodes, _ = asyncio.run(
        merge_graph_records({}, relation_contribs, llm=FakeLLM(), tokenizer=CharTokenizer(), summary_max_tokens=100, endpoint_relations=extra)  # type: ignore[arg-type]
    )
    assert nodes["A"]["source_id"] == SEP.join(["c1", "c9"])
    assert nodes["B"]["source_id"] == "c1"


def _random_extractions(rng: random.Random, chunks: int) -> dict[str, dict]:
    """Chunks naming entities from a small pool, so that names recur and some descriptions
    grow long enough to need a summary."""
    names = [f"PERSON {i}" for i in range(12)]
    out = {}
    for c in range(chunks):
        picked = rng.sample(names, 4)
        out[f"chunk-{c:02d}"] = {
            "entities": [{"name": n, "type": rng.choice(["PERSON", "PLACE"]),
                          "description": f"{n} in chunk {c}: " + "detail " * rng.randrange(1, 12)} for n in picked[:3]],
            "relations": [{"source": picked[i], "target": picked[i + 1], "description": f"link {c}-{i}",
                           "weight": float(rng.randrange(1, 9))} for i in range(3)],
        }
    return out


def test_merging_in_two_passes_gives_what_one_pass_gives(tmp_path: Any) -> None:
    """The insert merges the chunks extracted so far while extraction runs (at half of them, and
    while the last calls are in flight), then the rest: graph, vectors to write and summaries
    must be exactly those of a single pass, also when the first pass removes an earlier
    document's chunks."""
    from graphrag.config import GraphRAGConfig
    from graphrag.embedding import hash_embedding
    from graphrag.operators.graph_update import MergeAhead, finish_graph_update, rebuild_graph
    from graphrag.stores import open_stores

    rng = random.Random(3)
    before = _random_extractions(rng, 6)  # already indexed; two of its chunks go away
    new = {f"new-{k}": v for k, v in _random_extractions(rng, 10).items()}
    removed = {"chunk-01", "chunk-04"}
    first = dict(list(new.items())[:7])
    passes: list = []

    async def update_graph(changed: dict, removed_chunks: set, *, stores: Any, summarizer: Any,
                           extracted_one_by_one: dict) -> Any:
        """An insert's merge: ``changed`` arrives at once; ``extracted_one_by_one`` comes in
        chunk by chunk first, as answers do, and is merged ahead of the rest."""
        tok = CharTokenizer()

        async def read(ids: list) -> list:
            return [merge.extracted.get(i) or await stores.chunk_extractions.get_by_id(i) for i in ids]

        async def rebuild(extractions: dict, removed: set) -> Any:
            passes.append(sorted(extractions))
            return await rebuild_graph(extractions, removed, graph=stores.graph, read_extractions=read,
                                       tokenizer=tok, summary_max_tokens=120, summary_input_tokens=4000)

        removed_records = {k: v for k, v in changed.items() if k in removed_chunks}
        new_records = {k: v for k, v in changed.items() if k not in removed_chunks}
        merge = MergeAhead(rebuild, removed=removed_records, expected=len(new_records),
                           tail=len(new_records) - len(extracted_one_by_one), start=asyncio.ensure_future)
        for chunk_id, extraction in extracted_one_by_one.items():
            merge.on_extracted(chunk_id, extraction)
        passes.clear()
        return finish_graph_update(await merge.finish(new_records), graph=stores.graph, summarizer=summarizer,
                                   tokenizer=tok, summary_max_tokens=120, vector_tokens=64,
                                   start=asyncio.ensure_future)

    async def build(two_passes: bool, directory: str) -> tuple[dict, dict, dict, list]:
        cfg = GraphRAGConfig(working_dir=directory, embedding_func=hash_embedding(16))
        stores = open_stores(cfg, cfg.embedding_func)
        await stores.index_start()
        done = await update_graph(before, set(), stores=stores, summarizer=FakeLLM(), extracted_one_by_one={})
        await stores.chunk_extractions.upsert(before)
        await done.settled()
        removed_records = {k: before[k] for k in removed}
        await stores.chunk_extractions.delete(list(removed))
        llm = FakeLLM()
        changes = await update_graph({**removed_records, **new}, removed, stores=stores, summarizer=llm,
                                     extracted_one_by_one=first if two_passes else {})
        assert len(passes) == (3 if two_passes else 1)  # at 5 of 10 in, at 7 (3 left: the tail), the rest
        await changes.settled()
        graph = stores.graph.graph
        return ({n: dict(d) for n, d in graph.nodes(data=True)},
                {tuple(sorted(e)): dict(d) for *e, d in graph.edges(data=True)},
                {"upsert": changes.vectors_to_upsert, "delete": sorted(changes.vectors_to_delete),
                 "changed": changes.entities_changed, "summarised": sorted(map(str, changes.summarising))},
                sorted(prompt for prompt, _, _ in llm.calls))

    one = asyncio.run(build(False, str(tmp_path / "one")))
    two = asyncio.run(build(True, str(tmp_path / "two")))
    assert one[3], "the data should need summaries"
    assert one == two
