"""The shipped resolution label sets are well-formed, so a score computed from them means what
it says: every labelled name is one the set's extraction really produces (the replayed model
answers, or the offline extractor run on each paragraph, in the half the pair is scored in),
alias groups are disjoint within each half, no must-stay-apart pair sits inside a group, and
each set has look-alike pairs of every kind its language (or its offline names) can show. No
server and no shared data: the files only."""
from __future__ import annotations

import json
import os

import pytest

from graphrag.operators.chunking import chunk_id_for
from graphrag.operators.extraction import EXTRACTED, read_extraction_answer
from graphrag.operators.nlp_extraction import extract_chunk_nlp

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
LABELS = os.path.join(BENCH, "resolution_labels")
KINDS = {"number", "generation", "initial", "qualifier", "article", "accent", "title"}


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _split_sets() -> list[str]:
    """Label files over a corpus shipped in the repo (``set:<name>``), which are split in halves."""
    return sorted(p for p in os.listdir(LABELS) if _load(os.path.join(LABELS, p))["corpus"].startswith("set:"))


def _names_by_half(label: dict) -> dict[str, set[str]]:
    """The names the label set's extractor gives each half: the replayed model answers, or the
    offline extractor (``"extractor": "nlp"``) run on each paragraph, which is one chunk."""
    corpus = _load(os.path.join(BENCH, "resolution_corpora", label["corpus"][len("set:"):] + ".json"))
    offline = label["extractor"] == "nlp"
    answers = {} if offline else _load(
        os.path.join(BENCH, "model_answers", label["extractor"][len("model:"):]))["answers"]
    halves: dict[str, set[str]] = {}
    for doc in corpus["documents"]:
        if offline:
            extraction = extract_chunk_nlp(doc["text"].strip())
            entities, relations = extraction["entities"], extraction["relations"]
        else:
            entities, relations, malformed, status = read_extraction_answer(answers[chunk_id_for(doc["text"].strip())])
            assert status == EXTRACTED and not malformed, doc["text"][:60]
        names = halves.setdefault(doc["half"], set())
        names.update(e["name"] for e in entities)
        names.update(n for r in relations for n in (r["source"], r["target"]))
    return halves


def test_there_are_three_split_sets() -> None:
    assert len(_split_sets()) >= 3


@pytest.mark.parametrize("path", _split_sets())
def test_label_set_is_well_formed(path: str) -> None:
    label = _load(os.path.join(LABELS, path))
    halves = _names_by_half(label)
    assert set(halves) == {"dev", "test"}

    def in_one_half(names: list[str]) -> bool:
        return any(set(names) <= present for present in halves.values())

    for group in label["groups"]:
        assert len(group) == len(set(group)) >= 2, group
        assert in_one_half(group), f"{group} never occurs together in one half"
    # Scores are per half, so groups must be disjoint within each half; one name may stand for
    # different things in the two halves (a first name of one person in each).
    grouped: dict[str, dict[str, int]] = {}
    for half, present in halves.items():
        seen = grouped.setdefault(half, {})
        for index, group in enumerate(label["groups"]):
            for name in set(group) & present if len(set(group) & present) >= 2 else ():
                assert name not in seen, f"{name} is in two groups in the {half} half"
                seen[name] = index
    for pair in label["apart"]:
        a, b = pair["names"]
        assert pair["kind"] in KINDS, pair
        assert a != b and in_one_half([a, b]), f"{pair} never occurs together in one half"
        assert all(seen.get(a, -1) != seen.get(b, -2) for seen in grouped.values()), \
            f"{pair} must stay apart but is labelled one thing"
    # A name given to two referents is its own thing: in no group, and found where it is said to be.
    for name in label.get("ambiguous", {}):
        assert not any(name in group for group in label["groups"]), name
        assert any(name in present for present in halves.values()), name
    # A kind a language cannot show (Chinese has no articles or accents) is declared, not missing.
    assert {pair["kind"] for pair in label["apart"]} | set(label.get("kinds_not_applicable", ())) == KINDS


def test_each_split_corpus_has_offline_labels_beside_its_model_labels() -> None:
    """The offline path of a shipped corpus is scored on labels made for the offline extractor's
    own names, not on the model answers' labels."""
    by_corpus: dict[str, set[str]] = {}
    for path in _split_sets():
        label = _load(os.path.join(LABELS, path))
        by_corpus.setdefault(label["corpus"], set()).add("nlp" if label["extractor"] == "nlp" else "model")
    assert len(by_corpus) >= 3 and all(paths == {"model", "nlp"} for paths in by_corpus.values()), by_corpus
