"""The commit journal of a store kept in one JSON file: ``<file stem>.journal.jsonl`` beside it.

A commit into a large file appends only its changes, as JSON lines, to the journal inside the
commit's transaction (``files.atomic_append``) instead of rewriting the file; the journal is
*folded* (the file written whole, the journal removed after the commit) when it would outgrow
a share of the file, on demand (``fold()``: at ``close()`` and at interpreter exit), and
whenever the store asks for it. Opening replays the journal on top of the file. See
``docs/CRASH_SAFETY.md``.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Optional

from .files import SingleFileStore, after_commit, atomic_append, file_signature

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

# A commit appends its changes to the journal instead of rewriting the file once the file is
# this large (below it, rewriting costs little and keeps the file complete)...
JOURNAL_FROM_BYTES = 4 << 20
# ...and folds the journal into the file when the journal would outgrow this share of it,
# so replaying the journal at open stays a fraction of parsing the file.
FOLD_AT_SHARE = 1 / 8

REMOVED = object()  # in a set of changes or an overlay of journal entries: the key was deleted


def journal_line(entry: JSONValue) -> bytes:
    """One journal line: ``{key: value, ...}`` upserts, or ``[key, ...]`` deletions."""
    return (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")


def read_journal(path: str) -> list[Any]:
    """The entries of a journal, in order; a line torn by a kill (the last) is skipped."""
    entries: list[Any] = []
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return entries
    with f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill; everything before it is intact
            if isinstance(entry, (dict, list)):
                entries.append(entry)
    return entries


def net_changes(entries: list[Any]) -> dict[str, Any]:
    """What a journal's entries leave of each key, in order: its last value, or ``REMOVED``."""
    changes: dict[str, Any] = {}
    for entry in entries:
        changes.update(entry if isinstance(entry, dict) else dict.fromkeys(entry, REMOVED))
    return changes


def apply_changes(data: dict[str, Any], changes: dict[str, Any]) -> None:
    """Apply ``net_changes`` to a store's records."""
    for key, value in changes.items():
        if value is REMOVED:
            data.pop(key, None)
        else:
            data[key] = value


def change_lines(changes: dict[str, Any]) -> bytes:
    """One commit's journal line(s) from its changes: upserts, then deletions."""
    upserts = {k: v for k, v in changes.items() if v is not REMOVED}
    removed = [k for k, v in changes.items() if v is REMOVED]
    return (journal_line(upserts) if upserts else b"") + (journal_line(removed) if removed else b"")


def journal_for(file_name: str) -> str:
    """``kv_store_x.json`` -> ``kv_store_x.journal.jsonl``."""
    return os.path.splitext(file_name)[0] + ".journal.jsonl"


class JournaledFile(SingleFileStore):
    """Mixin for a :class:`SingleFileStore` whose commits go to its journal once its file is large.

    The store keeps ``_changed`` (key -> value or ``REMOVED``) since its last commit, and sets
    ``_must_fold`` when a change cannot be journaled (a drop); ``_write_whole`` writes the file.
    """

    _journal_name: str
    _changed: dict[str, Any]
    _must_fold: bool

    def _write_whole(self) -> None:
        """Write the store's file whole (atomically; inside a transaction, at its commit)."""
        raise NotImplementedError

    def _journal_line(self) -> bytes:
        """This commit's line(s) for the journal (the changes since the last commit)."""
        return change_lines(self._changed)

    def _write_files(self) -> None:
        file_size = os.path.getsize(self._file_name) if os.path.exists(self._file_name) else 0
        journal_size = os.path.getsize(self._journal_name) if os.path.exists(self._journal_name) else 0
        # The line is built only where it may be appended: a fold needs none, and a first
        # write's line would be the whole store over again, held beside it.
        folds = self._must_fold or file_size < JOURNAL_FROM_BYTES
        line = b"" if folds else self._journal_line()
        if folds or journal_size + len(line) > file_size * FOLD_AT_SHARE:
            # A later write of this commit (after a write-ahead) folds too: the journal goes.
            self._must_fold = True
            self._write_whole()
            if journal_size:
                # Emptied with the commit's files (and again by recovery after a kill): replayed
                # over the file written whole, the journal's older values would override this
                # commit's own changes to the same keys. Removed once the commit is done.
                atomic_append(self._journal_name, b"", 0)
            after_commit(self._truncate_journal)
        elif line:
            atomic_append(self._journal_name, line, journal_size)
        self._after_own_commit()

    def _truncate_journal(self) -> None:
        try:
            os.remove(self._journal_name)
        except FileNotFoundError:
            pass

    def _signature(self) -> Optional[tuple[Any, ...]]:
        # Another process's commit either replaces the file or appends to the journal.
        return file_signature(self._file_name), file_signature(self._journal_name)

    def _after_own_commit(self) -> None:
        def committed() -> None:
            self._changed, self._must_fold = {}, False
            self._loaded_signature = self._signature()

        after_commit(committed)

    async def fold(self) -> None:
        """Write the file whole at the next commit (now, outside one), journal included."""
        self._must_fold = self._dirty = True

    def journal_pending(self) -> bool:
        """The journal holds entries the file does not."""
        return os.path.exists(self._journal_name)
