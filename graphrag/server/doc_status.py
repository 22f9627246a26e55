"""Every document's status, kept in the working dir: queued, processing, indexed, failed or cancelled.

The index itself (``full_docs``) says which documents are indexed; this record says what
became of the rest, and when: a document is ``queued`` from the request that asked for it,
``processing`` while its job runs (with the stage and its progress), ``indexed`` once the job
committed, ``failed`` with the job's error, or ``cancelled``. A failed or cancelled document
keeps what it was asked to index (its *redo*: the job request's part naming it), so
``reprocess`` can queue it again without the client sending it twice.

Kept in ``document_status/`` (a folder: the server's check for other writers looks at the
working dir's files only): ``status.json``, replaced whole on each change (a crash leaves the
old file or the new one), and ``redo.json`` for the failed and cancelled ones. A crash leaves
documents ``processing``; the next writing server *requeues* them when the job queue kept
their job (it runs a job the server stopped during again: a write already committed costs
nothing the second time, LLM answers already paid for come from the cache), and marks them
``failed`` ("interrupted") when it did not, so reprocess can start them again. The HTTP API's
``GET /documents`` and ``graphrag docs`` both read it through ``document_rows``.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, TypeVar

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

logger = logging.getLogger(__name__)

J = TypeVar("J", bound="JSONValue")

STATUS_DIR = "document_status"
STATUS_FILE = "status.json"
REDO_FILE = "redo.json"
STATUSES = ("queued", "processing", "indexed", "failed", "cancelled")
# How often, at most, a running job's progress is written down (a reader of the file, the
# CLI, sees it that fresh; the server answers from memory).
PROGRESS_WRITE_SECONDS = 1.0
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


def iso(seconds: Optional[float]) -> Optional[str]:
    return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def write_json(path: str, value: JSONValue) -> None:
    """Replace ``path`` whole (a crash leaves the old file or the new one, never half)."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)
    os.replace(temporary, path)


