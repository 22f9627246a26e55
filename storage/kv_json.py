"""Key-value store kept in ``kv_store_{namespace}.json``."""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from .base import BaseKVStorage
from .files import SingleFileStore, StorageFileError, after_commit, atomic_write_json, file_signature, read_json_file

logger = logging.getLogger(__name__)


@dataclass
class JsonKVStorage(SingleFileStore, BaseKVStorage[dict]):
    """Whole-file JSON KV store, with an optional append-only journal.

    With ``journal=True`` every upsert is also appended to
    ``kv_store_{namespace}.journal.jsonl`` as it happens, so the entries survive a
    killed process without rewriting the whole file after each call (the LLM
    response cache uses this). The journal is folded into the JSON file at
    ``index_done_callback`` and emptied once that commit is in place.
    """

    journal: bool = False
    _data: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _dirty: bool = field(default=False, init=False, repr=False)
    _loaded_signature: Optional[tuple[int, ...]] = field(default=None, init=False, repr=False)
    _journal_fd: Optional[int] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._file_name = self.path_for(f"kv_store_{self.namespace}.json")
        self._journal_name = self.path_for(f"kv_store_{self.namespace}.journal.jsonl")
        self._load()

    def _load(self) -> None:
        self._loaded_signature = file_signature(self._file_name)
        if self._loaded_signature is not None:
            data = read_json_file(self._file_name, f"key-value store '{self.namespace}'")
            if not isinstance(data, dict):
                raise StorageFileError(f"key-value store file {self._file_name!r} does not hold a JSON object")
            self._data = data
        else:
            self._data = {}
        replayed = self._replay_journal()
        self._dirty = replayed > 0
        logger.debug("Loaded KV %s: %d records (%d from journal)", self.namespace, len(self._data), replayed)

    def _replay_journal(self) -> int:
        if not self.journal or not os.path.exists(self._journal_name):
            return 0
        count = 0
        with open(self._journal_name, "rb") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line torn by a kill; everything before it is intact
                if isinstance(entry, dict):
                    self._data.update(entry)
                    count += 1
        return count

    def _append_journal(self, data: dict[str, Any]) -> None:
        if self._journal_fd is None:
            os.makedirs(self.working_dir, exist_ok=True)
            self._journal_fd = os.open(self._journal_name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._journal_fd, (json.dumps(data, ensure_ascii=False) + "\n").encode("utf-8"))

    def _truncate_journal(self) -> None:
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        try:
            os.remove(self._journal_name)
        except FileNotFoundError:
            pass

    async def index_done_callback(self) -> None:
        if not self._dirty:
            return
        atomic_write_json(self._file_name, self._data)
        self._dirty = False

        self._remember_committed_file()
        if self.journal:
            after_commit(self._truncate_journal)

    async def query_done_callback(self) -> None:
        """Query-time writes (cached answers) already sit in the journal; nothing to rewrite."""

    async def all_keys(self) -> list[str]:
        return list(self._data)

    async def get_by_id(self, id: str) -> Optional[dict]:
        return self._data.get(id)

    async def get_by_ids(self, ids: list[str], fields: Optional[set[str]] = None) -> list[Optional[dict]]:
        if fields is None:
            return [self._data.get(i) for i in ids]
        return [
            {k: v for k, v in self._data[i].items() if k in fields} if i in self._data else None for i in ids
        ]

    async def filter_keys(self, keys: list[str]) -> set[str]:
        return {k for k in keys if k not in self._data}

    async def upsert(self, data: dict[str, dict]) -> None:
        if not data:
            return
        self._data.update(data)
        self._dirty = True
        if self.journal:
            self._append_journal(data)

    async def delete(self, ids: list[str]) -> None:
        for i in ids:
            if self._data.pop(i, None) is not None:
                self._dirty = True

    async def drop(self) -> None:
        self._data = {}
        self._dirty = True

    def __len__(self) -> int:
        return len(self._data)
