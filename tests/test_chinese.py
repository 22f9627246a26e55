"""Chinese documents: the LLM-free extractor, chunk boundaries, search tokens, a mixed-script file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag import GraphRAG, hash_embedding
from graphrag.errors import ConfigurationError
from graphrag.operators.chinese_text import has_han, mostly_latin, search_tokens
from graphrag.operators.nlp_extraction import extract_chunk_nlp

DATA = Path(__file__).parent / "data" / "chinese"


def _types(text: str, **options: object) -> dict[str, str]:
    return {e["name"]: e["type"] for e in extract_chunk_nlp(text, **options)["entities"]}


def test_people_places_and_organisations_are_found_with_types() -> None:
    passages = {p["title"]: p["text"] for p in json.loads((DATA / "corpus.json").read_text("utf-8"))}
    found = _types(passages["华为"])
    assert found["任正非"] == "PERSON"
    assert found["华为技术有限公司"] == "ORGANIZATION"
    assert found["深圳市"] == "GEO" and found["广东省"] == "GEO"
    found = _types(passages["蔡元培"])
    assert found["蔡元培"] == "PERSON" and found["陈独秀"] == "PERSON" and found["北京大学"] == "ORGANIZATION"


def test_names_in_one_sentence_are_related() -> None:
    result = extract_chunk_nlp("孙中山在日本东京组建中国同盟会。黄兴后来也加入了。")
    pairs = {frozenset((r["source"], r["target"])) for r in result["relations"]}
    assert frozenset(("孙中山", "东京")) in pairs
    assert frozenset(("黄兴", "东京")) not in pairs  # another sentence


def test_a_text_with_few_proper_nouns_gets_its_repeated_noun_terms() -> None:
    text = ("社区报告由大模型根据社区成员生成。每个社区报告包含标题和摘要。"
            "用户画像来自对话记录，用户画像会定期更新。")
    found = _types(text)
    assert found.get("社区报告") == "CONCEPT" and found.get("用户画像") == "CONCEPT"


def test_a_user_dictionary_makes_domain_terms_entities(tmp_path: Path) -> None:
    text = "线段树可以在对数时间内完成区间查询。"
    assert "线段树" not in _types(text)  # jieba's own dictionary splits it: 线段 + 树
    words = tmp_path / "terms.txt"
    words.write_text("线段树 10 n\n", encoding="utf-8")
    assert "线段树" in _types(text, user_dictionary=str(words))
    with pytest.raises(ConfigurationError):
        GraphRAG(working_dir=str(tmp_path / "wd"), extraction="nlp", nlp_user_dictionary=str(tmp_path / "none.txt"))


def test_a_markdown_heading_ends_the_description_before_the_text_below_it() -> None:
    """A heading line has no sentence end; it must not run into the first sentence below it,
    in Chinese or English, and its ``#`` marks are not part of any description."""
    text = ("# 北京大学\n北京大学由蔡元培长期主持。\n\n"
            "## Segment tree\nJon Bentley described the segment tree in 1977.")
    descriptions = {e["name"]: e["description"] for e in extract_chunk_nlp(text)["entities"]}
    assert descriptions["蔡元培"] == "北京大学由蔡元培长期主持。"
    assert descriptions["JON BENTLEY"] == "Jon Bentley described the segment tree in 1977."
    assert "SEGMENT" not in descriptions  # a sentence-case heading's first word opens a sentence
    assert not any("#" in d for d in descriptions.values())


def test_search_tokens_by_script() -> None:
    assert has_han("用 Neo4j") and not has_han("Neo4j only")
    # Counted in words, a Han character one: technical Chinese quoting English terms is Chinese.
    assert mostly_latin("Which river flows past Quarvale?") and mostly_latin("Beyoncé's first album")
    assert not mostly_latin("LangGraph 的 checkpoint 怎么存储？") and not mostly_latin("Где находится Москва?")
    assert search_tokens("Graph stores: Neo4j, NetworkX.") == ["graph", "stores", "neo4j", "networkx"]
    tokens = search_tokens("知识图谱用 Neo4j 存储")
    assert "neo4j" in tokens and "存储" in tokens and " " not in tokens


