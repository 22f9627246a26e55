"""Answering while a store's server is down (degraded mode).

A query whose graph or vector store cannot be reached (``StoreUnavailableError``) is answered
from the stores still up, by the mode the asked mode declares for that store (``QueryMode.degraded``):
without the graph, from the text chunks (naive); without the vectors, from the graph, reached
by the entity names the question contains (local, with those names standing in for the entity
vectors). The answer then starts with one line saying so, and the same line is logged.
Without the KV store (documents, chunks, reports) there is nothing to answer from, and the
error stands.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Union

from graphrag.errors import StoreUnavailableError
from graphrag.operators.modes import get_mode
from graphrag.query_param import QueryParam

if TYPE_CHECKING:
    from graphrag.graph_api import KnowledgeGraph
    from graphrag.stores import Stores

logger = logging.getLogger(__name__)


def degraded_note(down: str, how: str) -> str:
    return f"[Degraded: the {down} store is unreachable; answered {how}.]"


class EntitiesByName:
    """Stands in for the entity vectors: the entities the question names (``names_in``, the
    graph API's ``anames_in``), longest name first, each as a hit of similarity 1.0."""

    def __init__(self, names_in: Callable[[str], Awaitable[list[str]]]) -> None:
        self.names_in = names_in

    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        names = (await self.names_in(query))[:top_k]
        return [{"entity_name": name, "id": name, "distance": 1.0} for name in names]


class _WithReplaced:
    """The stores, with some replaced (attribute access only, as the query operators use them)."""

    def __init__(self, stores: Stores, **replaced: object) -> None:
        self._stores, self._replaced = stores, replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced[name] if name in self._replaced else getattr(self._stores, name)


def _fallback(mode: str, down: str, stores: Stores, graph: KnowledgeGraph
              ) -> Optional[tuple[str, Union[Stores, _WithReplaced], str]]:
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
    return other, _WithReplaced(stores, entities_vdb=EntitiesByName(graph.anames_in), chunks_vdb=None), (
        "from the graph, through the entity names in the question")


async def answer(query: str, stores: Stores, graph: KnowledgeGraph, param: QueryParam, **kwargs: Any) -> str:
    """``param.mode``'s answer; if a store it needs is down, the answer of the mode it names
    for that case, after a one-line note (see the module docstring). ``graph``: the graph API
    over ``stores``, which finds entities by name."""
    try:
        return await get_mode(param.mode).run()(query, stores, param, **kwargs)
    except StoreUnavailableError as exc:
        fallback = _fallback(param.mode, exc.store, stores, graph)
        if fallback is None:
            raise
        mode, reachable, how = fallback
        note = degraded_note(exc.store, how)
        logger.warning("%s (%s)", note, exc)
        preface = getattr(kwargs.get("llm"), "preface", None)
        if preface is not None:  # a streamed answer (streaming.py): the note goes out before its pieces
            preface(f"{note}\n\n")
        return f"{note}\n\n" + await get_mode(mode).run()(query, reachable, replace(param, mode=mode), **kwargs)
