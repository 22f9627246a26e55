"""Files and folders in, documents out, and the summary of what became of each file.

``GraphRAG.ainsert_files`` walks the paths (``walk``), reads every file with the reader for
its type (``read_files``; a bad file is skipped with its reason, never stopping the rest),
inserts the documents, and reports per file (``FilesReport``): indexed, updated, unchanged,
moved, or skipped and why.
"""
from __future__ import annotations

import fnmatch
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from graphrag.errors import MissingExtraError, UnreadableFileError
from graphrag.operators.chunking import doc_id_for
from graphrag.progress import Progress
from graphrag.readers import ReadDocument, ReadOptions, read_file

logger = logging.getLogger(__name__)


def details_of(documents: Sequence[ReadDocument]) -> list[dict[str, Any]]:
    """What ``prepare_documents`` keeps of each read document beside its text and source."""
    return [{"title": d.title, "marks": [[m.offset, m.page, m.heading] for m in d.marks]} for d in documents]


def _matches(rel_path: str, patterns: Sequence[str]) -> bool:
    """A glob matches a path relative to the walked folder, or a file or folder name."""
    name = rel_path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(rel_path, p) or fnmatch.fnmatch(name, p) for p in patterns)


def walk(paths: Sequence[str], include: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[tuple[str, bool]]:
    """Files to read, in a stable order, each with whether to read it as text when no reader
    knows its type (a file named directly, or one an ``include`` glob picked on purpose).

    Folders are walked recursively; hidden files and folders are left out, and so are the
    ``exclude`` globs (a folder they match is not entered); with ``include`` globs, only
    matching files are kept. A name that is not UTF-8 text is left out with a warning: its
    path could be neither stored (the stores keep JSON) nor shown."""
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"no such file or directory: {', '.join(missing)}")
    out: dict[str, bool] = {}
    for path in paths:
        if not os.path.isdir(path):
            out.setdefault(os.path.abspath(path), True)
            continue
        for root, dirs, files in os.walk(path):
            rel_root = os.path.relpath(root, path).replace(os.sep, "/")
            rel = (lambda name: name) if rel_root == "." else (lambda name: f"{rel_root}/{name}")
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _matches(rel(d), exclude)
                             and _is_text(os.path.join(root, d)))
            for name in sorted(files):
                if name.startswith(".") or _matches(rel(name), exclude) or not _is_text(os.path.join(root, name)):
                    continue
                if include and not _matches(rel(name), include):
                    continue
                out.setdefault(os.path.abspath(os.path.join(root, name)), bool(include))
    return list(out.items())


def _is_text(path: str) -> bool:
    """Whether ``path`` is text (a name of bytes that are not UTF-8 comes as lone surrogates)."""
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:
        logger.warning("Left out %r: its name is not UTF-8", path)
        return False


@dataclass
class ReadFiles:
    """What reading gave: each file's documents, and the files skipped with the reason."""

    documents: dict[str, list[ReadDocument]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def all_documents(self) -> list[ReadDocument]:
        return [d for docs in self.documents.values() for d in docs]

    def texts(self) -> list[str]:
        return [d.text for d in self.all_documents()]

    def sources(self) -> list[str]:
        return [d.source for d in self.all_documents()]

    def details(self) -> list[dict[str, Any]]:
        return details_of(self.all_documents())

    def may_move(self, doc_id: str, old_source: str) -> bool:
        """Whether an indexed document's old source no longer holds it: the file is gone, or
        was read now with other content at that place (a copy leaves the old one holding it)."""
        path = old_source.partition("#")[0]
        if path in self.documents:
            return all(d.source != old_source or doc_id_for(d.text) != doc_id for d in self.documents[path])
        return path in self.skipped or not os.path.exists(path)


def read_files(paths: Sequence[str], include: Sequence[str] = (), exclude: Sequence[str] = (),
               options: ReadOptions = ReadOptions(), show_progress: Optional[bool] = None) -> ReadFiles:
    """Read every file under ``paths``; a file that cannot be read is skipped with its reason."""
    files = walk(paths, include, exclude)
    out = ReadFiles()
    progress = Progress(len(files), "Reading files", show_progress)
    try:
        for path, as_text in files:
            try:
                out.documents[path] = read_file(path, options, as_text=as_text)
            except (UnreadableFileError, MissingExtraError) as exc:
                out.skipped[path] = str(exc)
            except OSError as exc:
                out.skipped[path] = exc.strerror or str(exc)
            except Exception as exc:  # a reader's package failing on an odd file must not stop the folder
                logger.debug("reading %s failed", path, exc_info=exc)
                out.skipped[path] = f"could not be read ({type(exc).__name__}: {exc})"
            progress.update()
    finally:
        progress.close()
    for path, reason in out.skipped.items():
        logger.warning("Skipped %s: %s", path, reason)
    return out


@dataclass
class FilesReport:
    """Per file: ``indexed`` (new), ``updated`` (an edited file: its old version's
    contributions out), ``unchanged`` (no cost), ``moved`` (known content at a new path:
    only its source changed), ``skipped`` (path -> reason); and the insert's ``stats``."""

    indexed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, read: ReadFiles, outcomes: Mapping[str, tuple[str, Optional[str]]],
              stats: dict[str, Any]) -> "FilesReport":
        """``outcomes``: per document id, what the insert did and the source it now has."""
        report = cls(skipped=dict(read.skipped), stats=stats)
        for path, docs in read.documents.items():
            ids = [doc_id_for(d.text) for d in docs]
            own = [outcomes[i][0] for i, d in zip(ids, docs) if outcomes[i][1] == d.source]
            if not own:  # every document of this file is indexed under another file
                report.skipped[path] = f"same content as {outcomes[ids[0]][1]}"
                continue
            status = ("updated" if "updated" in own else "indexed" if "new" in own
                      else "moved" if "moved" in own else "unchanged")
            getattr(report, status).append(path)
        return report

    def to_dict(self) -> dict[str, Any]:
        return {"indexed": self.indexed, "updated": self.updated, "unchanged": self.unchanged, "moved": self.moved,
                "skipped": [{"path": p, "reason": r} for p, r in self.skipped.items()], "stats": self.stats}
