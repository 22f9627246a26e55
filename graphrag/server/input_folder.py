"""What a document job runs: its *parts*, each naming one document, and the input folder's scan.

A part is a small JSON request: ``{"op": "insert", "texts", "sources"}`` (text),
``{"op": "insert_read", "documents"}`` (an upload a reader read) or ``{"op": "files",
"paths", "states"}`` (a file of the input folder, read when the job runs, with its size and
modification time when the scan found it). A job's parts of one kind
run as one insert, so a job commits once per kind it holds (an upload or a text insert:
once). A failed or cancelled document keeps its part, which is how reprocess sends it again.

``POST /documents/scan`` walks the input folder as ``graphrag index DIR`` does
(``file_insert.walk``) and indexes the files whose size or modification time changed since
the last scan that read them (``scanned.json`` beside the statuses); a file no reader could
read fails with the reason and is tried again by the next scan. Only files inside the folder
are read, checked as they are read: a symlink whose target lies outside it (``notes.txt ->
~/.ssh/...``) fails as outside, so whoever may drop files into the folder cannot have the
server index files they could not read themselves; special files (FIFOs, devices) are left
alone.
"""
from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any, Optional

from graphrag.server.doc_status import STATUS_DIR, read_json, write_json

if TYPE_CHECKING:
    from graphrag.graphrag import GraphRAG
    from graphrag.schema import JSONValue

SCANNED_FILE = "scanned.json"
OUTSIDE = "outside the input folder (a symlink out of it?): not read"
FILE_ID = "file:"  # a folder's file is known by its path until it is read (then by its content's id)


def documents_of(part: dict[str, Any]) -> list[tuple[str, Optional[str]]]:
    """(id, source) of the documents a part indexes: the id ``prepare_documents`` gives the
    cleaned text (an empty text indexes nothing), or a file's path id."""
    from graphrag.operators.documents import prepare_documents

    if part["op"] == "files":
        return [(FILE_ID + p, p) for p in part["paths"]]
    if part["op"] == "insert":
        texts, sources = part["texts"], part["sources"]
    else:
        texts, sources = [d["text"] for d in part["documents"]], [d["source"] for d in part["documents"]]
    prepared, _ = prepare_documents(texts, sources)
    return [(doc_id, record.get("source")) for doc_id, record in prepared.items()]


async def run_parts(writer: "GraphRAG", parts: list[dict[str, Any]], input_dir: Optional[str]) -> dict[str, Any]:
    """Index the parts, one write per kind; the write's stats (with several kinds, by kind).
    A request kept by an earlier server is one part itself. A file is read only if it lies
    inside ``input_dir`` as it is read (a scan's, or a reprocess of one whose file has since
    become a symlink out of the folder); any other is skipped as outside it."""
    from graphrag.readers import Mark, ReadDocument

    merged: dict[str, dict[str, list[Any]]] = {}
    for part in parts:
        into = merged.setdefault(part["op"], {})
        for key, values in part.items():
            if key != "op":
                into.setdefault(key, []).extend(values)
    stats: dict[str, Any] = {}
    if "insert" in merged:
        stats["insert"] = await writer.ainsert(merged["insert"]["texts"], merged["insert"]["sources"])
    if "insert_read" in merged:
        stats["insert_read"] = await writer.ainsert_read([
            ReadDocument(d["text"], d["source"], d["title"], [Mark(**m) for m in d["marks"]])
            for d in merged["insert_read"]["documents"]])
    if "files" in merged:
        root = os.path.realpath(input_dir) if input_dir is not None else None
        paths = merged["files"]["paths"]
        outside = {p for p in paths if root is None or not _inside(p, root)}
        report = (await writer.ainsert_files([p for p in paths if p not in outside])).to_dict()
        report["skipped"] += [{"path": p, "reason": OUTSIDE} for p in paths if p in outside]
        stats["files"] = report
    return next(iter(stats.values())) if len(stats) == 1 else stats


def failed_files(stats: dict[str, Any]) -> dict[str, str]:
    """The path ids of the files a job's reading skipped, with why."""
    report = stats.get("files", stats)
    return {FILE_ID + s["path"]: s["reason"] for s in report.get("skipped", []) if isinstance(s, dict)}


def _state(path: str) -> list[int]:
    found = os.stat(path)
    return [found.st_size, found.st_mtime_ns]


def _scanned_path(working_dir: str) -> str:
    return os.path.join(working_dir, STATUS_DIR, SCANNED_FILE)


async def scan_parts(input_dir: str, working_dir: str) -> list[dict[str, Any]]:
    """One part per file of the folder that is new or changed since the last scan."""
    from graphrag.file_insert import walk
    from graphrag.readers import reader_for

    files = await asyncio.to_thread(walk, [input_dir])
    scanned: dict[str, JSONValue] = read_json(_scanned_path(working_dir), {})
    # As in `graphrag index DIR`, a folder's file no reader knows is left alone.
    parts = []
    for path, _ in files:
        if reader_for(path) is None or not os.path.isfile(path):
            continue
        state = _state(path)
        if scanned.get(path) != state:
            parts.append({"op": "files", "paths": [path], "states": [state]})
    return parts


def _inside(path: str, root: str) -> bool:
    """Whether ``path``, its symlinks followed, lies inside the folder ``root`` (a real path)."""
    return os.path.commonpath([os.path.realpath(path), root]) == root


def record_scanned(working_dir: str, parts: list[dict[str, Any]], failed: dict[str, str]) -> None:
    """Remember the files a job read (not the failed ones: the next scan tries them again),
    each as the scan saw it before reading: a file edited while the job ran differs from
    that, so the next scan reads it again rather than keeping the older text for good."""
    seen = [(p, s) for part in parts if part["op"] == "files"
            for p, s in zip(part["paths"], part.get("states") or [None] * len(part["paths"]))]
    if not seen:
        return
    scanned = read_json(_scanned_path(working_dir), {})
    for path, state in seen:
        if FILE_ID + path not in failed and os.path.exists(path):
            scanned[path] = state or _state(path)
    os.makedirs(os.path.dirname(_scanned_path(working_dir)), exist_ok=True)
    write_json(_scanned_path(working_dir), scanned)
