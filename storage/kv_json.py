"""Key-value store kept in ``kv_store_{namespace}.json``."""
from __future__ import annotations

import json
import logging
import mmap
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, BinaryIO, Optional

import numpy as np
import xxhash

from .base import BaseKVStorage, cut_to_fields
from .files import (
    StorageFileError,
    atomic_write_bytes,
    atomic_write_via,
    file_signature,
    parse_json_file,
)
from .journal import REMOVED, JournaledFile, apply_changes, journal_for, journal_line, net_changes, read_journal
from .lookup_index import HashingWriter, KeyTable, ParsedOnDemand, open_index, pack

logger = logging.getLogger(__name__)

_MAGIC = b"graphrag-kv-lookup 1\n"
_ARRAYS = ("key_hash", "key_start", "key_bytes", "value_offset", "value_length")

@dataclass
class JsonLayout:
    """Where each value lies in a written KV file, and the file's size and content hash."""

    offsets: list[int]
    lengths: list[int]
    size: int
    hash: str


def write_json_with_layout(f: BinaryIO, data: dict[str, Any]) -> JsonLayout:
    """Write ``json.dumps(data, ensure_ascii=False)`` as UTF-8, entry by entry: the whole text
    is never in memory at once (a store of hundreds of MB would need it twice over)."""
    out = HashingWriter(f)
    offsets: list[int] = []
    lengths: list[int] = []
    out.write(b"{")
    for i, (key, value) in enumerate(data.items()):
        out.write(f'{", " if i else ""}{json.dumps(key, ensure_ascii=False)}: '.encode("utf-8"))
        offsets.append(out.position)
        lengths.append(out.write(json.dumps(value, ensure_ascii=False).encode("utf-8")))
    out.write(b"}")
    return JsonLayout(offsets, lengths, out.position, out.hexdigest())


# Records a lookup keeps decoded. A read of more records at once (a global query reads every
# report) would decode them all again at each call: it parses the file whole instead, once.
DECODED_KEPT = 1024


class RecordLookup:
    """Single records of a KV JSON file, read through the index written beside it.

    The index names the file by size and content hash (and, to skip hashing in the
    usual case, the mtime and inode it was written with); one that does not describe
    the file is ignored. The file stays mapped: answers keep describing the version
    opened even after a writer replaces it.
    """

    def __init__(self, mapped: mmap.mmap, arrays: dict[str, np.ndarray]) -> None:
        self.mapped = mapped
        self._keys = KeyTable(arrays)
        self._offset, self._length = arrays["value_offset"], arrays["value_length"]
        # Queries about neighbouring entities read the same reports again; like the parsed
        # store, this hands out the same objects each time (callers only read them).
        self._value = lru_cache(maxsize=DECODED_KEPT)(self._decode)
        self._fields = lru_cache(maxsize=DECODED_KEPT)(self._decode_fields)
        self._file_order: Optional[list[str]] = None

    @staticmethod
    def build(keys: list[str], layout: JsonLayout, written: os.stat_result) -> bytes:
        order, key_arrays = KeyTable.build(keys)
        return pack(_MAGIC, {"size": layout.size, "hash": layout.hash,
                             "written": [written.st_mtime_ns, written.st_ino]}, {
            **key_arrays,
            "value_offset": np.array(layout.offsets, dtype="<u8")[order],
            "value_length": np.array(layout.lengths, dtype="<u8")[order],
        })

    @classmethod
    def open(cls, json_file: BinaryIO, index_path: str) -> Optional[RecordLookup]:
        def describes(header: dict[str, Any], mapped: mmap.mmap, st: os.stat_result) -> bool:
            return header.get("size") == len(mapped) and (
                header.get("written") == [st.st_mtime_ns, st.st_ino]
                or header.get("hash") == xxhash.xxh3_128_hexdigest(mapped))

        opened = open_index(index_path, _MAGIC, json_file, _ARRAYS, describes)
        return None if opened is None else cls(opened[2], opened[1])

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, key: str) -> Optional[dict]:
        slot = self._keys.find(key)
        return None if slot is None else self._value(slot)

    def get_fields(self, key: str, fields: frozenset[str]) -> Optional[dict]:
        """The record cut to ``fields`` (as ``get_by_ids(..., fields)`` cuts it)."""
        slot = self._keys.find(key)
        return None if slot is None else self._fields(slot, fields)

    def has(self, key: str) -> bool:
        return self._keys.find(key) is not None

    def keys_in_file_order(self) -> list[str]:
        """Every key, in the order the file holds them (the order its parse gives)."""
        if self._file_order is None:
            self._file_order = self._keys.keys_at(np.argsort(self._offset, kind="stable"))
        return self._file_order

    def _raw(self, slot: int) -> bytes:
        offset = int(self._offset[slot])
        return self.mapped[offset:offset + int(self._length[slot])]

    def _decode(self, slot: int) -> dict:
        return json.loads(self._raw(slot))  # a value of the file: a record (BaseKVStorage[dict])

    def _decode_fields(self, slot: int, fields: frozenset[str]) -> Optional[dict]:
        """A record's ``fields``, decoding only the record's text from the first of them on
        when they are its last keys (a community report's text and rating come after its
        member lists, most of its bytes). The writer writes ``json.dumps``'s ``, "key": ``
        between keys, and an unescaped quote cannot be inside a string: a match is a key, and
        ``{`` plus the text from it parses as one object only where the key is the record's
        own, not a nested object's (that would leave closing brackets over). Otherwise, or if
        a field is not in that tail, the record is decoded whole."""
        raw = self._raw(slot)
        starts = [raw.rfind(b", " + json.dumps(name).encode("utf-8") + b": ") for name in fields]
        if starts and min(starts) > 0:
            try:
                tail = json.loads(b"{" + raw[min(starts) + 2:])
            except ValueError:
                tail = None
            if isinstance(tail, dict) and fields <= tail.keys():
                return cut_to_fields(tail, fields)
        return cut_to_fields(self._value(slot), fields)


