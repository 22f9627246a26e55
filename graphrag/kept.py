"""Work kept between writes, per owner object: it lives and dies with the stores of one
``GraphRAG`` instance, two instances never share it, and nothing outlives its owner (no
process-wide cache holding a dropped instance's data)."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class PerOwner(Generic[T]):
    """One object per owner, made by ``factory`` on the owner's first ``get`` and dropped
    when the owner is collected. Owners are compared by identity (stores are dataclasses,
    unhashable, hence ``id`` with a weak reference checking it still names the same object);
    an owner that cannot be weakly referenced gets a fresh object each time: nothing kept."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: dict[int, tuple["weakref.ref[Any]", T]] = {}

    def get(self, owner: object) -> T:
        found = self._items.get(id(owner))
        if found is not None and found[0]() is owner:
            return found[1]
        item = self._factory()
        try:
            self._items[id(owner)] = (weakref.ref(owner), item)
            weakref.finalize(owner, self._items.pop, id(owner), None)
        except TypeError:
            self._items.pop(id(owner), None)
        return item

    def __len__(self) -> int:
        """How many live owners have an object kept."""
        return len(self._items)
