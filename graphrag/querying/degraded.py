"""Answering while a store's server is down (degraded mode).

A query whose graph or vector store cannot be reached (``StoreUnavailableError``) is answered
from the stores still up, by the mode its own declares for that store (``QueryMode.degraded``):
without the graph, from the text chunks (naive); without the vectors, from the graph, reached
by the entity names the question contains (local, with those names standing in for the entity
vectors). The answer then
starts with one line saying so, and the same line is logged. Without the KV store (documents,
chunks, reports) there is nothing to answer from, and the error stands.
"""
from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import Any, Optional

from graphrag.errors import StoreUnavailableError
from graphrag.operators.modes import get_mode
from graphrag.query_param import QueryParam

logger = logging.getLogger(__name__)

# Longest run of words tried as an entity name.
_MAX_NAME_WORDS = 6
_WORD = re.compile(r"\w[\w'&.-]*", re.UNICODE)


def degraded_note(down: str, how: str) -> str:
    return f"[Degraded: the {down} store is unreachable; answered {how}.]"


class EntitiesByName:
    """Stands in for the entity vectors: the graph's entities whose names the question contains,
    longest name first (each as a hit of similarity 1.0)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        from graphrag.graph_api import NameIndex

        names = NameIndex(name for name, _ in await self.graph.get_nodes_attributes(()))
        words = _WORD.findall(query)
        found: dict[str, None] = {}
        for length in range(min(_MAX_NAME_WORDS, len(words)), 0, -1):
            for start in range(len(words) - length + 1):
                name = names.resolve(" ".join(words[start : start + length]))
                if name is not None:
                    found.setdefault(name)
        return [{"entity_name": name, "id": name, "distance": 1.0} for name in list(found)[:top_k]]


class _WithReplaced:
    """The stores, with some replaced (attribute access only, as the query operators use them)."""

    def __init__(self, stores: Any, **replaced: Any) -> None:
        self._stores, self._replaced = stores, replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced[name] if name in self._replaced else getattr(self._stores, name)


def _fallback(mode: str, down: str, stores: Any) -> Optional[tuple[str, Any, str]]:
    """(mode, stores, how) to answer with while the ``down`` store is unreachable, as ``mode``
    declares (``QueryMode.degraded``); None if it declares nothing or its stand-in cannot run."""
    other = get_mode(mode).degraded.get(down)
    if other is None:
        return None
    if down == "graph":
        if stores.chunks_vdb is None:
            return None
        return other, stores, f"in {other} mode from the text chunks"
    # No chunk vectors either: local keeps its Sources in graph order (no walk).
    return other, _WithReplaced(stores, entities_vdb=EntitiesByName(stores.graph), chunks_vdb=None), (
        "from the graph, through the entity names in the question")


async def answer(query: str, stores: Any, param: QueryParam, **kwargs: Any) -> str:
    """``param.mode``'s answer; if a store it needs is down, the answer of the mode it names
    for that case, after a one-line note (see the module docstring)."""
    try:
        return await get_mode(param.mode).run()(query, stores, param, **kwargs)
    except StoreUnavailableError as exc:
        fallback = _fallback(param.mode, exc.store, stores)
        if fallback is None:
            raise
        mode, reachable, how = fallback
        note = degraded_note(exc.store, how)
        logger.warning("%s (%s)", note, exc)
        return f"{note}\n\n" + await get_mode(mode).run()(query, reachable, replace(param, mode=mode), **kwargs)
