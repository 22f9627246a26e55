"""A small, file-backed GraphRAG engine with nano-graphrag's API.

    from graphrag import GraphRAG, QueryParam
    rag = GraphRAG(working_dir="./cache")
    rag.insert(["doc one ...", "doc two ..."])
    rag.query("What are the main themes?", QueryParam(mode="global"))

Names are imported on first use, so ``import graphrag`` (and the CLI's start-up) stays fast.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "GraphRAG": "graphrag.graphrag",
    "GraphRAGConfig": "graphrag.config",
    "QueryParam": "graphrag.query_param",
    "EmbeddingFunc": "graphrag.embedding",
    "hash_embedding": "graphrag.embedding",
    "local_embedding": "graphrag.embedding",
    "wrap_embedding_func_with_attrs": "graphrag.embedding",
    "BaseGraphStorage": "graphrag.storage",
    "BaseKVStorage": "graphrag.storage",
    "BaseVectorStorage": "graphrag.storage",
    "JsonKVStorage": "graphrag.storage",
    "NanoVectorDBStorage": "graphrag.storage",
    "NetworkXStorage": "graphrag.storage",
    "StorageNameSpace": "graphrag.storage",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'graphrag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
