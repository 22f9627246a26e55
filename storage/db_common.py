"""What the database backends share: their optional extras, the names they build tables,
labels and collections from, and the buffer that keeps a write until its commit.

A backend whose server has no multi-statement transaction (a Bolt graph, Milvus) keeps the
write in a :class:`PendingRecords` per kind of record, answers every read through it, and
applies it at ``index_commit_callback``; an abort drops it.
"""
from __future__ import annotations

import os
import re
from typing import Any, Generic, Iterator, Optional, TypeVar

from graphrag.config import GraphRAGConfig
from graphrag.errors import ConfigurationError

WORKSPACE_ENV = "GRAPHRAG_WORKSPACE"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,23}")


def require_extra(extra: str, *modules: str) -> None:
    """Import ``modules`` or say which optional extra installs them."""
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigurationError(
                f"this storage backend needs the '{extra}' extra: pip install \"filegraphrag[{extra}]\" "
                f"(could not import {module}: {exc})") from None


def validated_name(kind: str, name: str) -> str:
    """A workspace or namespace usable inside a table name: a letter, then letters, digits or _."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(f"{kind} {name!r} is not valid: use a letter then up to 23 letters, digits or _")
    return name.lower()


def workspace_of(config: GraphRAGConfig) -> str:
    return validated_name("workspace", config.storage_options.get("workspace")
                          or os.environ.get(WORKSPACE_ENV) or "default")


K = TypeVar("K")
_MISSING: Any = object()  # Any: the default of parameters of every type


class PendingRecords(Generic[K]):
    """Records a write changed, not committed yet, read back over what is stored.

    An entry is None (deleted) or ``(replace, attributes)``: ``replace`` when the stored version
    is gone (deleted or dropped earlier in this write), else the attributes merge over it.
    After :meth:`drop`, nothing stored counts.
    """

    def __init__(self) -> None:
        self.entries: dict[K, Optional[tuple[bool, dict]]] = {}
        self.dropped = False

    def __bool__(self) -> bool:
        return bool(self.entries) or self.dropped

    def __contains__(self, key: K) -> bool:
        return key in self.entries

    def upsert(self, key: K, data: dict, replace_stored: bool = False) -> None:
        """Merge ``data`` into the record (``replace_stored``: the stored version no longer counts)."""
        entry = self.entries.get(key, _MISSING)
        if entry is _MISSING or entry is None:
            self.entries[key] = (entry is None or replace_stored or self.dropped, dict(data))
        else:
            entry[1].update(data)

    def delete(self, key: K) -> None:
        self.entries[key] = None

    def drop(self) -> None:
        """Every record goes, stored or written in this write."""
        self.entries.clear()
        self.dropped = True

    def read(self, key: K, stored: Optional[dict]) -> Optional[dict]:
        """The record as this write leaves it, ``stored`` being what the database holds."""
        entry = self.entries.get(key, _MISSING)
        if entry is _MISSING:
            return None if self.dropped else stored
        if entry is None:
            return None
        replace, data = entry
        return dict(data) if replace or stored is None else {**stored, **data}

    def written(self) -> Iterator[tuple[K, bool, dict]]:
        """``(key, replace, attributes)`` of every record upserted in this write."""
        return ((key, entry[0], entry[1]) for key, entry in self.entries.items() if entry is not None)

    def gone(self) -> list[K]:
        """Keys whose stored version must be removed at the commit (deleted, or replaced)."""
        return [key for key, entry in self.entries.items() if entry is None or entry[0]]
