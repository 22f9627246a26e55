"""Small helpers shared by the storage test files."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

import graphrag.storage.files as files
from graphrag.config import GraphRAGConfig
from graphrag.storage import JsonKVStorage, NetworkXStorage, commit_transaction


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def kv(config: GraphRAGConfig, namespace: str = "docs", **kw: Any) -> JsonKVStorage:
    return JsonKVStorage(namespace=namespace, global_config=config, **kw)


def graph(config: GraphRAGConfig, namespace: str = "chunk_entity_relation") -> NetworkXStorage:
    return NetworkXStorage(namespace=namespace, global_config=config)


def committed(store: Any, directory: Any) -> None:
    """Commit ``store``'s changes, as an insert's transaction does."""
    with commit_transaction(str(directory)):
        run(store.index_done_callback())


def commit_killed_mid_append(store: Any, directory: Any, monkeypatch: Any, torn: bytes) -> None:
    """Commit ``store``'s changes with the process dying once the manifest is written, in the
    middle of the journal appends: each appended journal ends in ``torn``."""

    def killed(appends: list[tuple[str, str, int]]) -> None:
        for _, final, offset in appends:
            with open(final, "r+b") as f:
                f.truncate(offset)
                f.seek(offset)
                f.write(torn)
        raise KeyboardInterrupt  # stands in for the kill

    monkeypatch.setattr(files, "_apply_appends", killed)
    with pytest.raises(KeyboardInterrupt):
        committed(store, directory)
    monkeypatch.undo()
