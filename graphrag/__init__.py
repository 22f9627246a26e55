"""A small, file-backed GraphRAG engine with nano-graphrag's API.

    from graphrag import GraphRAG, QueryParam
    rag = GraphRAG(working_dir="./cache")
    rag.insert(["doc one ...", "doc two ..."])
    rag.query("What are the main themes?", QueryParam(mode="global"))
"""
from graphrag.config import GraphRAGConfig
from graphrag.embedding import EmbeddingFunc, hash_embedding, local_embedding, wrap_embedding_func_with_attrs
from graphrag.graphrag import GraphRAG
from graphrag.query_param import QueryParam
from graphrag.storage import (
    BaseGraphStorage,
    BaseKVStorage,
    BaseVectorStorage,
    JsonKVStorage,
    NanoVectorDBStorage,
    NetworkXStorage,
    StorageNameSpace,
)

__version__ = "0.1.0"

__all__ = [
    "BaseGraphStorage",
    "BaseKVStorage",
    "BaseVectorStorage",
    "EmbeddingFunc",
    "GraphRAG",
    "GraphRAGConfig",
    "JsonKVStorage",
    "NanoVectorDBStorage",
    "NetworkXStorage",
    "QueryParam",
    "StorageNameSpace",
    "__version__",
    "hash_embedding",
    "local_embedding",
    "wrap_embedding_func_with_attrs",
]
