"""Small helpers shared by the storage test files."""
from __future__ import annotations

import asyncio
from typing import Any

from graphrag.config import GraphRAGConfig
from graphrag.storage import JsonKVStorage, NetworkXStorage


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def kv(config: GraphRAGConfig, namespace: str = "docs", **kw: Any) -> JsonKVStorage:
    return JsonKVStorage(namespace=namespace, global_config=config, **kw)


def graph(config: GraphRAGConfig, namespace: str = "chunk_entity_relation") -> NetworkXStorage:
    return NetworkXStorage(namespace=namespace, global_config=config)