def test_a_mixed_chinese_english_markdown_file_gives_entities_in_both_scripts(tmp_path: Path) -> None:
    doc = tmp_path / "design.md"
    doc.write_text(
        "# 系统设计\n\n"
        "我们用 Neo4j 存储知识图谱，用 NanoVectorDB 存储向量。阿里巴巴集团的团队在杭州维护这个系统。\n\n"
        "## Extraction\n\n"
        "The extractor was written by Ada Pennick at Quarvale University. 张伟负责实体关系抽取。\n",
        encoding="utf-8")
    rag = GraphRAG(working_dir=str(tmp_path / "wd"), extraction="nlp", embedding_func=hash_embedding(64),
                   show_progress=False)
    rag.insert_files(str(doc))
    names = {e.name for e in rag.knowledge_graph.whole().entities}
    assert {"NEO4J", "NANOVECTORDB", "ADA PENNICK", "QUARVALE UNIVERSITY"} <= names
    assert {"杭州", "张伟", "阿里巴巴集团"} <= names


def test_a_latin_name_typed_full_width_is_the_same_name_everywhere(tmp_path: Path) -> None:
    """Every name key folds full-width letters and digits: the extractor's, the stored name
    (LLM extraction too), the graph API's lookups, the walk's entity linking and resolution's."""
    from graphrag import QueryParam
    from graphrag.operators.extraction import normalize_entity_name
    from graphrag.operators.names import compact_key, fold_name, loose_key
    from graphrag.operators.resolution.keys import name_key

    assert normalize_entity_name("ｎｅｏ４ｊ") == "NEO4J" == fold_name("ＮＥＯ４Ｊ") == compact_key("Ｎｅｏ４ｊ")
    assert loose_key("Ｔｈｅ　Ｌａｎｇ Ｇｒａｐｈ") == "LANG GRAPH" and name_key("ＮＥＯ４Ｊ") == name_key("Neo4j")
    rag = _offline(tmp_path)
    rag.insert(["张伟在杭州用ＬａｎｇＧｒａｐｈ搭建了问答系统。ＬａｎｇＧｒａｐｈ由Ｈａｒｒｉｓｏｎ Ｃｈａｓｅ创建。",
                "李娜在上海也用LangGraph做了一个客服系统。"])
    graph = rag.knowledge_graph
    names = {e.name for e in graph.whole().entities}
    assert {"LANGGRAPH", "HARRISON CHASE", "张伟", "李娜"} <= names
    assert not any("Ｌ" in n or "由" in n for n in names)  # one entity, and no Han run into it
    assert len(graph.entity("ＬａｎｇＧｒａｐｈ").source_chunk_ids) == 2
    assert "LANGGRAPH" in graph.names_in("ＬａｎｇＧｒａｐｈ是谁创建的？")
    assert "langgraph" in search_tokens("ＬａｎｇＧｒａｐｈ是谁创建的？")  # the lexical channel's words
    for mode in ("hybrid", "local"):
        retrieval = rag.retrieve("ＬａｎｇＧｒａｐｈ是谁创建的？", QueryParam(mode=mode, top_k=5))
        assert retrieval is not None and "LANGGRAPH" in {e.name for e in retrieval.entities}


# ---------------------------------------------------------------- the lexical channel


def _passages() -> dict[str, str]:
    return {p["title"]: f'{p["title"]}\n{p["text"]}' for p in json.loads((DATA / "corpus.json").read_text("utf-8"))}


def _offline(working_dir: Path, **options: object) -> GraphRAG:
    return GraphRAG(working_dir=str(working_dir), extraction="nlp", embedding_func=hash_embedding(64),
                    show_progress=False, **options)


def _doc_starting(rag: GraphRAG, start: str) -> str:
    import asyncio

    ids = asyncio.run(rag.stores.full_docs.all_keys())
    docs = asyncio.run(rag.stores.full_docs.get_by_ids(ids))
    return next(i for i, d in zip(ids, docs) if d["content"].startswith(start))


async def _lexical_records(rag: GraphRAG) -> dict[str, object]:
    index = rag.stores.lexical_index
    keys = sorted(await index.all_keys())
    return dict(zip(keys, await index.get_by_ids(keys)))


def test_the_lexical_index_follows_inserts_and_deletes_exactly(tmp_path: Path) -> None:
    import asyncio

    passages = _passages()
    rag = _offline(tmp_path / "a")
    rag.insert([passages["华为"], passages["深圳"], "Quarvale sits beside Tessaly, a slow green stream."])
    rag.delete_documents([_doc_starting(rag, "深圳")])
    fresh = _offline(tmp_path / "b")
    fresh.insert([passages["华为"], "Quarvale sits beside Tessaly, a slow green stream."])
    after_delete, built = asyncio.run(_lexical_records(rag)), asyncio.run(_lexical_records(fresh))
    assert after_delete == built
    assert "term:深圳市" in built and "term:quarvale" in built and "term:the" not in built
    assert "term:经济特区" not in after_delete  # only the deleted passage had it


