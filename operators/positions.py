"""Where each chunk came from: a chunk of a read file records its document's source and
title, and the pages or headings its text spans, so answers can cite "report.pdf p. 12-13".

Chunkers work on plain text and stay unaware of this: each chunk is found again in its
document's text, in order, and the reader's marks (an offset where a page or heading
starts) covering that span are recorded. Chunks of documents given as plain strings get
nothing, and their records keep nano-graphrag's four fields.
"""
from __future__ import annotations

import os
from bisect import bisect_right
from typing import Any, Mapping, Optional, Sequence

from graphrag.schema import ChunkRecord

# The optional fields a chunk record may carry (older working dirs have none of them).
POSITION_FIELDS = ("source", "title", "pages", "headings")
_MAX_HEADINGS = 3


def chunk_spans(text: str, contents: Sequence[str]) -> list[Optional[tuple[int, int]]]:
    """Each chunk's ``(start, end)`` in ``text``, for chunks in document order (None when a
    chunker changed the text so it cannot be found). Overlapping windows start after the
    previous one, so searching on from there keeps this linear."""
    spans: list[Optional[tuple[int, int]]] = []
    cursor = 0
    for content in contents:
        start = text.find(content, cursor)
        if start < 0:
            start = text.find(content)
        if start < 0:
            spans.append(None)
            continue
        spans.append((start, start + len(content)))
        cursor = start + 1
    return spans


def span_positions(marks: Sequence[Sequence[Any]], start: int, end: int) -> dict[str, list[Any]]:
    """The pages (first and last) and headings in effect over ``text[start:end]``; ``marks``
    are ``(offset, page, heading)`` in offset order."""
    offsets = [m[0] for m in marks]
    first = max(bisect_right(offsets, start) - 1, 0)
    covered = [m for m in marks[first:bisect_right(offsets, max(end - 1, start))]]
    pages = [m[1] for m in covered if m[1] is not None]
    headings = list(dict.fromkeys(m[2] for m in covered if m[2]))
    out: dict[str, list[Any]] = {}
    if pages:
        out["pages"] = [min(pages), max(pages)]
    if headings:
        out["headings"] = headings
    return out


def locate_chunks(chunks: Mapping[str, ChunkRecord], docs: Mapping[str, Mapping[str, Any]]) -> dict[str, ChunkRecord]:
    """``chunks`` with the position fields added for documents read from files (those with
    a ``title``); each chunk is placed in the document its record names."""
    out = dict(chunks)
    by_doc: dict[str, list[str]] = {}
    for chunk_id, record in chunks.items():
        if docs.get(record["full_doc_id"], {}).get("title") is not None:
            by_doc.setdefault(record["full_doc_id"], []).append(chunk_id)
    for doc_id, chunk_ids in by_doc.items():
        doc = docs[doc_id]
        chunk_ids.sort(key=lambda c: chunks[c]["chunk_order_index"])
        marks = doc.get("marks") or []
        for chunk_id, span in zip(chunk_ids, chunk_spans(doc["content"], [chunks[c]["content"] for c in chunk_ids])):
            record: dict[str, Any] = {**chunks[chunk_id], "source": doc.get("source"), "title": doc["title"]}
            if span is not None and marks:
                record.update(span_positions(marks, *span))
            out[chunk_id] = record  # type: ignore[assignment]
    return out


def citation(record: Mapping[str, Any]) -> Optional[str]:
    """"report.pdf p. 12-13", "handbook.docx, section Safety", "notes.jsonl#7"; None for a
    chunk that records no source."""
    source = record.get("source")
    if not source:
        return None
    path, _, key = str(source).partition("#")
    label = os.path.basename(path) + (f"#{key}" if key else "")
    pages = record.get("pages")
    if pages:
        first, last = pages[0], pages[-1]
        return f"{label} p. {first}" if first == last else f"{label} p. {first}-{last}"
    headings = record.get("headings")
    if headings:
        shown = "; ".join(headings[:_MAX_HEADINGS]) + ("; ..." if len(headings) > _MAX_HEADINGS else "")
        return f"{label}, section {shown}"
    return label


def cited_content(record: Mapping[str, Any]) -> str:
    """A chunk's text as a query's context shows it: after its citation when it has one."""
    label = citation(record)
    content = record.get("content", "")
    return f"[{label}] {content}" if label else content
