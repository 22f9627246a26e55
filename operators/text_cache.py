"""A bounded memo of values computed from texts: what queries recompute for the same records.

Queries render and count the same entity, relation and passage rows again and again (a hub
entity is in most questions' contexts). What is kept is a pure function of its key (the
record's text), so a record another write changed is simply another key: nothing needs
invalidating, and the least recently used entries go once the kept texts pass a size in
bytes, so memory stays bounded however large the corpus grows.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, Optional, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TextCache(Generic[K, V]):
    """``compute()``'s value per key, the least recently used dropped first once the entries'
    ``size(key, value)`` (what they hold, in bytes) add up to more than ``max_bytes``. Safe to
    share between threads."""

    def __init__(self, max_bytes: int, size: Callable[[K, V], int]) -> None:
        self.max_bytes = max_bytes
        self._size = size
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K, compute: Callable[[], V]) -> V:
        found = self._hit(key)
        if found is not None:
            return found[0]
        value = compute()
        size = self._size(key, value)
        if size > self.max_bytes:
            return value
        with self._lock:
            if key not in self._items:
                self._items[key] = (value, size)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, (_, dropped) = self._items.popitem(last=False)
                    self._bytes -= dropped
        return value

    def peek(self, key: K) -> Optional[V]:
        """The kept value, or None (nothing computed): for callers that compute many values at
        once and ``get`` each after."""
        found = self._hit(key)
        return None if found is None else found[0]

    def _hit(self, key: K) -> Optional[tuple[V, int]]:
        """The kept entry, marked as the latest used, or None. A hit takes no lock: each
        OrderedDict call is atomic, and an entry another thread drops between the two is
        still the right value."""
        found = self._items.get(key)
        if found is not None:
            try:
                self._items.move_to_end(key)
            except KeyError:
                pass
        return found

    @property
    def bytes(self) -> int:
        """The kept entries' total size."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
