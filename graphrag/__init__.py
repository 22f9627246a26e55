"""A small, file-backed GraphRAG engine with nano-graphrag's API.

    from graphrag import GraphRAG, QueryParam
    rag = GraphRAG(working_dir="./cache")
    rag.insert(["doc one ...", "doc two ..."])
    rag.query("What are the main themes?", QueryParam(mode="global"))

Names are imported on first use, so ``import graphrag`` (and the CLI's start-up) stays fast.
"""
from __future__ import annotations

from graphrag.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "GraphRAG": "graphrag.graphrag",
    "GraphRAGConfig": "graphrag.config",
    "QueryParam": "graphrag.query_param",
    "EmbeddingFunc": "graphrag.embedding",
    "hash_embedding": "graphrag.embedding",
    "local_embedding": "graphrag.embedding",
    "openai_embedding": "graphrag.embedding",
    "wrap_embedding_func_with_attrs": "graphrag.embedding",
    "BaseGraphStorage": "graphrag.storage",
    "BaseKVStorage": "graphrag.storage",
    "BaseVectorStorage": "graphrag.storage",
    "JsonKVStorage": "graphrag.storage",
    "NanoVectorDBStorage": "graphrag.storage",
    "NetworkXStorage": "graphrag.storage",
    "StorageNameSpace": "graphrag.storage",
    **{name: "graphrag.errors" for name in (
        "GraphRAGError", "ConfigurationError", "InvalidInputError", "ContextWindowError", "LLMError",
        "ContextOverflowError", "NoLLMConfiguredError", "StorageError", "StoreUnavailableError",
        "WorkingDirLockedError", "DocumentNotFound", "EntityNotFound")},
}

__all__ = sorted([*_EXPORTS, "__version__"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
