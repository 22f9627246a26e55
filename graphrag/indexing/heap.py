"""The garbage collector during a write: the heap alive on entry set aside from it.

One block covers a whole write, from the writer's lock to the commit (``GraphRAG._writing``),
and the pipeline's stages join it to set their results aside too. A block entered inside
another joins the outer one rather than starting its own, so the heap is frozen once per
write and unfrozen once at its end.
"""

from __future__ import annotations

import gc
from typing import Optional

# How much rarer full collections are during a write (see ``FrozenHeap``).
FULL_COLLECTIONS_RARER = 10


class FrozenHeap:
    """The objects alive on entry set aside from the garbage collector until the block ends
    (``gc.freeze``), and those alive at each :meth:`settle` too. A write allocates millions
    of objects that live to its end (extractions, merged records, the graph's updates, the
    resolution's profiles); each full collection their growth brings on would otherwise walk
    all of them again, and the whole process's heap besides (the graph, the stores' caches,
    the lookups, the LLM client), none of which can be garbage yet. The block covers the
    whole write, its reads before the stages and its commit after them included: a full
    collection that fell there walked that whole heap, and which write it fell in was a
    matter of where the collector's counters stood. Garbage in a cycle made of frozen objects
    waits for the block's end. Full collections are also made ``FULL_COLLECTIONS_RARER``
    times rarer in the block: what a write's objects live through is the write, so those
    collections walk its growing results and find next to nothing (a young collection still
    frees the cycles that die young, such as a finished call's). Left alone where the
    collector is off or something else froze objects (a server that freezes its heap before
    forking must keep it frozen)."""

    # The block that froze the heap, while it is open: a block entered inside it joins it.
    _open: Optional["FrozenHeap"] = None

    def __init__(self) -> None:
        self._owned = False
        self._joined: Optional[FrozenHeap] = None
        self._thresholds: tuple[int, int, int] = gc.get_threshold()

    def __enter__(self) -> "FrozenHeap":
        outer = FrozenHeap._open
        if outer is not None and outer._owned:
            self._joined = outer
        elif gc.isenabled() and not gc.get_freeze_count():
            gc.freeze()
            self._owned = True
            self._thresholds = gc.get_threshold()
            young, middle, full = self._thresholds
            gc.set_threshold(young, middle, full * FULL_COLLECTIONS_RARER)
            FrozenHeap._open = self
        return self

    def settle(self) -> None:
        """Set aside the objects alive now as well (a stage's results, kept to the end)."""
        if self._owned or (self._joined is not None and self._joined._owned):
            gc.freeze()

    def __exit__(self, *exc: object) -> None:
        self._joined = None
        if self._owned:
            gc.unfreeze()
            gc.set_threshold(*self._thresholds)
            self._owned = False
            FrozenHeap._open = None
