"""The rerank stage: off by default; a rerank endpoint (TEI and Cohere shapes), a local
cross-encoder, or the cheap model listwise reorder the first passages of every passage mode
and of retrieve, cached and counted like model calls."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import hash_embedding
from graphrag.errors import InvalidInputError
from mock_llm_server import MockLLMServer, overlap_score

DOCS = [
    "The lighthouse keeper of Quarvale lit the lamp every night of the long winter.",
    "Quarvale harbour froze in the winter, and the keeper walked across the ice.",
    "Barges carrying grain pass under stone bridges near the river at dawn.",
    "The winter fair of Dunmere sells lamps, ropes and nets to every harbour town.",
    "A keeper of bees in Dunmere sold honey at the fair every summer.",
]
QUESTION = "Who lit the lamp of the Quarvale lighthouse in winter?"
PASSAGE_MODES = ("naive", "local", "hybrid")


def _rag(path: Path, **options: Any) -> GraphRAG:
    return GraphRAG(working_dir=str(path), embedding_func=hash_embedding(256), extraction="nlp",
                    show_progress=False, **options)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rerank")
    _rag(path).insert(DOCS)
    return path


def _order(rag: GraphRAG, mode: str) -> list[str]:
    return [c.content for c in rag.retrieve(QUESTION, QueryParam(mode=mode)).chunks]


def test_off_by_default(indexed: Path) -> None:
    rag = _rag(indexed)
    for mode in PASSAGE_MODES:
        assert _order(rag, mode)
    assert rag.stores.reranker is None and "rerank" not in rag.usage.snapshot()


@pytest.mark.parametrize("model", [None, "rerank-mini"])  # TEI's shape, then Cohere / Jina's
def test_an_endpoint_reorders_every_passage_mode_cached_and_counted(indexed: Path, llm_server: MockLLMServer,
                                                                   model: Any) -> None:
    plain = _rag(indexed)
    rag = _rag(indexed, rerank=f"{llm_server.base_url}/rerank", rerank_model=model)
    for mode in PASSAGE_MODES:
        before, after = _order(plain, mode), _order(rag, mode)
        assert sorted(before) == sorted(after)
        assert after == sorted(before, key=lambda p: -overlap_score(QUESTION, p)), mode
        context = rag.query(QUESTION, QueryParam(mode=mode, only_need_context=True))
        assert context.index(after[0]) < context.index(after[-1])
    sent = llm_server.rerank_requests
    assert sent and all(r["query"] == QUESTION and r.get("model") == model for r in sent)
    # Two reorders a mode (retrieve, query); one request per distinct candidate list, the rest
    # read from the cache (local's Sources come in hybrid's order, so theirs is one list).
    usage = rag.usage.snapshot()["rerank"]
    assert usage["calls"] == len(sent) and usage["calls"] + usage["cached"] == 2 * len(PASSAGE_MODES)
    # Another process, the same question: from the cache, no request.
    again = _rag(indexed, rerank=f"{llm_server.base_url}/rerank", rerank_model=model)
    assert _order(again, "naive") == _order(rag, "naive")
    assert len(llm_server.rerank_requests) == len(sent)
    assert again.usage.snapshot()["rerank"]["calls"] == 0 and again.usage.snapshot()["rerank"]["cached"] == 1


def test_listwise_by_the_cheap_model(indexed: Path, llm_server: MockLLMServer) -> None:
    rag = _rag(indexed, rerank="llm", llm_base_url=llm_server.base_url, llm_api_key="k")
    before = _order(_rag(indexed), "hybrid")
    assert _order(rag, "hybrid") == sorted(before, key=lambda p: -overlap_score(QUESTION, p))
    assert llm_server.calls_by_kind["rerank"] == 1


def _tiny_cross_encoder(path: Path) -> Path:
    """A randomly initialised two-layer BERT with a one-score head and a word-level vocab,
    saved as a sentence-transformers cross-encoder reads it: nothing downloaded."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path.mkdir()
    words = sorted({w.strip(".,?").lower() for text in [*DOCS, QUESTION] for w in text.split()})
    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(path)
    BertTokenizer(str(vocab)).save_pretrained(path)
    return path