def test_writes_made_with_the_channel_off_are_caught_up_exactly(tmp_path: Path) -> None:
    """With the channel off, one chunk out and one in leave the count as it was: the ids'
    digest still shows the index missed them, and the next write builds it again."""
    import asyncio

    passages = _passages()
    _offline(tmp_path / "a").insert([passages["华为"], passages["深圳"]])
    off = _offline(tmp_path / "a", lexical_retrieval=False)
    off.delete_documents([_doc_starting(off, "深圳")])
    off.insert([passages["腾讯"]])
    _offline(tmp_path / "a").insert([passages["敦煌"]])
    fresh = _offline(tmp_path / "b")
    fresh.insert([passages["华为"], passages["腾讯"], passages["敦煌"]])
    rebuilt, built = (asyncio.run(_lexical_records(_offline(tmp_path / d))) for d in ("a", "b"))
    assert rebuilt == built and "term:经济特区" not in rebuilt


def test_an_index_built_without_the_channel_gets_it_at_the_next_insert(tmp_path: Path) -> None:
    import asyncio

    passages = _passages()
    _offline(tmp_path, lexical_retrieval=False).insert([passages["华为"], passages["深圳"]])
    rag = _offline(tmp_path)
    rag.insert([passages["腾讯"]])
    stats = asyncio.run(rag.stores.lexical_index.get_by_id("stats"))
    assert stats["chunks"] == asyncio.run(rag.stores.text_chunks.count()) == 3


def test_the_lexical_channel_finds_chinese_passages_an_embedder_cannot_read(tmp_path: Path) -> None:
    import sys

    from graphrag import QueryParam

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from retrieval_eval import context_passages

    passages = _passages()
    question, gold = "莫高窟的藏经洞是谁发现的？", passages["敦煌"]
    _offline(tmp_path).insert(list(passages.values()))
    # Bag-of-words vectors see a Chinese clause as one "word": they match nothing.
    param = QueryParam(mode="naive", only_need_context=True, top_k=5)
    assert gold not in (_offline(tmp_path, lexical_retrieval=False).query(question, param) or "")
    # Fused with the (useless) vector ranking, it ties with that ranking's first chunk.
    assert gold in context_passages("naive", _offline(tmp_path).query(question, param))[:2]
    # Hybrid: the channel's ranking, and the walk from the entities the question names
    # (莫高窟, found by segmenting the question) and from the channel's best chunk.
    param = QueryParam(mode="hybrid", only_need_context=True, top_k=5)
    assert gold in [p.strip() for p in context_passages("hybrid", _offline(tmp_path).query(question, param))][:2]


def test_local_mode_starts_from_the_entities_a_chinese_question_names(tmp_path: Path) -> None:
    """Vectors that cannot read Chinese find no entity near the question; the names it holds
    (segmented as hybrid mode segments it) still lead local mode to their passages."""
    from graphrag import QueryParam

    passages = _passages()
    _offline(tmp_path).insert(list(passages.values()))
    retrieval = _offline(tmp_path).retrieve("莫高窟的藏经洞是谁发现的？", QueryParam(mode="local", top_k=5))
    assert retrieval is not None and "莫高窟" in {e.name for e in retrieval.entities}
    assert any(c.content.startswith("敦煌") for c in retrieval.chunks[:2])
    # The graph API reads the names in a Chinese text the same way.
    assert "莫高窟" in _offline(tmp_path).knowledge_graph.names_in("莫高窟的藏经洞是谁发现的？")


# ---------------------------------------------------------------- through an LLM answering in Chinese


