"""Storage backends chosen by name (``GraphRAG(kv_storage="postgres", ...)``, the
``GRAPHRAG_*_STORAGE`` variables, the CLI's ``--*-storage`` flags).

A ``*_storage_cls`` option, as in nano-graphrag, wins over a name. A backend on a database
needs its optional extra installed; naming one without it says which extra to install.
"""
from __future__ import annotations

import importlib
import os
from typing import Optional

from graphrag.config import GraphRAGConfig
from graphrag.errors import ConfigurationError

# kind -> name -> ("module:Class", extra or None, modules the extra provides)
_BACKENDS: dict[str, dict[str, tuple[str, Optional[str], tuple[str, ...]]]] = {
    "kv": {
        "json": ("graphrag.storage.kv_json:JsonKVStorage", None, ()),
        "postgres": ("graphrag.storage.postgres:PostgresKVStorage", "postgres", ("psycopg", "psycopg_pool")),
    },
    "vector": {
        "nano": ("graphrag.storage.vector_nano:NanoVectorDBStorage", None, ()),
        "pgvector": ("graphrag.storage.vector_pgvector:PGVectorStorage", "postgres", ("psycopg", "psycopg_pool")),
        "milvus": ("graphrag.storage.vector_milvus:MilvusVectorStorage", "milvus", ("pymilvus",)),
    },
    "graph": {
        "networkx": ("graphrag.storage.graph_networkx:NetworkXStorage", None, ()),
        "postgres": ("graphrag.storage.graph_postgres:PostgresGraphStorage", "postgres", ("psycopg", "psycopg_pool")),
        "neo4j": ("graphrag.storage.graph_neo4j:Neo4jGraphStorage", "neo4j", ("neo4j",)),
    },
}
ENV_VARS = {"kv": "GRAPHRAG_KV_STORAGE", "vector": "GRAPHRAG_VECTOR_STORAGE", "graph": "GRAPHRAG_GRAPH_STORAGE"}
_OPTIONS = {"kv": ("key_string_value_json_storage_cls", "kv_storage"),
            "vector": ("vector_db_storage_cls", "vector_storage"),
            "graph": ("graph_storage_cls", "graph_storage")}


def backend_names(kind: str) -> list[str]:
    return list(_BACKENDS[kind])


def storage_class(config: GraphRAGConfig, kind: str) -> type:
    """The store class of ``kind`` ("kv", "vector", "graph") that ``config`` asks for: its
    ``*_storage_cls``, else the backend named by its option or environment variable, else the files."""
    cls_option, name_option = _OPTIONS[kind]
    given = getattr(config, cls_option)
    if given is not None:
        return given
    name = getattr(config, name_option) or os.environ.get(ENV_VARS[kind]) or next(iter(_BACKENDS[kind]))
    if name not in _BACKENDS[kind]:
        raise ConfigurationError(f"unknown {name_option} {name!r}: choose one of {', '.join(_BACKENDS[kind])}")
    path, extra, modules = _BACKENDS[kind][name]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigurationError(f"{name_option}={name!r} needs the '{extra}' extra: "
                                     f"pip install \"filegraphrag[{extra}]\" (missing module {module})") from None
    module_name, class_name = path.split(":")
    return getattr(importlib.import_module(module_name), class_name)
