"""Record shapes shared by the pipeline stages and the stores, and the conventions of
the values stored in them (edge keys, which characters a stored text may hold).

They are plain dicts on disk (JSON / GraphML attributes), so TypedDicts document
them without costing a conversion at every boundary.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence, TypedDict, Union

# Joins several values (source chunk ids, descriptions) inside one GraphML attribute,
# the same separator nano-graphrag uses so its working dirs stay readable.
GRAPH_FIELD_SEP = "<SEP>"


# A value as JSON (or a GraphML attribute read back) holds it: stored records' fields, parsed
# model answers, request bodies. Code reading one checks its shape where it uses it. The
# containers are the read-only kinds, so a ``dict[str, str]`` or a tuple is one too.
JSONValue = Union[None, bool, int, float, str, Sequence["JSONValue"], Mapping[str, "JSONValue"]]


def edge_key(a: str, b: str) -> tuple[str, str]:
    """The one key of the edge between ``a`` and ``b``: the graph is undirected, so (a, b)
    and (b, a) are the same edge, and every dict keyed by edge holds it with sorted ends."""
    return (a, b) if a <= b else (b, a)


# Characters no stored text keeps: C0 and C1 controls other than \t \n \r, DEL, lone
# surrogates (UTF-8 cannot encode them) and U+FFFE/U+FFFF. What is left is valid in JSON,
# in UTF-8 and in GraphML (XML 1.0), and none of the removed characters carries meaning.
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def strip_control_chars(text: str, replacement: str = "") -> str:
    """``text`` without control characters (see ``_CONTROL_CHARS``), each replaced by
    ``replacement``. Documents, entity names and GraphML attributes all use this one set.
    A regex: ``str.translate`` would do a dict lookup per character. Every character of
    the set is unprintable, so a printable text (most names and descriptions) is returned
    after one scan in C, without the regex."""
    return text if text.isprintable() else _CONTROL_CHARS.sub(replacement, text)


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