@dataclass
class JsonKVStorage(ParsedOnDemand, JournaledFile, BaseKVStorage[dict]):
    """JSON KV store: ``kv_store_{namespace}.json`` plus a journal of the commits since it
    was last written whole, ``kv_store_{namespace}.journal.jsonl``.

    A commit appends the changes since the last commit to the journal, or folds it, by the
    rules of :class:`storage.journal.JournaledFile`, so a small write costs what it changes.

    With ``journal=True`` every upsert is also appended to the journal as it happens, so the
    entries survive a killed process before the commit (the LLM response cache uses this);
    its journal folds by the same rule.

    With ``lookup=True`` every fold also writes ``kv_store_{namespace}.json.index``, and a
    store opened on such a file answers ``get_by_id(s)`` by reading only those records
    (:class:`RecordLookup`), over the journal's entries held apart; it parses the file whole
    only when something needs all of it. A local query thus reads a handful of reports and
    chunks, not all. A write does the same: its upserts and deletions join the journal's
    entries held apart (``_overlay``), so a small write into a large store neither parses it
    nor keeps it in memory (a parsed store of hundreds of thousands of containers makes every
    full run of the cyclic collector longer); only a fold parses it whole.
    """

    journal: bool = False
    lookup: bool = False
    _parsed: Optional[dict[str, Any]] = field(default=None, init=False, repr=False)
    _lookup: Optional[RecordLookup] = field(default=None, init=False, repr=False)
    _dirty: bool = field(default=False, init=False, repr=False)
    _loaded_signature: Optional[tuple[Any, ...]] = field(default=None, init=False, repr=False)
    _journal_fd: Optional[int] = field(default=None, init=False, repr=False)
    # Journal entries not yet applied to the file's records (while read through the lookup).
    _overlay: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    # What changed since the last commit (value, or REMOVED), for the journal's next line.
    _changed: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _must_fold: bool = field(default=False, init=False, repr=False)
    # Read through the lookup index at a write too (see the class docstring).
    parse_at_index_start = False

    def __post_init__(self) -> None:
        self._file_name = self.path_for(f"kv_store_{self.namespace}.json")
        self._journal_name = journal_for(self._file_name)
        self._index_name = self._file_name + ".index"
        self._load()

    @classmethod
    def options_for(cls, *, read_by_record: bool = False, durable_upserts: bool = False) -> dict[str, Any]:
        return {"journal": durable_upserts, "lookup": read_by_record and not durable_upserts}

    def _signature(self) -> Optional[tuple[Any, ...]]:
        # The journal of the eager kind grows between commits (answers arriving, queries of
        # other processes); only a new file says another writer committed.
        return file_signature(self._file_name) if self.journal else super()._signature()

    def _load(self) -> None:
        self._lookup, self._parsed, self._overlay, self._changed = None, {}, {}, {}
        self._must_fold = False
        self._loaded_signature = self._signature()
        try:
            f = open(self._file_name, "rb")
        except FileNotFoundError:
            pass
        else:
            with f:
                self._lookup = RecordLookup.open(f, self._index_name) if self.lookup else None
                self._parsed = None if self._lookup is not None else self._parse(f.read())
        replayed = self._replay_journal()
        self._dirty = replayed > 0  # a small file takes the journal in at the next commit
        logger.debug("Opened KV %s: %s", self.namespace, "indexed" if self._lookup is not None else
                     f"{len(self._data)} records ({replayed} journal entries)")

    def _parse(self, raw: bytes) -> dict[str, Any]:
        data = parse_json_file(raw, self._file_name, f"key-value store '{self.namespace}'")
        if not isinstance(data, dict):
            raise StorageFileError(f"key-value store file {self._file_name!r} does not hold a JSON object")
        return data

    def _parse_mapped(self, lookup: RecordLookup) -> dict[str, Any]:
        data = self._parse(bytes(lookup.mapped))
        apply_changes(data, self._overlay)
        self._overlay = {}
        return data

    @property
    def _data(self) -> dict[str, Any]:
        return self._whole()

    def _replay_journal(self) -> int:
        entries = read_journal(self._journal_name)
        if self._parsed is None:
            self._overlay.update(net_changes(entries))
        else:
            apply_changes(self._parsed, net_changes(entries))
        return len(entries)

    def _append_journal(self, data: dict[str, Any]) -> None:
        if self._journal_fd is None:
            os.makedirs(self.working_dir, exist_ok=True)
            self._journal_fd = os.open(self._journal_name, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            # A writer killed mid-append leaves a torn last line: end it, or the first entry
            # appended now would be glued to it and lost at the next replay.
            size = os.fstat(self._journal_fd).st_size
            if size and os.pread(self._journal_fd, 1, size - 1) != b"\n":
                os.write(self._journal_fd, b"\n")
        os.write(self._journal_fd, journal_line(data))

    def _truncate_journal(self) -> None:
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        super()._truncate_journal()

    def _journal_line(self) -> bytes:
        return b"" if self.journal else super()._journal_line()  # the eager journal holds them already

    def _write_whole(self) -> None:
        layouts: list[JsonLayout] = []
        written: list[os.stat_result] = []

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                layouts.append(write_json_with_layout(f, self._data))
            if self.lookup:
                written.append(os.stat(tmp))  # a rename keeps mtime and inode

        atomic_write_via(self._file_name, write)
        if self.lookup:
            atomic_write_bytes(self._index_name, RecordLookup.build(list(self._data), layouts[0], written[0]))

    async def write_ahead(self) -> None:
        """A store still read through its lookup index is written at the commit instead: a fold
        parses its file, which in the write-ahead thread would race the write's reads and the
        changes it holds apart (its journal append costs little at the commit)."""
        if self._points() is None:
            await super().write_ahead()

    async def query_done_callback(self) -> None:
        """Query-time writes (cached answers) already sit in the journal; nothing to rewrite."""

    async def all_keys(self) -> list[str]:
        lookup = self._points()
        if lookup is None:
            return list(self._data)
        # The order the parse would give: the file's keys, then the journal's new ones.
        overlay = self._overlay
        in_file = [k for k in lookup.keys_in_file_order() if overlay.get(k) is not REMOVED]
        return in_file + [k for k, v in overlay.items() if v is not REMOVED and not lookup.has(k)]

    def _point(self, lookup: RecordLookup, key: str, fields: Optional[frozenset[str]] = None) -> Optional[dict]:
        """``key``'s record (cut to ``fields``): a write's change held apart, else the file's."""
        value = self._overlay.get(key, lookup)
        if value is lookup:
            return lookup.get(key) if fields is None else lookup.get_fields(key, fields)
        if value is REMOVED:
            return None
        return value if fields is None else cut_to_fields(value, fields)

    async def get_by_id(self, id: str) -> Optional[dict]:
        lookup = self._points()
        return self._point(lookup, id) if lookup is not None else self._data.get(id)

    async def get_by_ids(self, ids: list[str], fields: Optional[set[str]] = None) -> list[Optional[dict]]:
        lookup = self._points() if len(ids) <= DECODED_KEPT else None
        if lookup is not None:
            wanted = None if fields is None else frozenset(fields)
            return [self._point(lookup, i, wanted) for i in ids]
        records = [self._data.get(i) for i in ids]
        if fields is None:
            return records
        return [cut_to_fields(r, fields) if r is not None else None for r in records]

    async def filter_keys(self, keys: list[str]) -> set[str]:
        lookup = self._points()
        if lookup is not None:
            return {k for k in keys if self._point(lookup, k) is None}
        return {k for k in keys if k not in self._data}

    async def upsert(self, data: dict[str, dict]) -> None:
        if not data:
            return
        overlay = self._overlay
        # A key deleted and upserted again goes to the end of the parsed store; held apart
        # it would keep its old place at the next parse (and the file's order would depend
        # on when this process parsed it), so that rare case parses now.
        if self._points() is not None and not any(overlay.get(k) is REMOVED for k in data):
            overlay.update(data)
        else:
            self._data.update(data)
        self._changed.update(data)
        self._dirty = True
        if self.journal:
            self._append_journal(data)

    async def delete(self, ids: list[str]) -> None:
        lookup = self._points()
        if lookup is not None:
            removed = [i for i in ids if self._point(lookup, i) is not None]
            self._overlay.update(dict.fromkeys(removed, REMOVED))
        else:
            removed = [i for i in ids if self._data.pop(i, None) is not None]
        if removed:
            self._changed.update(dict.fromkeys(removed, REMOVED))
            self._dirty = True
            # Kept as they happen are upserts only; a deletion waits for the commit, which
            # then writes the file whole (appending there could cut entries arriving meanwhile).
            self._must_fold = self._must_fold or self.journal

    async def drop(self) -> None:
        self._parsed, self._lookup, self._overlay = {}, None, {}
        self._must_fold = self._dirty = True

    async def count(self) -> int:
        lookup = self._points()
        if lookup is None:
            return len(self._data)
        return len(lookup) + sum((v is not REMOVED) - lookup.has(k) for k, v in self._overlay.items())

    def __len__(self) -> int:
        return len(self._data)
