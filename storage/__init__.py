"""File-backed stores behind three small interfaces (KV, vector, graph)."""
from .base import (
    BaseGraphStorage,
    BaseKVStorage,
    BaseVectorStorage,
    ClusterMemberships,
    GraphAttributes,
    KeepsWalkLinks,
    StorageNameSpace,
    capabilities,
)
from .files import StorageFileError, commit_transaction, recover_pending_commit
from .graph_networkx import NetworkXStorage
from .kv_json import JsonKVStorage
from .vector_nano import EmbeddingDimensionError, NanoVectorDBStorage

__all__ = [
    "BaseGraphStorage",
    "BaseKVStorage",
    "BaseVectorStorage",
    "ClusterMemberships",
    "EmbeddingDimensionError",
    "GraphAttributes",
    "JsonKVStorage",
    "KeepsWalkLinks",
    "NanoVectorDBStorage",
    "NetworkXStorage",
    "StorageFileError",
    "StorageNameSpace",
    "capabilities",
    "commit_transaction",
    "recover_pending_commit",
]