def test_a_local_cross_encoder_orders_by_its_scores(indexed: Path, tmp_path: Path) -> None:
    from sentence_transformers import CrossEncoder

    model = _tiny_cross_encoder(tmp_path / "ce")
    rag = _rag(indexed, rerank=f"cross-encoder:{model}")
    before = _order(_rag(indexed), "naive")
    scores = CrossEncoder(str(model)).predict([(QUESTION, p) for p in before])
    expected = [p for _, p in sorted(zip(range(len(before)), before), key=lambda ip: (-scores[ip[0]], ip[0]))]
    assert _order(rag, "naive") == expected
    assert rag.usage.snapshot()["rerank"]["calls"] == 1


def test_an_unknown_rerank_choice_is_refused(indexed: Path) -> None:
    with pytest.raises(ValueError, match="rerank must be"):
        _rag(indexed, rerank="bm25").retrieve(QUESTION, QueryParam(mode="naive"))


# --------------------------------------------------------------------------- rerank="embedding"


def test_a_heading_is_the_first_line_when_it_reads_as_one() -> None:
    from graphrag.operators.rerank import passage_heading

    assert passage_heading("Quarvale Lighthouse\nThe tower stands on the cliff.") == "Quarvale Lighthouse"
    assert passage_heading("# Harbour ice\n\nThe harbour froze.") == "Harbour ice"
    assert passage_heading("The tower stands on the cliff.\nIt was built of granite.") is None  # a sentence
    assert passage_heading("Quarvale Lighthouse") is None  # nothing follows it
    assert passage_heading(" ".join(["word"] * 20) + "\nmore") is None  # wrapped prose, not a title


def test_a_heading_is_named_only_with_the_disambiguation_it_carries() -> None:
    from graphrag.operators.rerank import heading_named

    question = "In Quarvale mythology, what kind of spirit is the Lantern Wight?"
    assert heading_named("Lantern Wight", question)
    assert heading_named("Lantern Wight (mythology)", question)
    assert not heading_named("Lantern Wight (ship)", question)  # another thing of that name
    assert not heading_named("Lantern Wight discography", question)  # more than the question names
    assert not heading_named("Wight Lantern", question)  # the words, not together in that order


def _keyword_embedding(keyword: str, embedded: Optional[list[str]] = None) -> Any:
    """Vectors that tell only whether a text holds ``keyword`` (and how often); the texts
    embedded are added to ``embedded``."""
    import numpy as np

    async def embed(texts: list[str]) -> Any:
        if embedded is not None:
            embedded.extend(texts)
        return np.array([[t.lower().count(keyword), 1.0] for t in texts], dtype=np.float32)

    return embed


