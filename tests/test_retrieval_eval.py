"""The retrieval evaluation (benchmarks/retrieval_eval.py): its reading of contexts and its metric."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from retrieval_eval import (  # noqa: E402
    PIECES,
    SPLITS,
    PassageMatcher,
    ablation_variants,
    context_passages,
    evaluate,
    load_qa,
    passage_document,
    in_split,
    ranked_titles,
    recall,
    score,
)

from graphrag.embedding import hash_embedding  # noqa: E402
from graphrag.operators.query_context import csv_section  # noqa: E402

DATA = Path(__file__).parent / "data" / "retrieval"


def test_both_formats_give_passages_and_gold_titles() -> None:
    passages, questions = load_qa(str(DATA / "corpus.json"), str(DATA / "questions.json"))
    assert passages["Quarvale"] == "Quarvale sits beside Tessaly, a slow green stream crossing meadows."
    assert passages["Elspeth Marrowind"] == "Elspeth Marrowind was born in Quarvale. She wrote poems about harbours."
    assert [q.gold for q in questions] == [{"Elspeth Marrowind", "Quarvale"}, {"Town fair"}]
    # MuSiQue / 2Wiki style, the corpus taken from the questions' paragraphs
    passages, questions = load_qa(None, str(DATA / "musique_questions.json"))
    assert sorted(passages) == ["Elspeth Marrowind", "Old mill", "Quarvale"]
    assert questions[0].gold == {"Elspeth Marrowind", "Quarvale"}


def test_recall_at_k_on_known_rankings() -> None:
    gold = {"A", "B"}
    assert recall(["A", "X", "B"], gold, 2) == 0.5
    assert recall(["A", "X", "B"], gold, 5) == 1.0
    assert recall(["X"], gold) == 0.0
    assert score([(["A", "B"], gold), (["X", "Y", "Z", "W", "V", "C"], {"C"})]) == {
        "recall@2": 50.0, "recall@5": 50.0, "anywhere": 100.0}


def test_contexts_are_read_in_order_and_matched_by_text() -> None:
    passages, _ = load_qa(str(DATA / "corpus.json"), str(DATA / "questions.json"))
    matcher = PassageMatcher(passages)
    town, mill = passage_document("Town fair", passages["Town fair"]), passage_document("Old mill", passages["Old mill"])
    naive = f"{town}\n--New Chunk--\n{mill}"
    assert ranked_titles(context_passages("naive", naive), matcher) == ["Town fair", "Old mill"]
    local = "-----Entities-----\n```csv\nid,entity\n0,X\n```\n\n" + csv_section("Sources", ["id", "content"],
                                                                              [[0, mill], [1, town], [2, mill]])
    assert ranked_titles(context_passages("local", local), matcher) == ["Old mill", "Town fair"]
    assert matcher.title("Quarvale sits beside Tessaly") == "Quarvale"  # a chunk of a longer passage
    assert matcher.title("text from nowhere") is None


@pytest.mark.timeout(300)
def test_the_evaluation_runs_end_to_end_on_a_tiny_corpus(tmp_path: Path) -> None:
    passages, questions = load_qa(str(DATA / "corpus.json"), str(DATA / "questions.json"))
    result = evaluate(passages, questions, "nlp", ["naive", "local", "hybrid"], str(tmp_path),
                      embedding_func=hash_embedding(256), splits=SPLITS)
    assert result["passages"] == 4 and result["questions"] == 2
    for mode in ("naive", "local", "hybrid"):
        for split in SPLITS:
            r = result["modes"][mode][split]
            assert 0 <= r["recall@2"] <= r["recall@5"] <= r["anywhere"] <= 100
    # Bag-of-words vectors: naive finds the fair's passage and Elspeth's, never Quarvale's
    # (it shares no word with the question): (1 + 1/2) / 2 questions; dev is the first
    # question (Elspeth's), test the second (the fair's).
    naive = result["modes"]["naive"]
    assert (naive["all"]["anywhere"], naive["dev"]["anywhere"], naive["test"]["anywhere"]) == (75.0, 50.0, 100.0)
    # The same index asked again without indexing gives the same scores.
    again = evaluate(passages, questions, "nlp", ["naive", "local", "hybrid"], str(tmp_path),
                     embedding_func=hash_embedding(256), reuse_index=True, splits=SPLITS)
    assert again["reused_index"] is True and "index_wall_s" not in again
    for mode in ("naive", "local", "hybrid"):
        assert {s: again["modes"][mode][s] for s in SPLITS} == {s: result["modes"][mode][s] for s in SPLITS}


def test_splits_are_even_and_odd_question_numbers() -> None:
    assert [i for i in range(6) if in_split(i, "dev")] == [0, 2, 4]
    assert [i for i in range(6) if in_split(i, "test")] == [1, 3, 5]
    assert [i for i in range(6) if in_split(i, "all")] == list(range(6))


def test_the_bundled_multihop_set_needs_two_or_three_of_its_passages() -> None:
    bundled = Path(__file__).parent.parent / "benchmarks" / "data" / "multihop"
    passages, questions = load_qa(str(bundled / "corpus.json"), str(bundled / "questions.json"))
    assert len(questions) >= 20
    for q in questions:
        assert 2 <= len(q.gold) <= 3 and q.gold <= set(passages), q.text


def test_the_ablation_asks_hybrid_with_no_piece_each_alone_and_all(tmp_path: Path) -> None:
    from graphrag.operators import query_hybrid, walk_graph

    variants = ablation_variants()
    assert list(variants) == ["none", *PIECES, "all"]
    assert variants["none"] == {"FACT_SEED_SHARE": 0.0, "SYNONYM_MIN_COSINE": None}
    for piece, constants in PIECES.items():
        assert {k: v for k, v in variants[piece].items() if variants["none"][k] != v} == constants
    assert variants["all"] == {k: v for c in PIECES.values() for k, v in c.items()}
    shipped = (query_hybrid.FACT_SEED_SHARE, walk_graph.SYNONYM_MIN_COSINE)
    passages, questions = load_qa(str(DATA / "corpus.json"), str(DATA / "questions.json"))
    result = evaluate(passages, questions, "nlp", ["hybrid"], str(tmp_path), embedding_func=hash_embedding(256),
                      variants=variants)
    assert set(result["modes"]) == {"hybrid", *(f"hybrid[{name}]" for name in variants)}
    for r in result["modes"].values():
        assert 0 <= r["all"]["recall@2"] <= r["all"]["recall@5"] <= r["all"]["anywhere"] <= 100
    # Every constant is put back after its run.
    assert (query_hybrid.FACT_SEED_SHARE, walk_graph.SYNONYM_MIN_COSINE) == shipped


def test_the_described_multihop_set_never_names_its_first_passage() -> None:
    import json
    import re

    path = Path(__file__).parent.parent / "benchmarks" / "data" / "multihop_described" / "questions.json"
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    _, questions = load_qa(None, str(path))
    assert len(questions) >= 20 and all(len(q.gold) == 2 for q in questions)
    for q in raw:
        first = q["paragraphs"][0]["title"]
        assert re.sub(r" \(.*\)$", "", first).lower() not in q["question"].lower(), q["question"]


def test_the_2wiki_multihop_set_is_well_formed_and_its_halves_share_nothing() -> None:
    import json
    import re

    bundled = Path(__file__).parent.parent / "benchmarks" / "data" / "multihop_2wiki"
    with open(bundled / "questions.json", encoding="utf-8") as f:
        raw = json.load(f)
    passages, questions = load_qa(str(bundled / "corpus.json"), str(bundled / "questions.json"))
    assert len(questions) >= 40 and len(passages) >= 300
    for q, entry in zip(questions, raw):
        assert len(q.gold) == 2 and q.gold <= set(passages), q.text
        first, second = (p["title"] for p in entry["paragraphs"])
        if entry["type"] == "bridge":
            # Reached only through the first passage: the question never names the second's
            # title, and the answer is a fact the second one states.
            assert re.sub(r" \(.*\)$", "", second).lower() not in q.text.lower(), q.text
            assert entry["answer"] in passages[second], q.text
        else:
            assert entry["type"] == "comparison" and entry["answer"] in {"yes", "no", first, second}, q.text
    halves = {split: [(q, raw[i]["type"]) for i, q in enumerate(questions) if in_split(i, split)]
              for split in ("dev", "test")}
    for half in halves.values():
        assert len(half) >= 20 and {kind for _, kind in half} == {"bridge", "comparison"}
    dev_gold = set().union(*(q.gold for q, _ in halves["dev"]))
    test_gold = set().union(*(q.gold for q, _ in halves["test"]))
    assert not dev_gold & test_gold
    assert not {q.text for q, _ in halves["dev"]} & {q.text for q, _ in halves["test"]}


def test_the_2wiki_corpus_keeps_the_passages_around_each_questions_gold() -> None:
    import importlib.util

    path = Path(__file__).parent.parent / "benchmarks" / "data" / "multihop_2wiki" / "build_corpus.py"
    spec = importlib.util.spec_from_file_location("build_corpus_2wiki", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = [{"title": f"P{i}", "text": f"passage {i}"} for i in range(30)]
    questions = [{"paragraphs": [{"title": "P7", "is_supporting": True}, {"title": "P5", "is_supporting": True}]},
                 {"paragraphs": [{"title": "P27", "is_supporting": True}, {"title": "P0", "is_supporting": False}]}]
    kept = [p["title"] for p in module.build(source, questions)]
    w = module.WINDOW
    assert kept == [f"P{i}" for i in [*range(5 - w, 7 + w + 1), *range(27 - w, 30)]]
