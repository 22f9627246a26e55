"""Lookup indexes written beside store files, so a reader can fetch single records
without parsing the whole file (see ``graph_lookup`` and ``kv_json``).

An index file is a magic line, a little-endian u64 header length, a JSON header, then
numpy arrays, each 8-byte aligned, that a reader maps rather than reads. String keys
are kept in a :class:`KeyTable`: sorted by a 64-bit hash and found by binary search,
with the keys themselves stored so that a hash collision is told apart.
"""
from __future__ import annotations

import json
import logging
import mmap
import os
from typing import Any, BinaryIO, Callable, Optional

import numpy as np
import xxhash

logger = logging.getLogger(__name__)


class HashingWriter:
    """Writes a store file in pieces, counting bytes (where each record lands) and hashing
    them (what the index names the file by), so the whole text is never in memory."""

    def __init__(self, f: BinaryIO, buffer_bytes: int = 1 << 20) -> None:
        self.f, self.position, self.hasher = f, 0, xxhash.xxh3_128()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._buffer_bytes = buffer_bytes

    def write(self, data: bytes) -> int:
        """Queue ``data``; returns its length."""
        self._pending.append(data)
        self._pending_bytes += len(data)
        self.position += len(data)
        if self._pending_bytes >= self._buffer_bytes:
            self.flush()
        return len(data)

    def flush(self) -> None:
        data = b"".join(self._pending)
        self.f.write(data)
        self.hasher.update(data)
        self._pending, self._pending_bytes = [], 0

    def hexdigest(self) -> str:
        """The hash of everything written so far (flushes first)."""
        self.flush()
        return self.hasher.hexdigest()


