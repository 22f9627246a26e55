"""The user's side of entity resolution: decisions a person makes (merge these names, never
merge those) and what a person reviews (which node a name is in, candidate duplicates).

Manual decisions are stored apart from the derived ones and applied by the same pipeline
pass as an insert with nothing new, so they hold across every later insert and delete.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from graphrag.errors import ConfigurationError, EntityNotFound
from graphrag.operators.extraction import normalize_entity_name

if TYPE_CHECKING:
    from graphrag.graphrag import GraphRAG
    from graphrag.operators.resolution import ManualDecisions


async def merge_entities(rag: "GraphRAG", names: list[str], into: str) -> dict[str, Any]:
    keys = [normalize_entity_name(n) for n in names]
    return await _decide(rag, names, lambda manual: manual.merge(keys, normalize_entity_name(into)))


async def never_merge(rag: "GraphRAG", a: str, b: str) -> dict[str, Any]:
    return await _decide(rag, [a, b], lambda manual: manual.keep_apart(normalize_entity_name(a),
                                                                       normalize_entity_name(b)))


async def _decide(rag: "GraphRAG", known: list[str], change: Callable[["ManualDecisions"], None]) -> dict[str, Any]:
    """Record a manual decision about ``known`` names (each must be indexed) and rebuild
    what it changes, in one write."""
    if not rag.config.entity_resolution:
        raise ConfigurationError("entity decisions need entity_resolution=True")
    rag.usage.reset()
    async with rag._writing():
        resolution = rag._entity_resolution(set(), dict)
        state = await resolution.state()
        indexed = state.names if state else set()
        missing = [n for n in known if normalize_entity_name(n) not in indexed]
        if missing:
            raise EntityNotFound(f"unknown entity name(s): {', '.join(missing)} (see `graphrag entities "
                                 "--duplicates`)", missing=missing)
        manual = await resolution.manual()
        change(manual)
        await resolution.save_manual(manual)
        summary = await rag._apply_changes({}, [])
    return {**summary, "llm": rag.usage.snapshot()}


async def resolve_pending(rag: "GraphRAG") -> dict[str, Any]:
    """A write with nothing new in which the judge asks every pending pair."""
    if not rag.config.entity_resolution:
        raise ConfigurationError("resolving pending pairs needs entity_resolution=True")
    rag.usage.reset()
    async with rag._writing():
        summary = await rag._apply_changes({}, [], judge_pending=True)
    return {**summary, "llm": rag.usage.snapshot()}


async def canonical_entity(rag: "GraphRAG", name: str) -> Optional[str]:
    key = normalize_entity_name(name)
    try:
        state = await rag._entity_resolution(set(), dict).state()
        if state is not None and key in state.names:
            return state.aliases.get(key, key)
        return key if await rag.stores.graph.has_node(key) else None
    finally:
        await rag.stores.query_done()


async def entity_duplicates(rag: "GraphRAG") -> list[dict[str, Any]]:
    from graphrag.operators.resolution import ResolutionSettings, duplicate_groups

    resolution = rag._entity_resolution(set(), dict)
    store = rag.stores.chunk_extractions
    try:
        keys = await store.all_keys()
        extractions = {k: v for k, v in zip(keys, await store.get_by_ids(keys)) if v}
        return await duplicate_groups(extractions, await resolution.state(), await resolution.manual(),
                                      ResolutionSettings(threshold=rag.config.entity_resolution_threshold))
    finally:
        await rag.stores.query_done()