def _reordered(scores: list[float]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def test_the_embedding_scorer_lifts_a_best_sentence_and_keeps_the_order_otherwise() -> None:
    import asyncio

    from graphrag.rerank import embedding_scorer

    embedded: list[str] = []
    score = embedding_scorer(_keyword_embedding("granite", embedded))
    plain = [f"Note {n}\nThe harbour froze in winter. Boats stayed in." for n in range(9)]
    # Nothing tells the passages apart: the mode's order stands.
    assert _reordered(asyncio.run(score("What is the tower built of?", plain))) == list(range(9))
    assert "Note 0: The harbour froze in winter." in embedded and len(embedded) == 1 + 2 * 9
    # One sentence of the last passage answers: it rises, the others keep their order.
    passages = [*plain, "Note 9\nBoats stayed in. Gulls nested. The tower is granite. The harbour froze."]
    order = _reordered(asyncio.run(score("Is the tower granite?", passages)))
    assert order.index(9) < 9 and [i for i in order if i != 9] == list(range(9))
    # The sentences met before were kept: only the question and the new passage's were embedded.
    assert len(embedded) == 1 + 2 * 9 + 1 + 4


def _chunk(content: str, order_index: int = 0) -> dict[str, Any]:
    return {"content": content, "chunk_order_index": order_index}


def test_passages_whose_heading_the_question_names_go_first_in_their_order() -> None:
    from graphrag.operators.rerank import named_headings_first

    question = "In Quarvale mythology, is the Lantern Wight a spirit of granite?"
    chunks = [_chunk("Lantern Wight (ship)\nThe granite ship sailed from Quarvale."),  # another Lantern Wight
              _chunk("Quarvale harbour\nThe granite tower of the Lantern Wight legend stands above it."),
              _chunk("The Lantern Wight is a spirit. Quarvale tells of it."),  # no heading
              _chunk("Lantern Wight (mythology)\nA spirit of the winter coast."),
              None,  # a chunk missing from the store
              _chunk("Quarvale\nA harbour town on the northern coast.")]
    assert named_headings_first(question, chunks) == [3, 5, 0, 1, 2, 4]
    # A later chunk's first line is where the chunker cut the text, not a heading.
    assert named_headings_first(question, [_chunk("x\nmore"), _chunk("Quarvale\nA harbour town.", 3)]) == [0, 1]
    assert named_headings_first("Nothing named here?", chunks) == list(range(len(chunks)))


def test_a_question_in_unspaced_script_names_no_heading_by_a_part_of_it() -> None:
    from graphrag.operators.rerank import named_headings_first

    # Without spaces a whole clause is one word: a heading is named only when the question
    # holds it as a whole word, so a heading inside the clause does not jump ahead.
    chunks = [_chunk("码头\n船停在港外。"), _chunk("灯塔\n灯塔在港口北边。"), _chunk("港口\n港口很大。")]
    assert named_headings_first("灯塔在哪个港口？", chunks) == [0, 1, 2]
    assert named_headings_first("灯塔 在哪个港口？", chunks) == [1, 0, 2]  # a spaced word names it


HEADED_DOCS = [
    "Harbour of Quarvale\nWhen was the keeper of the Quarvale lighthouse raised? The one whose keeper lit the lamp "
    "was raised in Quarvale, and the Quarvale lighthouse keeper lit the lamp; visitors come to the lighthouse.",
    "Quarvale Lighthouse\nThe tower was raised in 1841 on the northern cliff.",
    "Dunmere fair\nThe winter fair of Dunmere sells lamps, ropes and nets.",
]
HEADED_QUESTION = "When was the Quarvale Lighthouse raised, the one whose keeper lit the lamp?"


def test_hybrid_and_local_put_a_named_heading_first_by_default_and_not_when_asked_not_to(tmp_path: Path) -> None:
    _rag(tmp_path).insert(HEADED_DOCS)
    rag = _rag(tmp_path)

    def order(mode: str, **options: Any) -> list[str]:
        return [c.content for c in rag.retrieve(HEADED_QUESTION, QueryParam(mode=mode, **options)).chunks]

    named = HEADED_DOCS[1]
    for mode in ("local", "hybrid"):
        before = order(mode, named_headings_first=False)
        assert before[0] == HEADED_DOCS[0], mode  # the look-alike repeating the question's words
        # The named passage moves to the front; every other keeps its place among the rest.
        assert order(mode) == [named, *(p for p in before if p != named)], mode
        sources = rag.query(HEADED_QUESTION, QueryParam(mode=mode, only_need_context=True)).split("-----Sources-----")[-1]
        assert sources.index("raised in 1841") < sources.index("visitors come"), mode
    # Naive stays plain vector search: the baseline the graph modes are measured against.
    assert order("naive")[0] == HEADED_DOCS[0]
    assert order("naive") == order("naive", named_headings_first=False)
    with pytest.raises(InvalidInputError, match="named_headings_first"):
        QueryParam(mode="hybrid", named_headings_first="no")  # type: ignore[arg-type]


@pytest.mark.parametrize("headings", [True, False])
def test_the_embedding_stage_puts_named_headings_first_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           headings: bool) -> None:
    from graphrag.operators import rerank

    _rag(tmp_path).insert(HEADED_DOCS)
    calls: list[str] = []
    counted = rerank.named_headings_first

    def spy(question: str, chunks: Any) -> list[int]:
        calls.append(question)
        return counted(question, chunks)

    monkeypatch.setattr(rerank, "named_headings_first", spy)
    rag = _rag(tmp_path, rerank="embedding", enable_llm_cache=False)
    retrieved = rag.retrieve(HEADED_QUESTION, QueryParam(mode="hybrid", named_headings_first=headings)).chunks
    assert retrieved[0].content == HEADED_DOCS[1]
    assert calls == [HEADED_QUESTION]


