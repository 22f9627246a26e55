"""The graph's upkeep over HTTP: entity names for a picker (label search, popular entities)
and the manual entity decisions the CLI makes (``graphrag entities --merge/--never/--undo``),
each run as a job. A read-only server has the two reads only.

A decision's names are checked before it is queued (HTTP and MCP alike): at most
``MAX_DECISION_NAMES`` of them, each at most ``MAX_NAME_CHARS`` long and not blank once
cleaned as extraction cleans names, and a never-merge names two different entities. A merge
may name a new entity (``into``), and names are kept in the job list and the log: an
unbounded one would be stored and echoed for good.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from graphrag.errors import ConfigurationError, InvalidInputError
from graphrag.server.jobs import Job
from graphrag.server.service import GraphService

MAX_LABELS = 1000
MAX_NAME_CHARS = 500
MAX_DECISION_NAMES = 100


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    names: list[str] = Field(min_length=1, description="the entities to merge")
    into: str = Field(min_length=1, description="the name the merged entity keeps")


class NeverMergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    names: list[str] = Field(min_length=2, max_length=2, description="two entities never to merge")


class UndoRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    names: list[str] = Field(min_length=1, description="drop every merge or never-merge decision naming these")


def merge(service: GraphService, names: list[str], into: str) -> Job:
    _check_names(names)
    _check_names([into])
    return _decide(service, "merge_entities", {"names": names, "into": into},
                   f"merge {', '.join(names)} into {into}")


def never_merge(service: GraphService, a: str, b: str) -> Job:
    from graphrag.operators.extraction import normalize_entity_name

    _check_names([a, b])
    if normalize_entity_name(a) == normalize_entity_name(b):
        raise InvalidInputError(f"never-merge needs two different entities, not {a!r} twice")
    return _decide(service, "never_merge", {"a": a, "b": b}, f"never merge {a} and {b}")


def undo(service: GraphService, names: list[str]) -> Job:
    _check_names(names)
    return _decide(service, "undo_entity_decisions", {"names": names},
                   f"undo the entity decisions naming {', '.join(names)}")


def _check_names(names: list[str]) -> None:
    from graphrag.operators.extraction import normalize_entity_name

    if len(names) > MAX_DECISION_NAMES:
        raise InvalidInputError(f"a decision names at most {MAX_DECISION_NAMES} entities, got {len(names)}")
    for name in names:
        if len(name) > MAX_NAME_CHARS:
            raise InvalidInputError(f"an entity name is at most {MAX_NAME_CHARS} characters, got one of {len(name)}")
        if not normalize_entity_name(name):
            raise InvalidInputError(f"{name!r} names no entity (blank once cleaned)")


def _decide(service: GraphService, op: str, args: dict[str, Any], description: str) -> Job:
    if not service.config.entity_resolution:  # refused now rather than as a failed job
        raise ConfigurationError("entity decisions need entity_resolution=True")
    return service.decide(op, args, description)


def upkeep_router(service: GraphService) -> APIRouter:
    router = APIRouter(tags=["graph upkeep"])

    @router.get("/graph/labels", summary="Entity names for a picker: prefix matches first, then spelt alike; "
                                         "each with its type and degree")
    async def labels(q: str = "", limit: int = Query(20, ge=0, le=MAX_LABELS)) -> list[dict[str, Any]]:
        return await service.graph("labels", q, limit)

    @router.get("/graph/popular", summary="The best connected entities, with their type and degree")
    async def popular(limit: int = Query(20, ge=0, le=MAX_LABELS)) -> list[dict[str, Any]]:
        return await service.graph("popular", limit)

    if service.read_only:
        return router

    @router.post("/graph/merge", status_code=202,
                 summary="Merge entities into one, for good (kept across later writes); returns the job")
    async def merge_entities(body: MergeRequest) -> dict[str, Any]:
        return merge(service, body.names, body.into).to_dict()

    @router.post("/graph/never-merge", status_code=202,
                 summary="Keep two entities apart whatever the evidence; returns the job")
    async def never_merge_entities(body: NeverMergeRequest) -> dict[str, Any]:
        return never_merge(service, *body.names).to_dict()

    @router.post("/graph/undo", status_code=202,
                 summary="Drop the merge and never-merge decisions naming these entities; returns the job")
    async def undo_decisions(body: UndoRequest) -> dict[str, Any]:
        return undo(service, body.names).to_dict()

    return router