def key_hash(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


def pack(magic: bytes, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    placed: dict[str, list[Any]] = {}
    offset = 0
    for name, array in arrays.items():
        placed[name] = [array.dtype.str, offset, int(array.size)]
        offset += -(-array.nbytes // 8) * 8
    encoded = json.dumps({**header, "arrays": placed}).encode("utf-8")
    start = len(magic) + 8 + len(encoded)
    start += -start % 8
    out = bytearray(start + offset)
    out[:len(magic)] = magic
    out[len(magic):len(magic) + 8] = len(encoded).to_bytes(8, "little")
    out[len(magic) + 8:len(magic) + 8 + len(encoded)] = encoded
    for name, array in arrays.items():
        at = start + placed[name][1]
        out[at:at + array.nbytes] = array.tobytes()
    return bytes(out)


def unpack(path: str, magic: bytes) -> Optional[tuple[dict[str, Any], dict[str, np.ndarray]]]:
    """The header and (mapped, read-only) arrays of an index file; None if it is absent or unreadable."""
    try:
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # absent, or empty
        return None
    try:
        if mapped[:len(magic)] != magic:
            raise ValueError("not a lookup index of this kind or version")
        length = int.from_bytes(mapped[len(magic):len(magic) + 8], "little")
        header = json.loads(mapped[len(magic) + 8:len(magic) + 8 + length])
        start = len(magic) + 8 + length
        start += -start % 8
        arrays = {name: np.frombuffer(mapped, dtype=dtype, count=count, offset=start + offset)
                  for name, (dtype, offset, count) in header.pop("arrays").items()}
        return header, arrays
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("Ignoring unreadable lookup index %s (%s)", path, exc)
        return None


def open_index(index_path: str, magic: bytes, data_file: BinaryIO, needs: tuple[str, ...],
               describes: Callable[[dict[str, Any], mmap.mmap, os.stat_result], bool],
               ) -> Optional[tuple[dict[str, Any], dict[str, np.ndarray], mmap.mmap]]:
    """The index's header and arrays and the mapped ``data_file``, when the index has the
    arrays it ``needs`` and ``describes(header, mapped, stat)`` that very file; otherwise
    None, and the store parses its file whole."""
    unpacked = unpack(index_path, magic)
    if unpacked is None:
        return None
    header, arrays = unpacked
    missing = [name for name in needs if name not in arrays]
    if missing:
        logger.warning("Ignoring unreadable lookup index %s (no %s)", index_path, ", ".join(missing))
        return None
    try:
        mapped = mmap.mmap(data_file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # an empty file
        return None
    if not describes(header, mapped, os.fstat(data_file.fileno())):
        logger.info("Lookup index %s describes another version of its file; ignoring it", index_path)
        return None
    return header, arrays, mapped


class ParsedOnDemand:
    """Mixin for a store read through its lookup index (``_lookup``) until something needs
    its whole file parsed (``_parsed``); writers, which read and change much of a store,
    parse it once at index start unless the store can hold a write's changes apart
    (``parse_at_index_start`` False)."""

    _lookup: Optional[Any]
    _parsed: Optional[Any]
    parse_at_index_start = True

    def _parse_mapped(self, lookup: Any) -> Any:
        """The whole file, parsed from the version ``lookup`` maps (even if replaced since)."""
        raise NotImplementedError

    def _whole(self) -> Any:
        if self._parsed is None:
            assert self._lookup is not None
            self._parsed = self._parse_mapped(self._lookup)
            self._lookup = None
        return self._parsed

    def _points(self) -> Optional[Any]:
        """The lookup index while the file has not been parsed whole."""
        return self._lookup if self._parsed is None else None

    async def index_start_callback(self) -> None:
        await super().index_start_callback()  # type: ignore[misc]
        if self.parse_at_index_start:
            self._whole()


class KeyTable:
    """String keys found by hash: slot numbers in hash order, and each slot's key."""

    @staticmethod
    def build(keys: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(slot -> position in ``keys``, the arrays to store)."""
        hashes = np.fromiter(map(key_hash, keys), dtype="<u8", count=len(keys))
        order = np.argsort(hashes, kind="stable")
        encoded = [keys[i].encode("utf-8") for i in order]
        return order, {
            "key_hash": hashes[order],
            "key_start": np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype("<u8"),
            "key_bytes": np.frombuffer(b"".join(encoded), dtype="u1"),
        }

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self._hash, self._start, self._bytes = arrays["key_hash"], arrays["key_start"], arrays["key_bytes"]
        self._found: dict[str, Optional[int]] = {}  # a query asks for the same names many times

    def __len__(self) -> int:
        return len(self._hash)

    def _key_bytes(self, slot: int) -> bytes:
        return self._bytes[self._start[slot]:self._start[slot + 1]].tobytes()

    def key(self, slot: int) -> str:
        return self._key_bytes(slot).decode("utf-8")

    def keys_at(self, slots: np.ndarray) -> list[str]:
        """The keys of ``slots``, in their order (one copy of the key bytes, not one per key)."""
        raw, start = self._bytes.tobytes(), self._start.tolist()
        return [raw[start[i]:start[i + 1]].decode("utf-8") for i in slots.tolist()]

    def keys_of(self, slots: list[int]) -> list[str]:
        """The keys of ``slots``, each remembered as found there: the names of a neighbour list
        are looked up next (their degrees, their edges), and a key is at one slot only."""
        found = self._found
        if len(found) + len(slots) > 1 << 16:
            found.clear()
        keys = []
        for slot in slots:
            key = self.key(slot)
            found[key] = slot
            keys.append(key)
        return keys

    def find(self, key: str) -> Optional[int]:
        if key in self._found:
            return self._found[key]
        if len(self._found) >= 1 << 16:
            self._found.clear()
        wanted = np.uint64(key_hash(key))
        raw = key.encode("utf-8")
        slot = int(self._hash.searchsorted(wanted))
        found = None
        while slot < len(self._hash) and self._hash[slot] == wanted:
            if self._key_bytes(slot) == raw:
                found = slot
                break
            slot += 1
        self._found[key] = found
        return found