@pytest.mark.parametrize("backend", ["files", "postgres"])
def test_a_model_answering_in_chinese_end_to_end(tmp_path: Path, llm_server: object, backend: str,
                                                 request: pytest.FixtureRequest) -> None:
    import asyncio

    import networkx as nx

    from graphrag import QueryParam

    passages = _passages()
    stores = ({} if backend == "files" else
              {"kv_storage": "postgres", "graph_storage": "postgres",
               "storage_options": request.getfixturevalue("postgres_options")})
    rag = GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(64), llm_base_url=llm_server.base_url,
                   llm_api_key="k", show_progress=False, **stores)
    rag.insert([passages[t] for t in ("华为", "深圳", "腾讯", "蔡元培", "北京大学")])
    names = {e.name: e for e in rag.knowledge_graph.whole().entities}
    assert {"任正非", "华为技术有限公司", "深圳", "马化腾", "蔡元培", "陈独秀", "北京大学"} <= set(names)
    # merged: one node for a name several passages mention, its descriptions from each
    assert len(names["深圳"].source_chunk_ids) >= 2
    if backend == "files":
        graph = nx.read_graphml(tmp_path / "graph_chunk_entity_relation.graphml")
        assert set(names) == set(graph.nodes)
    reports = rag.stores.community_reports
    titles = [r["report_json"]["title"] for r in asyncio.run(reports.get_by_ids(asyncio.run(reports.all_keys())))]
    assert titles and all(has_han(t) for t in titles)
    # Hash vectors cannot read Chinese; the lexical channel finds the passage.
    answer = rag.query("任正非创立的公司总部在哪里？", QueryParam(mode="naive", with_references=True))
    text = answer.split("References:")[0]
    assert "华为技术有限公司总部位于" in text and "[1]" in text  # quoted from the passage, cited
    assert "华为技术有限公司总部位于广东省深圳市" in answer  # the reference list quotes the passage


def test_the_lexical_index_on_postgresql_matches_the_files(tmp_path: Path, postgres_options: dict) -> None:
    """Kept through the KV contract only: a database backend holds the same index."""
    import asyncio

    passages = _passages()
    on_files = _offline(tmp_path / "files")
    on_postgres = _offline(tmp_path / "pg", kv_storage="postgres", storage_options=postgres_options)
    for rag in (on_files, on_postgres):
        rag.insert([passages["华为"], passages["深圳"]])
        rag.delete_documents([_doc_starting(rag, "深圳")])
    held = asyncio.run(_lexical_records(on_postgres))
    assert "term:华为技术有限公司" in held and "term:经济特区" not in held
    assert held == asyncio.run(_lexical_records(on_files))


def test_an_output_language_overrides_the_data_language_of_reports(tmp_path: Path, llm_server: object) -> None:
    from mock_llm_server import detect_kind

    passages = _passages()
    rag = GraphRAG(working_dir=str(tmp_path), embedding_func=hash_embedding(64), llm_base_url=llm_server.base_url,
                   llm_api_key="k", show_progress=False, output_language="English")
    rag.insert([passages["华为"], passages["深圳"]])
    reports = [r for r in llm_server.chat_requests if detect_kind(r) == "report"]
    assert reports and all(m["role"] == "system" and "in English" in m["content"]
                           for r in reports for m in r["messages"][:1])
    extractions = [r for r in llm_server.chat_requests if detect_kind(r) == "extraction"]
    assert extractions and not any("in English" in m["content"] for r in extractions for m in r["messages"])