def test_embedding_rerank_in_every_passage_mode_and_retrieve_counted_and_cached(tmp_path: Path) -> None:
    _rag(tmp_path).insert(HEADED_DOCS)
    rag = _rag(tmp_path, rerank="embedding")

    def first(r: GraphRAG, mode: str, headings: bool = True) -> str:
        return r.retrieve(HEADED_QUESTION, QueryParam(mode=mode, named_headings_first=headings)).chunks[0].content

    for mode in PASSAGE_MODES:
        # Without it (and without the heading rule), the look-alike that repeats the question's words comes first.
        assert first(_rag(tmp_path), mode, headings=False).startswith("Harbour of Quarvale\n"), mode
        # The stage puts the named heading first even when the query turns the rule off.
        assert first(rag, mode, headings=False).startswith("Quarvale Lighthouse\n"), mode
        assert first(rag, mode).startswith("Quarvale Lighthouse\n"), mode
        sources = rag.query(HEADED_QUESTION, QueryParam(mode=mode, only_need_context=True)).split("-----Sources-----")[-1]
        assert sources.index("raised in 1841") < sources.index("visitors come"), mode
    usage = rag.usage.snapshot()["rerank"]
    assert usage["calls"] >= 1 and usage["calls"] + usage["cached"] == 3 * len(PASSAGE_MODES)
    again = _rag(tmp_path, rerank="embedding")
    assert first(again, "naive").startswith("Quarvale Lighthouse\n")
    assert again.usage.snapshot()["rerank"] == {**again.usage.snapshot()["rerank"], "calls": 0, "cached": 1}


def test_the_embedding_scorer_skips_sentences_in_a_script_its_embedder_cannot_read() -> None:
    import asyncio

    from graphrag.embedding_func import EmbeddingFunc
    from graphrag.rerank import embedding_scorer

    embedded: list[str] = []
    latin_only = EmbeddingFunc(embedding_dim=2, max_token_size=64, func=_keyword_embedding("港", embedded),
                               latin_only=True)
    passages = ["码头\n船停在港外。", "灯塔\n灯塔在港口北边。", "Harbour\nThe 港 harbour."]
    # Nothing embedded, the mode's order kept.
    assert _reordered(asyncio.run(embedding_scorer(latin_only)("灯塔在哪个港口？", passages))) == [0, 1, 2]
    assert embedded == []
    asyncio.run(embedding_scorer(latin_only)("Which harbour is the 港?", passages))
    assert embedded


def _counting_embedding(embedded: list[str]) -> Any:
    """hash_embedding(256), with every text it embeds added to ``embedded``."""
    from graphrag.embedding_func import EmbeddingFunc

    inner = hash_embedding(256)

    async def embed(texts: list[str]) -> Any:
        embedded.extend(texts)
        return await inner(texts)

    return EmbeddingFunc(embedding_dim=256, max_token_size=8192, func=embed)


def _counted(path: Path, embedded: list[str]) -> GraphRAG:
    return GraphRAG(working_dir=str(path), embedding_func=_counting_embedding(embedded), extraction="nlp",
                    show_progress=False, rerank="embedding", enable_llm_cache=False)


def _hybrid_order(rag: GraphRAG) -> list[str]:
    return [c.content for c in rag.retrieve(HEADED_QUESTION, QueryParam(mode="hybrid")).chunks]


def _kept_sentence_vectors(rag: GraphRAG) -> dict[str, str]:
    """The chunks whose sentence vectors the index keeps: chunk id -> chunk text."""
    from graphrag.aio import run_sync

    async def read() -> dict[str, str]:
        ids = await rag.stores.sentence_vectors.all_keys()
        return {i: (r or {}).get("content", "") for i, r in zip(ids, await rag.stores.text_chunks.get_by_ids(ids))}

    return run_sync(read(), rag.arelease)


