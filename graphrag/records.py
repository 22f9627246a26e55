"""Public typed records: what the engine hands to applications.

Graph calls, retrieval and cited answers return these records too; the fields after a
record's stored ones (``documents``, ``distance``, ``score``, ``via``...) are filled by the
call that returns them and keep their defaults elsewhere.

Stores keep plain dicts (JSON, GraphML attributes; see :mod:`graphrag.schema`), which is what
makes working dirs portable and cheap to read. These frozen dataclasses are the typed view of
those dicts at the API's edge, each built by a ``from_stored`` that tolerates records written
by earlier versions (missing fields take their defaults).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from graphrag.operators.modes import get_mode
from graphrag.schema import GRAPH_FIELD_SEP, JSONValue


def split_field(value: JSONValue) -> tuple[str, ...]:
    """A ``<SEP>``-joined graph attribute as its parts (empty parts dropped)."""
    if not value:
        return ()
    return tuple(part for part in str(value).split(GRAPH_FIELD_SEP) if part)


def community_ids(clusters: JSONValue) -> tuple[str, ...]:
    """Community ids of a node's stored ``clusters`` attribute (JSON ``[{"level", "cluster"}]``),
    coarsest level first; unreadable memberships are skipped."""
    if not clusters:
        return ()
    try:
        # Of any shape: a wrong one is caught below.
        memberships: Any = json.loads(clusters) if isinstance(clusters, str) else clusters
        pairs = sorted((int(m["level"]), str(m["cluster"])) for m in memberships)
    except (ValueError, TypeError, KeyError):
        return ()
    return tuple(dict.fromkeys(cluster for _, cluster in pairs))


def _readable(description: JSONValue) -> str:
    """A description merged from several chunks, one per line (not ``<SEP>``-joined)."""
    return "\n".join(split_field(description))


@dataclass(frozen=True)
class Document:
    id: str
    source: Optional[str] = None
    chunk_ids: tuple[str, ...] = ()
    chars: int = 0
    title: Optional[str] = None  # documents read from files (``insert_files``) have one

    @classmethod
    def from_stored(cls, doc_id: str, record: Mapping[str, Any]) -> "Document":
        return cls(id=doc_id, source=record.get("source"), chunk_ids=tuple(record.get("chunk_ids", ())),
                   chars=len(record.get("content", "")), title=record.get("title"))


@dataclass(frozen=True)
class Chunk:
    id: str
    content: str
    doc_id: str
    order: int = 0
    tokens: int = 0
    documents: tuple[Document, ...] = ()  # the document it belongs to (id and source)
    score: Optional[float] = None  # retrieval: vector similarity (naive) or links to the entities (local)
    # Where the chunk came from, for chunks of documents read from files (else empty):
    # the file's path or URL, its title, the first and last page, the headings spanned.
    source: Optional[str] = None
    title: Optional[str] = None
    pages: tuple[int, ...] = ()
    headings: tuple[str, ...] = ()

    @classmethod
    def from_stored(cls, chunk_id: str, record: Mapping[str, Any]) -> "Chunk":
        return cls(id=chunk_id, content=record.get("content", ""), doc_id=record.get("full_doc_id", ""),
                   order=int(record.get("chunk_order_index", 0)), tokens=int(record.get("tokens", 0)),
                   source=record.get("source"), title=record.get("title"),
                   pages=tuple(record.get("pages") or ()), headings=tuple(record.get("headings") or ()))

    @property
    def citation(self) -> Optional[str]:
        """"report.pdf p. 12-13", "handbook.docx, section Safety"; None without a source."""
        from graphrag.operators.positions import citation

        return citation({"source": self.source, "pages": self.pages, "headings": self.headings})


@dataclass(frozen=True)
class Entity:
    name: str
    type: str = "UNKNOWN"
    description: str = ""
    source_chunk_ids: tuple[str, ...] = ()
    documents: tuple[Document, ...] = ()  # the documents of its source chunks
    communities: tuple[str, ...] = ()  # ids of the communities it belongs to, coarsest level first
    degree: Optional[int] = None
    distance: Optional[int] = None  # graph calls: hops from where the call started
    via: Optional["Relation"] = None  # traversals: the edge that reached it, walked towards it
    score: Optional[float] = None  # search: similarity; graph_search: similarity decayed per hop
    aliases: tuple[str, ...] = ()  # other names entity resolution merged into this one

    @classmethod
    def from_stored(cls, name: str, node: Mapping[str, Any]) -> "Entity":
        return cls(name=name, type=str(node.get("entity_type") or "UNKNOWN").strip('"'),
                   description=_readable(node.get("description")),
                   source_chunk_ids=split_field(node.get("source_id")),
                   communities=community_ids(node.get("clusters")), aliases=split_field(node.get("aliases")))


@dataclass(frozen=True)
class Label:
    """An entity as a name picker shows it (label search, popular entities)."""

    name: str
    type: str
    degree: int


@dataclass(frozen=True)
class Relation:
    source: str
    target: str
    description: str = ""
    weight: float = 1.0
    source_chunk_ids: tuple[str, ...] = ()
    documents: tuple[Document, ...] = ()  # the documents of its source chunks

    @classmethod
    def from_stored(cls, source: str, target: str, edge: Mapping[str, Any]) -> "Relation":
        return cls(source=source, target=target, description=_readable(edge.get("description")),
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
    documents: tuple[Document, ...] = ()  # the documents of the community's chunks

    @classmethod
    def from_stored(cls, community_id: str, record: Mapping[str, Any]) -> "CommunityReport":
        from graphrag.operators.report_parsing import stored_rating

        report = record.get("report_json") if isinstance(record.get("report_json"), dict) else {}
        return cls(community=Community.from_stored(community_id, record),
                   title=str(report.get("title") or record.get("title") or ""),
                   summary=str(report.get("summary") or ""), rating=stored_rating(record),
                   findings=tuple(report.get("findings") or ()), text=str(record.get("report_string") or ""))


@dataclass(frozen=True)
class Path:
    """A walk through the graph: ``hops[i]`` goes from ``hops[i].source`` to ``hops[i].target``."""

    hops: tuple[Relation, ...]

    @property
    def entities(self) -> tuple[str, ...]:
        return (self.hops[0].source,) + tuple(h.target for h in self.hops) if self.hops else ()

    def __len__(self) -> int:
        return len(self.hops)


@dataclass(frozen=True)
class Subgraph:
    """Entities around some seeds, the relations among them and the communities they belong to.
    ``truncated``: a bound (``max_nodes``, edges scanned) cut it short."""

    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()
    communities: tuple[Community, ...] = ()
    truncated: bool = False


@dataclass(frozen=True)
class Retrieval:
    """What a query mode retrieved for a question, in the order the context holds it.

    ``context`` is exactly the string ``only_need_context`` returns; it is rendered from these
    records by the same packing, so it holds what they hold. A citation ``[n]`` refers to
    ``chunks[n - 1]`` (local, naive) or ``reports[n - 1]`` (global).
    """

    question: str
    mode: str
    chunks: tuple[Chunk, ...] = ()
    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()
    reports: tuple[CommunityReport, ...] = ()
    context: str = ""
    context_groups: tuple[str, ...] = ()  # global: the report tables, one per map call

    def citable(self) -> Sequence[Any]:
        """What ``[n]`` refers to: the reports or the chunks, as the mode cites (``QueryMode.cites``)."""
        return self.reports if get_mode(self.mode).cites == "reports" else self.chunks


@dataclass(frozen=True)
class Reference:
    """One source an answer cites as ``[number]``: a chunk (local, naive; ``chunk_id``) or a
    community report (global; ``report_id``, with the documents of its chunks)."""

    number: int
    documents: tuple[Document, ...]
    excerpt: str
    chunk_id: Optional[str] = None
    report_id: Optional[str] = None

    def line(self) -> str:
        where = ", ".join(d.source or d.id for d in self.documents) or "unknown document"
        what = f"chunk {self.chunk_id}" if self.chunk_id else f"community report {self.report_id}"
        return f"[{self.number}] {where} ({what}): {self.excerpt}"


@dataclass(frozen=True)
class Answer:
    """An answer with the sources it cites; ``str()`` is the answer then its reference list."""

    text: str
    references: tuple[Reference, ...] = ()
    retrieval: Optional[Retrieval] = None

    def __str__(self) -> str:
        return (self.text.rstrip() + self.reference_list()) if self.references else self.text

    def reference_list(self) -> str:
        """What follows the text in ``str()``: a blank line, then one line per reference
        (empty without references)."""
        if not self.references:
            return ""
        return "\n\nReferences:\n" + "\n".join(r.line() for r in self.references)