def test_the_user_dictionary_segments_questions_as_it_segmented_chunks(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    from graphrag.operators.lexical import lexical_ranking

    words = tmp_path / "terms.txt"
    words.write_text("区间查询 10 n\n", encoding="utf-8")
    rag = _offline(tmp_path / "wd", nlp_user_dictionary=str(words))
    rag.insert(["线段树可以在对数时间内完成区间查询。", "哈希表在常数时间内完成查找。"])
    index = rag.stores.lexical_index
    assert asyncio.run(index.get_by_id("term:区间查询"))  # one word, as the dictionary says
    ranked = asyncio.run(lexical_ranking("怎么做区间查询？", rag.stores, 5))
    assert len(ranked) == 1
    words.unlink()  # a dictionary gone at query time: the question is segmented without it
    with caplog.at_level("WARNING", logger="graphrag.operators.lexical"):
        asyncio.run(lexical_ranking("怎么做区间查询？", rag.stores, 5))
    assert "gone" in caplog.text


@pytest.mark.timeout(300)
def test_the_chinese_set_is_retrieved_through_the_lexical_channel(tmp_path: Path) -> None:
    """The shipped set, offline, with vectors that cannot read Chinese (bag-of-words over
    whitespace): naive and hybrid find the gold passages through the lexical channel (and
    hybrid through the entities the questions name); without the channel naive finds almost
    none. Local mode starts from the entities the questions name and those the walk reaches,
    which these vectors alone never found (6.8 Recall@5 before)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from retrieval_eval import evaluate, load_qa

    passages, questions = load_qa(str(DATA / "corpus.json"), str(DATA / "questions.json"))
    on = evaluate(passages, questions, "nlp", ["naive", "local", "hybrid"], str(tmp_path / "on"),
                  embedding_func=hash_embedding(256))
    assert on["entities_in_han_script"] >= 150
    assert on["modes"]["local"]["all"]["recall@5"] >= 90
    for mode in ("naive", "hybrid"):
        assert on["modes"][mode]["all"]["recall@2"] >= 90 and on["modes"][mode]["all"]["recall@5"] >= 95
    off = evaluate(passages, questions, "nlp", ["naive", "hybrid"], str(tmp_path / "off"),
                   embedding_func=hash_embedding(256), lexical=False)
    assert off["modes"]["naive"]["all"]["recall@5"] <= 10
    assert off["modes"]["hybrid"]["all"]["recall@5"] < on["modes"]["hybrid"]["all"]["recall@5"]


def test_an_embedder_reading_latin_script_only_leaves_a_chinese_questions_ranking_to_bm25(tmp_path: Path) -> None:
    """The bundled model is English only (``latin_only``): for a Chinese question its vector
    ranking stays out of the fusion, so naive's order is BM25's; an English question, or an
    embedder not so marked, fuses the two as before."""
    import asyncio
    import dataclasses

    from graphrag import QueryParam
    from graphrag.embedding import local_embedding
    from graphrag.operators.lexical import dense_for_fusion, lexical_ranking
    from graphrag.operators.query_naive import retrieve_naive

    assert local_embedding().latin_only and not hash_embedding(64).latin_only
    passages = _passages()
    _offline(tmp_path).insert(list(passages.values()))
    english_only = dataclasses.replace(hash_embedding(64), latin_only=True)
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=english_only, show_progress=False)
    question, param = "莫高窟的藏经洞是谁发现的？", QueryParam(mode="naive", top_k=5)
    bm25 = asyncio.run(lexical_ranking(question, rag.stores, 5))
    found = asyncio.run(retrieve_naive(question, rag.stores, param, rag.tokenizer))
    assert bm25 and [c.id for c in found.chunks] == bm25
    vectors = rag.stores.chunks_vdb
    assert dense_for_fusion(question, ["v1"], bm25, vectors) == []
    assert dense_for_fusion("Who found the Library Cave?", ["v1"], bm25, vectors) == ["v1"]
    assert dense_for_fusion(question, ["v1"], [], vectors) == ["v1"]  # no lexical ranking: vectors stay
    assert dense_for_fusion("1921 2024?", ["v1"], bm25, vectors) == ["v1"]  # no letters, no script
    assert dense_for_fusion(question, ["v1"], bm25, _offline(tmp_path).stores.chunks_vdb) == ["v1"]

def test_search_tokens_leave_the_part_of_speech_tables_unloaded() -> None:
    """Search tokens (the lexical index of any text with a Han character) need jieba's words
    only: its tagger's tables, tens of MB, load where tags are read (the LLM-free extractor)."""
    import subprocess
    import sys

    code = ("import sys; from graphrag.operators.chinese_text import search_tokens, tagged_words; "
            "words = search_tokens('蔡元培任北京大学校长'); print(words, 'jieba.posseg' in sys.modules); "
            "tagged_words('蔡元培任北京大学校长'); print('jieba.posseg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].endswith("False") and "北京大学" in out[0]
    assert out[1] == "True"


def test_the_cached_dictionary_cuts_as_jiebas_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jieba

    from graphrag.operators import chinese_text as module

    path = tmp_path / "dictionary"
    monkeypatch.setattr(module, "_dictionary_cache_path", lambda: str(path))
    reference = jieba.Tokenizer()
    reference.initialize()
    first = jieba.Tokenizer()
    module._load_default_dictionary(first)  # jieba's own load, which writes the cache
    assert path.exists() and first.FREQ == reference.FREQ
    cached = jieba.Tokenizer()
    module._load_default_dictionary(cached)
    assert cached.initialized and (cached.FREQ, cached.total) == (reference.FREQ, reference.total)
    text = "我们在北京大学学习 LangGraph 的 checkpoint 怎么存储，知识图谱用 Neo4j 存储"
    assert cached.lcut(text) == reference.lcut(text) and cached.lcut(text, HMM=False) == reference.lcut(text, HMM=False)
    with open(path, "r+b") as f:  # a damaged cache is not trusted, and is rebuilt
        f.seek(-5, 2)
        f.write(b"\xe4\xb8\x80\xe4\xb8")
    assert module._read_dictionary_cache(str(path)) is None
    damaged = jieba.Tokenizer()
    module._load_default_dictionary(damaged)
    assert damaged.FREQ == reference.FREQ and module._read_dictionary_cache(str(path)) is not None
