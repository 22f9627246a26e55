"""Extractive community reports and the shared Markdown renderer."""
from __future__ import annotations

from graphrag.operators.extractive_report import (
    build_extractive_report,
    community_rating,
    render_report_markdown,
)
from graphrag.schema import GRAPH_FIELD_SEP


def _graph():
    nodes = {
        "SCROOGE": {"entity_type": "PERSON", "degree": 3,
                    "description": f"Scrooge is a miser who employs Bob Cratchit.{GRAPH_FIELD_SEP}Scrooge was Marley's partner."},
        "MARLEY": {"entity_type": "PERSON", "degree": 2, "description": "Marley haunts Scrooge."},
        "BOB CRATCHIT": {"entity_type": "PERSON", "degree": 2, "description": "Bob Cratchit is the clerk of Scrooge."},
        "TINY TIM": {"entity_type": "PERSON", "degree": 1, "description": "Tiny Tim is the son of Bob Cratchit."},
    }
    edges = {
        ("MARLEY", "SCROOGE"): {"weight": 5.0, "description": "Marley was the business partner of Scrooge."},
        ("BOB CRATCHIT", "SCROOGE"): {"weight": 3.0,
                                      "description": f"Scrooge employs Bob Cratchit.{GRAPH_FIELD_SEP}Bob Cratchit fears Scrooge."},
        ("BOB CRATCHIT", "TINY TIM"): {"weight": 2.0, "description": "Tiny Tim is Bob Cratchit's son."},
        ("BOB CRATCHIT", "MARLEY"): {"weight": 1.0, "description": "Bob Cratchit heard of Marley."},
    }
    community = {"level": 0, "nodes": list(nodes), "edges": [list(k) for k in edges],
                 "sub_communities": [], "occurrence": 1.0}
    return community, nodes, edges


def test_title_from_central_entities():
    report = build_extractive_report(*_graph())
    assert report["title"] == "BOB CRATCHIT, SCROOGE and MARLEY"


def test_findings_follow_relation_weight():
    report = build_extractive_report(*_graph())
    assert [f["summary"] for f in report["findings"]] == [
        "MARLEY and SCROOGE", "BOB CRATCHIT and SCROOGE", "BOB CRATCHIT and TINY TIM", "BOB CRATCHIT and MARLEY"]
    assert report["findings"][1]["explanation"] == "Scrooge employs Bob Cratchit. Bob Cratchit fears Scrooge."
    assert GRAPH_FIELD_SEP not in report["summary"]


def test_summary_bounded_and_shape():
    community, nodes, edges = _graph()
    nodes["SCROOGE"]["description"] = GRAPH_FIELD_SEP.join(f"Scrooge met Marley on day {i}." for i in range(200))
    report = build_extractive_report(community, nodes, edges)
    assert set(report) == {"title", "summary", "rating", "rating_explanation", "findings"}
    assert 0 < len(report["summary"].split()) <= 121
    assert "4 entities" in report["rating_explanation"] and "4 relations" in report["rating_explanation"]
    assert 0.0 <= report["rating"] <= 10.0 and isinstance(report["rating"], float)
    assert report == build_extractive_report(community, nodes, edges)


def test_rating_monotonic_in_size_and_density():
    assert community_rating(10, 20) < community_rating(20, 80)  # same density, larger
    assert community_rating(10, 5) < community_rating(10, 30) < community_rating(10, 45)
    assert community_rating(0, 0) == 0.0
    assert community_rating(50, 50 * 49 // 2) == 10.0


def test_no_edge_community_uses_entity_descriptions():
    _, nodes, _ = _graph()
    community = {"level": 1, "nodes": ["TINY TIM", "MARLEY"], "edges": [], "sub_communities": [], "occurrence": 0.1}
    report = build_extractive_report(community, nodes, {})
    assert report["title"] == "MARLEY and TINY TIM"
    assert [f["summary"] for f in report["findings"]] == ["MARLEY (PERSON)", "TINY TIM (PERSON)"]
    assert report["findings"][0]["explanation"] == "Marley haunts Scrooge."
    assert report["summary"]


def test_empty_community():
    report = build_extractive_report({"nodes": [], "edges": []}, {}, {})
    assert report["findings"] == [] and report["rating"] == 0.0


def test_render_markdown():
    report = build_extractive_report(*_graph())
    md = render_report_markdown(report)
    assert md.startswith(f"# {report['title']}\n\n{report['summary']}\n\n## MARLEY and SCROOGE\n\n")
    assert "Marley was the business partner of Scrooge." in md


def test_render_markdown_tolerates_llm_shapes():
    assert render_report_markdown({"title": "T", "findings": ["plain", {"summary": "S"}]}) == "# T\n\n## plain\n\n## S"
    assert render_report_markdown({}).startswith("# ")


def test_names_mentioned_counts_what_a_regex_of_the_names_finds():
    """The summary's count of distinct names in a sentence, against the regex it stands for
    (names longest first between word boundaries), on random texts over a small alphabet
    where names overlap, nest, repeat and touch word characters of several scripts."""
    import random
    import re

    from graphrag.operators.extractive_report import names_mentioned

    rng = random.Random(7)
    alphabet = ["A", "B", "AB", " ", " ", "_", "1", "É", "中", "-", ".", "²"]
    for _ in range(3000):
        names = list(dict.fromkeys("".join(rng.choices(alphabet[:4] + ["É", "中", "_"], k=rng.randint(1, 4))).strip()
                                   for _ in range(rng.randint(1, 5))))
        names = [n for n in names if n] or ["A"]
        if rng.random() < 0.05:
            names.append("")  # an empty name, which a regex matches between any two non-word characters
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 30)))
        ordered = sorted(names, key=len, reverse=True)
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, ordered)) + r")(?!\w)")
        assert names_mentioned(text, names) == len(set(pattern.findall(text))), (text, names)
    assert names_mentioned("NEW YORK CITY AND NEW YORK", ["NEW YORK", "NEW YORK CITY", "YORK"]) == 2
    assert names_mentioned("MAYORK", ["YORK"]) == 0
