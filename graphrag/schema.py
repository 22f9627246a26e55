"""Record shapes shared by the pipeline stages and the stores.

They are plain dicts on disk (JSON / GraphML attributes), so TypedDicts document
them without costing a conversion at every boundary.
"""
from __future__ import annotations

from typing import TypedDict

# Joins several values (source chunk ids, descriptions) inside one GraphML attribute,
# the same separator nano-graphrag uses so its working dirs stay readable.
GRAPH_FIELD_SEP = "<SEP>"


class DocumentRecord(TypedDict, total=False):
    content: str
    source: str  # file path or caller-given label, when known


class ChunkRecord(TypedDict):
    content: str
    tokens: int
    full_doc_id: str
    chunk_order_index: int


class EntityRecord(TypedDict):
    """One entity as one chunk's extraction saw it."""

    name: str
    type: str
    description: str


class RelationRecord(TypedDict):
    """One relationship as one chunk's extraction saw it."""

    source: str
    target: str
    description: str
    weight: float


class ChunkExtraction(TypedDict):
    """What extraction found in one chunk; kept so merges can be rebuilt without the LLM."""

    entities: list[EntityRecord]
    relations: list[RelationRecord]


class Finding(TypedDict):
    summary: str
    explanation: str


class ReportJSON(TypedDict):
    title: str
    summary: str
    rating: float
    rating_explanation: str
    findings: list[Finding]


class CommunitySchema(TypedDict):
    level: int
    title: str
    nodes: list[str]
    edges: list[list[str]]
    chunk_ids: list[str]
    occurrence: float
    sub_communities: list[str]