def test_sentence_vectors_kept_with_the_index_are_read_by_another_process_and_go_with_their_document(
        tmp_path: Path) -> None:
    from graphrag.operators.chunking import doc_id_for
    from graphrag.operators.rerank import passage_heading
    from graphrag.rerank import passage_sentences

    writer = _rag(tmp_path, rerank="embedding")
    writer.insert(HEADED_DOCS)
    assert sorted(_kept_sentence_vectors(writer).values()) == sorted(HEADED_DOCS)
    # Another process: the question alone is embedded, every passage's sentences are read.
    embedded: list[str] = []
    order = _hybrid_order(_counted(tmp_path, embedded))
    assert order[0].startswith("Quarvale Lighthouse\n")
    assert embedded == [HEADED_QUESTION]
    # The same order as from sentences embedded at query time (an index without them).
    plain, embedded_then = tmp_path / "plain", []
    _rag(plain).insert(HEADED_DOCS)
    assert _hybrid_order(_counted(plain, embedded_then)) == order
    assert set(passage_sentences(HEADED_DOCS[1], passage_heading(HEADED_DOCS[1]))) <= set(embedded_then)
    # A deleted document takes its chunk's sentence vectors with it; the others stay.
    writer.delete_documents(doc_id_for(HEADED_DOCS[2]))
    assert sorted(_kept_sentence_vectors(writer).values()) == sorted(HEADED_DOCS[:2])


def test_an_index_without_sentence_vectors_embeds_them_at_query_time_then_gets_them_at_its_next_write(tmp_path: Path) -> None:
    _rag(tmp_path).insert(HEADED_DOCS[:2])  # an index written without the stage
    embedded: list[str] = []
    rag = _counted(tmp_path, embedded)
    assert _hybrid_order(rag)[0].startswith("Quarvale Lighthouse\n")
    assert "Quarvale Lighthouse: The tower was raised in 1841 on the northern cliff." in embedded
    # Its next write with the stage on keeps every chunk's vectors, the older ones' too.
    rag.insert(HEADED_DOCS[2])
    assert sorted(_kept_sentence_vectors(rag).values()) == sorted(HEADED_DOCS)


def test_sentence_vectors_catch_up_with_the_chunks_written_and_deleted_while_the_stage_was_off(
        tmp_path: Path) -> None:
    from graphrag.operators.chunking import doc_id_for

    _rag(tmp_path, rerank="embedding").insert(HEADED_DOCS[0])
    off = _rag(tmp_path)
    off.insert(HEADED_DOCS[1])
    off.delete_documents(doc_id_for(HEADED_DOCS[0]))
    embedded: list[str] = []
    rag = _counted(tmp_path, embedded)
    rag.insert(HEADED_DOCS[2])
    # Exactly the current chunks' vectors: the deleted one's record gone, the one written
    # meanwhile embedded with the new one.
    assert sorted(_kept_sentence_vectors(rag).values()) == sorted(HEADED_DOCS[1:])
    # A query reads every passage's sentences: only the question is embedded.
    embedded.clear()
    assert _hybrid_order(rag)[0].startswith("Quarvale Lighthouse\n")
    assert embedded == [HEADED_QUESTION]


def test_sentence_vectors_of_another_embedding_model_are_not_read(tmp_path: Path) -> None:
    import asyncio

    import numpy as np

    from graphrag.backends import storage_class
    from graphrag.config import GraphRAGConfig
    from graphrag.operators.chunking import chunk_id_for
    from graphrag.rerank import SentenceVectors, embed_sentences

    config = GraphRAGConfig(working_dir=str(tmp_path))
    store = storage_class(config, "kv")(namespace="sentence_vectors", global_config=config)
    embed = hash_embedding(256)
    passage = HEADED_DOCS[1]

    async def run() -> None:
        await SentenceVectors(lambda: store, "model-a").write(embed, {chunk_id_for(passage): passage})
        read = await SentenceVectors(lambda: store, "model-a").read([passage])
        _, [expected] = await embed_sentences(embed, [passage])
        assert np.array_equal(read[passage], expected)
        assert await SentenceVectors(lambda: store, "model-b").read([passage]) == {}

    asyncio.run(run())
