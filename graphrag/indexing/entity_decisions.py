"""The user's side of entity resolution: decisions a person makes (merge these names, never
merge those) and what a person reviews (which node a name is in, candidate duplicates).

Manual decisions are stored apart from the derived ones and applied by the same pipeline
pass as an insert with nothing new, so they hold across every later insert and delete.
Each function works over an explicit ``Pipeline``: a write's for a decision, one over the
current stores for a review.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from graphrag.errors import EntityNotFound, InvalidInputError
from graphrag.indexing.pipeline import Pipeline
from graphrag.operators.extraction import normalize_entity_name

if TYPE_CHECKING:
    from graphrag.operators.resolution import ManualDecisions


async def merge_entities(write: Pipeline, names: list[str], into: str) -> dict[str, Any]:
    keys = [normalize_entity_name(n) for n in names]
    return await _decide(write, names, lambda manual: manual.merge(keys, normalize_entity_name(into)))


async def never_merge(write: Pipeline, a: str, b: str) -> dict[str, Any]:
    return await _decide(write, [a, b], lambda manual: manual.keep_apart(normalize_entity_name(a),
                                                                         normalize_entity_name(b)))


async def undo_decisions(write: Pipeline, names: list[str]) -> dict[str, Any]:
    """Drop every manual decision naming one of ``names`` and rebuild what that changes:
    the names go back to what the evidence decides."""
    keys = {normalize_entity_name(n) for n in names}
    resolution = write.entity_resolution(set(), {})
    manual = await resolution.manual()
    undone = manual.undo(keys)
    if not undone["merges"] and not undone["never"]:
        raise InvalidInputError(f"no merge or never-merge decision names {', '.join(names)}")
    await resolution.save_manual(manual)
    return {**await write.apply_changes({}, []), "undone": undone}


async def resolve_pending(write: Pipeline) -> dict[str, Any]:
    """A write with nothing new in which the judge asks every pending pair."""
    return await write.apply_changes({}, [], judge_pending=True)


async def _decide(write: Pipeline, known: list[str], change: Callable[["ManualDecisions"], None]) -> dict[str, Any]:
    """Record a manual decision about ``known`` names (each must be indexed) and rebuild
    what it changes, inside ``write``."""
    resolution = write.entity_resolution(set(), {})
    state = await resolution.state()
    indexed = state.names if state else set()
    missing = [n for n in known if normalize_entity_name(n) not in indexed]
    if missing:
        raise EntityNotFound(f"unknown entity name(s): {', '.join(missing)} (see `graphrag entities "
                             "--duplicates`)", missing=missing)
    manual = await resolution.manual()
    change(manual)
    await resolution.save_manual(manual)
    return await write.apply_changes({}, [])


async def canonical_entity(index: Pipeline, name: str) -> Optional[str]:
    key = normalize_entity_name(name)
    state = await index.entity_resolution(set(), {}).state()
    if state is not None and key in state.names:
        return state.aliases.get(key, key)
    return key if await index.stores.graph.has_node(key) else None


async def entity_duplicates(index: Pipeline) -> list[dict[str, Any]]:
    from graphrag.operators.resolution import ResolutionSettings, duplicate_groups

    resolution = index.entity_resolution(set(), {})
    store = index.stores.chunk_extractions
    keys = await store.all_keys()
    extractions = {k: v for k, v in zip(keys, await store.get_by_ids(keys)) if v}
    return await duplicate_groups(extractions, await resolution.state(), await resolution.manual(),
                                  ResolutionSettings(threshold=index.config.entity_resolution_threshold))
