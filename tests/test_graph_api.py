"""The knowledge graph as an API (rag.knowledge_graph), structured retrieval and cited answers,
over a corpus with a known three-hop chain spread over three documents, plus distractors:
Marguerite Olvane founded Brightwater Instruments (people.txt), which is based in Kestrel
Harbor (companies.txt), the capital of Norland (places.txt)."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding
from graphrag.errors import EntityNotFound, InvalidInputError
from graphrag.graph_api import KnowledgeGraph, NameIndex
from graphrag.records import Answer, Retrieval
from helpers_server import CHAIN, DOCS
from mock_llm_server import MockLLMServer, prompt_of

QUESTION = "In which country is the capital city where the company Marguerite Olvane founded is based?"


def build(wd: Path, **options) -> GraphRAG:
    rag = GraphRAG(working_dir=str(wd), extraction="nlp", embedding_func=hash_embedding(64), **options)
    rag.insert(list(DOCS.values()), sources=list(DOCS))
    return rag


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> GraphRAG:
    return build(tmp_path_factory.mktemp("chain") / "wd")


def test_paths_return_the_chain_with_each_hop_s_document(chain: GraphRAG) -> None:
    paths = chain.knowledge_graph.paths("marguerite olvane", "Norland")
    assert paths and list(paths[0].entities) == CHAIN
    assert [[d.source for d in hop.documents] for hop in paths[0].hops] == [
        ["people.txt"], ["companies.txt"], ["places.txt"]]
    for hop in paths[0].hops:
        assert hop.description and hop.weight > 0 and hop.source_chunk_ids
    assert "founded" in paths[0].hops[0].description
    assert all(len(p) >= len(paths[0]) for p in paths)  # shortest first
    assert chain.knowledge_graph.paths(CHAIN[0], CHAIN[-1], max_depth=2) == []  # three hops needed
    assert all(len(p) <= 3 for p in chain.knowledge_graph.paths(CHAIN[0], CHAIN[-1], max_depth=3, k=10))


def test_entity_resolves_any_spelling_and_suggests_close_names(chain: GraphRAG) -> None:
    kg = chain.knowledge_graph
    for spelling in ("Brightwater Instruments", "brightwater-instruments", "  BRIGHTWATER   instruments. "):
        entity = kg.entity(spelling)
        assert entity.name == "BRIGHTWATER INSTRUMENTS"
        assert {d.source for d in entity.documents} == {"people.txt", "companies.txt"}
        assert entity.degree and entity.communities
    with pytest.raises(EntityNotFound) as err:
        kg.entity("Margerite Olvan")
    assert err.value.suggestions[0] == "MARGUERITE OLVANE" and isinstance(err.value, KeyError)
    with pytest.raises(EntityNotFound) as err:
        kg.entity("Kestrel")
    assert "KESTREL HARBOR" in err.value.suggestions


def test_names_in_finds_the_entities_a_text_names_longest_run_first(chain: GraphRAG) -> None:
    found = chain.knowledge_graph.names_in("Did marguerite olvane sail from Norland for BRIGHTWATER instruments?")
    assert found == ["MARGUERITE OLVANE", "BRIGHTWATER INSTRUMENTS", "NORLAND"]
    assert chain.knowledge_graph.names_in("nothing named here") == []


def test_neighbors_filters_depth_and_limits(chain: GraphRAG) -> None:
    kg = chain.knowledge_graph
    first = kg.neighbors("Brightwater Instruments")
    assert {e.name for e in first} >= {"MARGUERITE OLVANE", "KESTREL HARBOR"}
    assert all(e.distance == 1 and e.via.source == "BRIGHTWATER INSTRUMENTS" for e in first)
    deeper = kg.neighbors("Brightwater Instruments", depth=2)
    assert "NORLAND" in {e.name for e in deeper if e.distance == 2}
    assert [e.distance for e in deeper] == sorted(e.distance for e in deeper)
    based = kg.neighbors("Brightwater Instruments", relation="BASED IN")
    assert [e.name for e in based] == ["KESTREL HARBOR"]
    assert kg.neighbors("Brightwater Instruments", min_weight=1e9) == []
    assert len(kg.neighbors("Brightwater Instruments", depth=2, limit=1)) == 1
    assert kg.neighbors("Brightwater Instruments", entity_type="no such type") == []
    # Direction comes from the extractions: the company was the source of "based in".
    assert "KESTREL HARBOR" in {e.name for e in kg.neighbors("Brightwater Instruments", direction="out")}
    assert "KESTREL HARBOR" not in {e.name for e in kg.neighbors("Brightwater Instruments", direction="in")}
    walk = kg.traverse("Marguerite Olvane", max_depth=3)
    assert walk[0].name == "MARGUERITE OLVANE" and walk[0].distance == 0
    assert {e.name: e.distance for e in walk}["NORLAND"] == 3
    with pytest.raises(InvalidInputError):
        kg.neighbors("Norland", depth=99)
    with pytest.raises(InvalidInputError):
        kg.neighbors("Norland", direction="sideways")


def test_subgraph_has_members_relations_and_communities(chain: GraphRAG) -> None:
    sub = chain.knowledge_graph.subgraph(["Kestrel Harbor", "Pellham"], depth=1)
    names = {e.name for e in sub.entities}
    assert {"KESTREL HARBOR", "NORLAND", "BRIGHTWATER INSTRUMENTS", "PELLHAM", "ASHCOMBE MILLS"} <= names
    assert all(r.source in names and r.target in names for r in sub.relations)
    assert {c.id for c in sub.communities} == {c for e in sub.entities for c in e.communities}
    small = chain.knowledge_graph.subgraph(["Kestrel Harbor"], depth=2, max_nodes=2)
    assert len(small.entities) == 2 and small.truncated


def test_search_and_graph_search_are_scored(chain: GraphRAG) -> None:
    kg = chain.knowledge_graph
    hits = kg.search("Brightwater Instruments is based in Kestrel Harbor", top_k=3)
    assert hits and all(h.score is not None for h in hits)
    expanded = kg.graph_search("Brightwater Instruments is based in Kestrel Harbor", top_k=3, depth=1)
    assert len(expanded) > len(hits)
    assert [e.score for e in expanded] == sorted((e.score for e in expanded), reverse=True)


def test_graph_calls_read_the_graph_once_and_refresh_after_an_insert(tmp_path: Path) -> None:
    rag = build(tmp_path / "wd")
    reads = 0
    graph = rag.stores.graph
    original = graph.get_all_nodes

    async def counting():
        nonlocal reads
        reads += 1
        return await original()

    graph.get_all_nodes = counting
    for _ in range(3):
        rag.knowledge_graph.entity("Norland")
        rag.knowledge_graph.neighbors("Norland")
    assert reads == 1  # the name index is built once per index version
    rag.insert("Odile Marsh founded Greyfen Labs.", sources=["more.txt"])
    assert rag.knowledge_graph.entity("odile marsh").documents[0].source == "more.txt"


def test_a_hub_with_5000_edges_answers_within_its_limit(tmp_path: Path) -> None:
    rag = GraphRAG(working_dir=str(tmp_path / "hub"), extraction="nlp", embedding_func=hash_embedding(16))
    graph = rag.stores.graph

    async def fill() -> None:
        await graph.upsert_node("HUB", {"entity_type": "ORG", "description": "a hub", "source_id": "chunk-x"})
        for i in range(5000):
            await graph.upsert_node(f"LEAF {i}", {"entity_type": "PERSON", "description": f"leaf {i}",
                                                  "source_id": "chunk-x"})
            await graph.upsert_edge("HUB", f"LEAF {i}", {"weight": float(i % 97), "description": f"works at hub {i}",
                                                         "source_id": "chunk-x"})

    asyncio.run(fill())
    kg = rag.knowledge_graph
    started = time.perf_counter()
    top = kg.neighbors("hub", limit=10)
    assert len(top) == 10 and all(e.via.weight == 96.0 for e in top)  # the heaviest edges
    assert len(kg.neighbors("leaf 7", depth=2, limit=25)) == 25
    assert len(kg.neighbors("hub", limit=10_000, max_scan=300)) == 300
    assert len(kg.subgraph(["hub"], max_nodes=50).entities) == 50
    assert kg.paths("leaf 1", "leaf 2", max_depth=4, k=3)[0].entities == ("LEAF 1", "HUB", "LEAF 2")
    assert time.perf_counter() - started < 10


def test_name_index_ignores_case_and_punctuation() -> None:
    index = NameIndex(["O'BRIEN & SONS", "ST. KILDA", "ST KILDA"])
    assert index.resolve("obrien sons") == "O'BRIEN & SONS"
    assert index.resolve("St Kilda") == "ST KILDA"  # the exact spelling wins a tie
    assert index.resolve("Nowhere") is None
    assert index.close_matches("kilda") == ["ST KILDA"] or "ST. KILDA" in index.close_matches("kilda")


# --------------------------------------------------------------------------- retrieval


@pytest.mark.parametrize("mode", ["local", "naive", "global"])
def test_retrieve_is_the_structured_form_of_the_context(chain: GraphRAG, mode: str) -> None:
    result = chain.retrieve(QUESTION, QueryParam(mode=mode, top_k=10))
    assert isinstance(result, Retrieval) and result.mode == mode
    assert result.context == chain.query(QUESTION, QueryParam(mode=mode, top_k=10, only_need_context=True))
    if mode == "global":
        assert result.reports and all(r.documents for r in result.reports)
        assert all(r.text in result.context for r in result.reports)
    else:
        assert result.chunks and all(c.content in result.context and c.documents for c in result.chunks)
        assert all(c.score is not None for c in result.chunks)


def test_three_hop_retrieval_holds_the_three_passages(chain: GraphRAG) -> None:
    result = chain.retrieve(QUESTION, QueryParam(mode="local", top_k=10))
    assert {d.source for c in result.chunks for d in c.documents} == set(DOCS)
    assert {"MARGUERITE OLVANE", "BRIGHTWATER INSTRUMENTS", "KESTREL HARBOR"} <= {e.name for e in result.entities}
    assert all(e.documents for e in result.entities) and all(r.documents for r in result.relations)


@pytest.fixture
def cited(tmp_path: Path, llm_server: MockLLMServer) -> GraphRAG:
    return build(tmp_path / "cited", llm_base_url=llm_server.base_url, llm_api_key="k")


def test_the_three_hop_answer_cites_the_three_passages(cited: GraphRAG, llm_server: MockLLMServer) -> None:
    answer = cited.query_result(QUESTION, QueryParam(mode="local", top_k=10))
    assert isinstance(answer, Answer)
    assert {d.source for r in answer.references for d in r.documents} == set(DOCS)
    for ref in answer.references:
        assert f"[{ref.number}]" in answer.text and ref.chunk_id and ref.excerpt
    [template] = {prompt_of(req)[0] for req in llm_server.chat_requests}
    assert template == "local_rag_response_cited"
    text = cited.query(QUESTION, QueryParam(mode="local", top_k=10, with_references=True))
    assert text == str(answer) and "\nReferences:\n[1] " in text
    plain = cited.query(QUESTION, QueryParam(mode="local", top_k=10))
    assert "References:" not in plain and "[1]" not in plain  # nano-compatible callers see no change


@pytest.mark.parametrize("mode", ["naive", "global"])
def test_naive_and_global_answers_cite_sources_they_were_sent(cited: GraphRAG, mode: str) -> None:
    answer = cited.query_result(QUESTION, QueryParam(mode=mode, top_k=10))
    assert answer.references
    sources = answer.retrieval.citable()
    for ref in answer.references:
        source = sources[ref.number - 1]
        if mode == "global":
            assert ref.report_id == source.community.id and ref.documents == source.documents
        else:
            assert ref.chunk_id == source.id and ref.documents[0].source in DOCS


def test_invented_citations_are_dropped(tmp_path: Path) -> None:
    async def model(prompt, system_prompt=None, history_messages=[], **kwargs) -> str:
        return "Norland [1]. Also Atlantis [42] and [1, 99]. Maybe [0]."

    rag = build(tmp_path / "wd", best_model_func=model, cheap_model_func=model)
    answer = rag.query_result(QUESTION, QueryParam(mode="naive", top_k=3))
    assert answer.text == "Norland [1]. Also Atlantis and [1]. Maybe."
    assert [r.number for r in answer.references] == [1]


def test_without_an_llm_the_numbered_context_lists_every_source(chain: GraphRAG) -> None:
    answer = chain.query_result(QUESTION, QueryParam(mode="naive", top_k=3))
    assert answer.text.startswith("[No LLM") and "[1] " in answer.text
    assert [r.number for r in answer.references] == list(range(1, len(answer.retrieval.chunks) + 1))


def test_graph_api_async_calls_inside_a_running_loop(chain: GraphRAG) -> None:
    async def inside() -> None:
        kg: KnowledgeGraph = chain.knowledge_graph
        assert (await kg.aentity("norland")).name == "NORLAND"
        assert await kg.apaths("Marguerite Olvane", "Norland")
        with pytest.raises(RuntimeError):
            kg.entity("norland")  # the sync twin refuses inside a running loop

    asyncio.run(inside())
