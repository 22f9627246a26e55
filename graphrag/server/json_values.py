"""The engine's records as plain JSON values, for the HTTP API, the MCP tools and the reader
processes."""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import cast

from graphrag.records import Path
from graphrag.schema import JSONValue


def as_json(value: object) -> JSONValue:
    """The engine's records (``graphrag/records.py``) as plain JSON values; a path also lists
    the entities it goes through."""
    if isinstance(value, Path):
        return {"entities": list(value.entities), "hops": as_json(value.hops)}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return cast(JSONValue, value)  # a scalar, as JSON writes it
