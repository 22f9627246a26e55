"""`graphrag eval`: retrieval recall per passage mode on labelled questions, no LLM."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphrag import GraphRAG
from graphrag.cli import EXIT_USAGE, main
from graphrag.embedding import hash_embedding
from graphrag.errors import LabelledQuestionsError
from graphrag.evaluation import gold_ranks, passage_modes, read_labelled, score_ranks
from graphrag.records import Chunk, Document

DOCS = {
    "elspeth.txt": "Elspeth Marrowind was born in Quarvale and wrote poems about its harbour.",
    "quarvale.txt": "Tessaly, a slow green stream crossing meadows, curls around Quarvale.",
    "mill.txt": "A river flows by the mill, turning its wheel through long wet autumn days and nights.",
    "lighthouse.txt": "Nobody was ever seen near that lighthouse after storms wrecked its lamp and stairs.",
}


def _chunk(doc: str, content: str) -> Chunk:
    return Chunk(id=f"c-{doc}-{content[:5]}", content=content, doc_id=f"doc-{doc}",
                 documents=(Document(id=f"doc-{doc}", source=doc),))


def test_gold_items_rank_by_distinct_document_or_by_the_chunk_holding_the_snippet() -> None:
    chunks = [_chunk("a", "first part of a"), _chunk("a", "second part of a"), _chunk("b", "all of b"),
              _chunk("c", "The  Harbour of c")]
    by_source, by_passage = read_labelled([
        json.dumps({"question": "q1", "gold_sources": ["b", "doc-a", "z"]}),
        "",
        json.dumps({"question": "q2", "gold_passages": ["the harbour\nof C", "second part"]}),
    ])
    assert gold_ranks(by_source, chunks) == [1, 0, None]  # a's two chunks are one item
    assert gold_ranks(by_passage, chunks) == [3, 1]
    scores = score_ranks([[1, 0, None], [3, 1]], ks=(1, 2))
    assert scores == {"recall@1": round(100 * (1 / 3 + 0) / 2, 1), "recall@2": round(100 * (2 / 3 + 1 / 2) / 2, 1),
                      "in_context": round(100 * (2 / 3 + 1) / 2, 1)}


@pytest.mark.parametrize("line", ["not json", json.dumps({"gold_sources": ["a"]}), json.dumps({"question": "q"})])
def test_a_line_without_question_or_gold_is_refused(line: str) -> None:
    with pytest.raises(LabelledQuestionsError, match="line 1"):
        read_labelled([line])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wd = tmp_path_factory.mktemp("eval")
    rag = GraphRAG(working_dir=str(wd), embedding_func=hash_embedding(384), extraction="nlp", show_progress=False)
    rag.insert(list(DOCS.values()), sources=list(DOCS))
    return wd


def test_eval_reports_recall_per_passage_mode_as_json(indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"question": "Where was Elspeth Marrowind born?", "gold_sources": ["elspeth.txt"]},
        {"question": "Who wrote poems about the harbour of Quarvale?", "gold_passages": ["wrote poems about its harbour"]},
        {"question": "What stream curls around Quarvale?", "gold_sources": ["quarvale.txt", "nowhere.txt"]},
    ]))
    assert main(["eval", str(questions), "-w", str(indexed), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 3
    assert set(report["modes"]) == set(passage_modes()) >= {"naive", "local", "hybrid"}
    for scores in report["modes"].values():
        assert set(scores) == {"recall@2", "recall@5", "in_context"}
        # nowhere.txt is never found: at most 5 of the 6 gold items over the three questions
        assert 0 <= scores["recall@2"] <= scores["recall@5"] <= scores["in_context"] <= 100 * (1 + 1 + 0.5) / 3 + 0.1
    # Four passages only: every mode's context holds every indexed passage it reached.
    assert report["modes"]["naive"]["in_context"] == round(100 * (1 + 1 + 0.5) / 3, 1)

    assert main(["eval", str(questions), "-w", str(indexed), "--modes", "naive", "-k", "1"]) == 0
    table = capsys.readouterr().out
    assert "recall@1" in table and "naive" in table and "hybrid" not in table


def test_eval_refuses_a_mode_without_passages(indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q", "gold_sources": ["a"]}))
    with pytest.raises(SystemExit) as exited:
        main(["eval", str(questions), "-w", str(indexed), "--modes", "global"])
    assert exited.value.code == EXIT_USAGE


def test_eval_with_a_rerank_endpoint(indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str], llm_server: Any) -> None:
    monkeypatch.setenv("GRAPHRAG_EMBEDDING", "hash")
    monkeypatch.setenv("GRAPHRAG_RERANK_API_KEY", "secret")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "What stream curls around Quarvale?", "gold_sources": ["quarvale.txt"]}))
    assert main(["eval", str(questions), "-w", str(indexed), "--modes", "hybrid", "-k", "1", "--json",
                 "--rerank", f"{llm_server.base_url}/rerank"]) == 0
    report = json.loads(capsys.readouterr().out)
    # The passage holding most of the question's words is first after reranking.
    assert report["modes"]["hybrid"]["recall@1"] == 100.0
    assert len(llm_server.rerank_requests) == 1
