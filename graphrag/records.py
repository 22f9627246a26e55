"""Public typed records: what the engine hands to applications.

Stores keep plain dicts (JSON, GraphML attributes; see :mod:`graphrag.schema`), which is what
makes working dirs portable and cheap to read. These frozen dataclasses are the typed view of
those dicts at the API's edge, each built by a ``from_stored`` that tolerates records written
by earlier versions (missing fields take their defaults).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from graphrag.schema import GRAPH_FIELD_SEP


def split_field(value: Any) -> tuple[str, ...]:
    """A ``<SEP>``-joined graph attribute as its parts (empty parts dropped)."""
    if not value:
        return ()
    return tuple(part for part in str(value).split(GRAPH_FIELD_SEP) if part)


@dataclass(frozen=True)
class Document:
    id: str
    source: Optional[str] = None
    chunk_ids: tuple[str, ...] = ()
    chars: int = 0

    @classmethod
    def from_stored(cls, doc_id: str, record: Mapping[str, Any]) -> "Document":
        return cls(id=doc_id, source=record.get("source"), chunk_ids=tuple(record.get("chunk_ids", ())),
                   chars=len(record.get("content", "")))


@dataclass(frozen=True)
class Chunk:
    id: str
    content: str
    doc_id: str
    order: int = 0
    tokens: int = 0

    @classmethod
    def from_stored(cls, chunk_id: str, record: Mapping[str, Any]) -> "Chunk":
        return cls(id=chunk_id, content=record.get("content", ""), doc_id=record.get("full_doc_id", ""),
                   order=int(record.get("chunk_order_index", 0)), tokens=int(record.get("tokens", 0)))


@dataclass(frozen=True)
class Entity:
    name: str
    type: str = "UNKNOWN"
    description: str = ""
    source_chunk_ids: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # other names entity resolution merged into this one

    @classmethod
    def from_stored(cls, name: str, node: Mapping[str, Any]) -> "Entity":
        return cls(name=name, type=str(node.get("entity_type") or "UNKNOWN").strip('"'),
                   description=str(node.get("description") or ""),
                   source_chunk_ids=split_field(node.get("source_id")), aliases=split_field(node.get("aliases")))


@dataclass(frozen=True)
class Relation:
    source: str
    target: str
    description: str = ""
    weight: float = 1.0
    source_chunk_ids: tuple[str, ...] = ()

    @classmethod
    def from_stored(cls, source: str, target: str, edge: Mapping[str, Any]) -> "Relation":
        return cls(source=source, target=target, description=str(edge.get("description") or ""),
                   weight=float(edge.get("weight", 1.0) or 0.0), source_chunk_ids=split_field(edge.get("source_id")))


@dataclass(frozen=True)
class Community:
    id: str
    level: int
    title: str = ""
    nodes: tuple[str, ...] = ()
    edges: tuple[tuple[str, str], ...] = ()
    chunk_ids: tuple[str, ...] = ()
    sub_communities: tuple[str, ...] = ()
    occurrence: float = 0.0

    @classmethod
    def from_stored(cls, community_id: str, schema: Mapping[str, Any]) -> "Community":
        return cls(id=community_id, level=int(schema.get("level", 0)), title=str(schema.get("title") or ""),
                   nodes=tuple(schema.get("nodes", ())), edges=tuple(tuple(e) for e in schema.get("edges", ())),
                   chunk_ids=tuple(schema.get("chunk_ids", ())),
                   sub_communities=tuple(schema.get("sub_communities", ())),
                   occurrence=float(schema.get("occurrence", 0.0)))


@dataclass(frozen=True)
class CommunityReport:
    community: Community
    title: str = ""
    summary: str = ""
    rating: float = 0.0
    findings: tuple[Mapping[str, str], ...] = ()
    text: str = ""  # the report as the prompts see it (markdown)

    @classmethod
    def from_stored(cls, community_id: str, record: Mapping[str, Any]) -> "CommunityReport":
        from graphrag.operators.report_parsing import stored_rating

        report = record.get("report_json") if isinstance(record.get("report_json"), dict) else {}
        return cls(community=Community.from_stored(community_id, record),
                   title=str(report.get("title") or record.get("title") or ""),
                   summary=str(report.get("summary") or ""), rating=stored_rating(record),
                   findings=tuple(report.get("findings") or ()), text=str(record.get("report_string") or ""))
