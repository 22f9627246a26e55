"""The public typed records read stored dicts as any version, or another tool, wrote them."""
from __future__ import annotations

from graphrag.records import Chunk, CommunityReport, Document, Entity, Relation
from graphrag.schema import GRAPH_FIELD_SEP


def test_records_take_defaults_for_missing_fields() -> None:
    assert Document.from_stored("doc-1", {"content": "abc"}) == Document(id="doc-1", chars=3)
    assert Entity.from_stored("ACME", {}) == Entity(name="ACME")
    assert Relation.from_stored("A", "B", {"weight": None}).weight == 0.0
    chunk = Chunk.from_stored("chunk-1", {"content": "x", "full_doc_id": "doc-1", "chunk_order_index": 2})
    assert (chunk.doc_id, chunk.order, chunk.tokens) == ("doc-1", 2, 0)


def test_graph_attributes_are_split_and_quoted_types_unwrapped() -> None:
    node = {"entity_type": '"PERSON"', "description": "a", "source_id": f"chunk-1{GRAPH_FIELD_SEP}chunk-2"}
    assert Entity.from_stored("ADA", node) == Entity("ADA", "PERSON", "a", ("chunk-1", "chunk-2"))


def test_a_report_rated_in_words_reads_as_a_number() -> None:
    record = {"level": 1, "nodes": ["A"], "report_json": {"title": "T", "rating": "8/10", "findings": []},
              "report_string": "# T"}
    report = CommunityReport.from_stored("3", record)
    assert report.rating == 8.0 and report.community.id == "3" and report.community.level == 1
    assert CommunityReport.from_stored("4", {"report_json": "not a dict"}).rating == 0.0


def test_merged_descriptions_read_one_per_line() -> None:
    node = {"description": f"a glassblower{GRAPH_FIELD_SEP}founded the Works"}
    assert Entity.from_stored("ADA", node).description == "a glassblower\nfounded the Works"
    assert Relation.from_stored("A", "B", {"description": f"x{GRAPH_FIELD_SEP}y"}).description == "x\ny"