def read_json(path: str, default: J) -> J:
    """A JSON file written by ``write_json`` (of ``default``'s shape); ``default`` when there is none."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default
    except json.JSONDecodeError:  # written by os.replace only: a hand-edited file
        logger.warning("ignoring unreadable %s", path)
        return default


def read_statuses(working_dir: str) -> dict[str, dict[str, Any]]:
    """The kept statuses by document id ({} for a working dir no server wrote to)."""
    return read_json(os.path.join(working_dir, STATUS_DIR, STATUS_FILE), {})


class DocumentStatus:
    """The statuses of one working dir's documents, as its writing server changes them."""

    def __init__(self, working_dir: str) -> None:
        self._dir = os.path.join(working_dir, STATUS_DIR)
        self._working_dir = working_dir
        self.entries: dict[str, dict[str, Any]] = read_statuses(working_dir)
        self._redo: dict[str, dict[str, Any]] = read_json(os.path.join(self._dir, REDO_FILE), {})
        self._written_at = 0.0
        # Progress is reported from the threads a write starts too (reading files).
        self._writing = threading.Lock()

    # ------------------------------------------------------------------ transitions

    def queued(self, job_id: str, documents: Iterable[tuple[str, Optional[str]]]) -> None:
        """``documents`` (id, source) wait for job ``job_id``."""
        now = time.time()
        for doc_id, source in documents:
            self.entries[doc_id] = {"source": source, "status": "queued", "stage": None, "progress": None,
                                    "error": None, "failed_chunks": 0, "updated": now, "job": job_id}
        self._save()

    def processing(self, job_id: str) -> None:
        self._set(job_id, "processing")

    def progressed(self, job_id: str, stage: str, done: int, total: int) -> None:
        """A stage's progress for the job's documents; written down at most once a second."""
        for entry in self._of_job(job_id):
            entry["stage"], entry["progress"] = stage, (done / total if total else None)
        if time.monotonic() - self._written_at >= PROGRESS_WRITE_SECONDS:
            self._save()

    def finished(self, job_id: str, status: str, error: Optional[str] = None,
                 redo: Optional[Mapping[str, dict[str, Any]]] = None,
                 failed: Optional[Mapping[str, str]] = None) -> None:
        """The job ended ``status`` (indexed, failed, cancelled), but the documents in ``failed``
        failed for their own reason; ``redo`` (per document id, the request part that indexes
        it) is kept for the failed and cancelled ones."""
        self._set(job_id, status, error)
        for doc_id, reason in (failed or {}).items():
            if doc_id in self.entries:
                self.entries[doc_id].update(status="failed", error=reason)
        for doc_id, entry in self.entries.items():
            if entry.get("job") != job_id:
                continue
            if entry["status"] != "indexed" and redo and doc_id in redo:
                self._redo[doc_id] = redo[doc_id]
            else:
                self._redo.pop(doc_id, None)
        self._save(redo=True)

    def deleted(self, doc_ids: Iterable[str]) -> None:
        for doc_id in doc_ids:
            self.entries.pop(doc_id, None)
            self._redo.pop(doc_id, None)
        self._save(redo=True)

    def recover(self, requeued_jobs: Iterable[str]) -> None:
        """After a restart: documents of a job the queue runs again wait for it; the rest left
        queued or processing fail as interrupted."""
        again = set(requeued_jobs)
        changed = False
        for entry in self.entries.values():
            if entry["status"] not in ("queued", "processing"):
                continue
            changed = True
            entry["stage"] = entry["progress"] = None
            entry["updated"] = time.time()
            if entry.get("job") in again:
                entry["status"] = "queued"
                entry["error"] = "requeued: the server stopped while it was processing; its job runs again"
            else:
                entry["status"] = "failed"
                entry["error"] = "interrupted: the server stopped and its job was not kept (reprocess it)"
        if changed:
            self._save()

    def redo_of(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """What indexes each of ``doc_ids`` again (only failed and cancelled ones keep it)."""
        return {d: self._redo[d] for d in doc_ids if d in self._redo}

    def ids_with(self, status: str) -> list[str]:
        return [d for d, e in self.entries.items() if e["status"] == status]

    # ------------------------------------------------------------------ kept

    def _of_job(self, job_id: str) -> list[dict[str, Any]]:
        return [e for e in self.entries.values() if e.get("job") == job_id]

    def _set(self, job_id: str, status: str, error: Optional[str] = None) -> None:
        now = time.time()
        for entry in self._of_job(job_id):
            entry.update(status=status, error=error, updated=now)
            if status != "processing":
                entry["stage"] = entry["progress"] = None
        self._save()

    def _save(self, redo: bool = False) -> None:
        """Write the statuses down, and with ``redo`` the kept requests (they may be long)."""
        with self._writing:
            os.makedirs(self._dir, exist_ok=True)
            if redo:
                write_json(os.path.join(self._dir, REDO_FILE), self._redo)
            write_json(os.path.join(self._dir, STATUS_FILE), self.entries)
            self._written_at = time.monotonic()


def document_rows(indexed: list[dict[str, Any]], statuses: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every document with its status, from the index's documents (``Inspection.adocuments``:
    id, source, chars, chunks, failed_chunks) and the kept statuses.

    A document queued or processing again shows that; otherwise one in the index is
    ``indexed`` (whatever an earlier attempt left), and one not in it shows its last outcome
    (an ``indexed`` entry whose document is gone was deleted since, and is left out)."""
    rows = []
    in_index = {d["id"]: d for d in indexed}
    for doc_id, doc in in_index.items():
        entry = statuses.get(doc_id) or {}
        active = entry.get("status") in ("queued", "processing")
        rows.append({**doc, "status": entry["status"] if active else "indexed",
                     "stage": entry.get("stage") if active else None,
                     "progress": entry.get("progress") if active else None,
                     "error": entry.get("error") if active else None,
                     "updated": iso(entry.get("updated"))})
    for doc_id, entry in statuses.items():
        if doc_id in in_index or entry["status"] == "indexed":
            continue
        rows.append({"id": doc_id, "source": entry.get("source"), "chars": None, "chunks": None,
                     "failed_chunks": entry.get("failed_chunks", 0), "status": entry["status"],
                     "stage": entry.get("stage"), "progress": entry.get("progress"), "error": entry.get("error"),
                     "updated": iso(entry.get("updated"))})
    return rows


def select(rows: list[dict[str, Any]], status: Optional[str] = None, q: Optional[str] = None,
           offset: int = 0, limit: int = DEFAULT_LIMIT) -> tuple[int, list[dict[str, Any]]]:
    """The rows with ``status`` whose source holds ``q`` (any case): how many, and one page."""
    needle = (q or "").casefold()
    kept = [r for r in rows if (status is None or r["status"] == status)
            and (not needle or needle in (r.get("source") or "").casefold())]
    return len(kept), kept[offset:offset + limit]
