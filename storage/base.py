"""The three storage interfaces and their shared namespace lifecycle.

The engine drives every store the same way: ``index_start_callback`` before an
insert (reload what another process committed), ``index_done_callback`` to persist,
``query_done_callback`` after a query.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Generic, Optional, TypeVar, Union

from graphrag.config import GraphRAGConfig
from graphrag.schema import CommunitySchema

T = TypeVar("T")


@dataclass
class StorageNameSpace:
    namespace: str
    global_config: GraphRAGConfig

    @property
    def working_dir(self) -> str:
        return self.global_config.working_dir

    def path_for(self, filename: str) -> str:
        return os.path.join(self.working_dir, filename)

    async def index_start_callback(self) -> None:
        """Called before an insert, with the writer lock held."""

    async def index_done_callback(self) -> None:
        """Called after an insert: persist."""

    async def query_done_callback(self) -> None:
        """Called after every query."""


@dataclass
class BaseKVStorage(StorageNameSpace, Generic[T]):
    async def all_keys(self) -> list[str]:
        raise NotImplementedError

    async def get_by_id(self, id: str) -> Optional[T]:
        raise NotImplementedError

    async def get_by_ids(self, ids: list[str], fields: Optional[set[str]] = None) -> list[Optional[T]]:
        raise NotImplementedError

    async def filter_keys(self, keys: list[str]) -> set[str]:
        """The keys not stored yet."""
        raise NotImplementedError

    async def upsert(self, data: dict[str, T]) -> None:
        raise NotImplementedError

    async def delete(self, ids: list[str]) -> None:
        raise NotImplementedError

    async def drop(self) -> None:
        raise NotImplementedError


@dataclass
class BaseVectorStorage(StorageNameSpace):
    embedding_func: Any = None
    meta_fields: set[str] = field(default_factory=set)

    async def query(self, query: str, top_k: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        """Embed each record's ``content`` and store it with its ``meta_fields``."""
        raise NotImplementedError

    async def delete(self, ids: list[str]) -> None:
        raise NotImplementedError


@dataclass
class BaseGraphStorage(StorageNameSpace):
    async def has_node(self, node_id: str) -> bool:
        raise NotImplementedError

    async def has_edge(self, source_node_id: str, target_node_id: str) -> bool:
        raise NotImplementedError

    async def node_degree(self, node_id: str) -> int:
        raise NotImplementedError

    async def edge_degree(self, src_id: str, tgt_id: str) -> int:
        raise NotImplementedError

    async def get_node(self, node_id: str) -> Union[dict, None]:
        raise NotImplementedError

    async def get_edge(self, source_node_id: str, target_node_id: str) -> Union[dict, None]:
        raise NotImplementedError

    async def get_node_edges(self, source_node_id: str) -> Union[list[tuple[str, str]], None]:
        raise NotImplementedError

    async def get_nodes_batch(self, node_ids: list[str]) -> list[Union[dict, None]]:
        return [await self.get_node(n) for n in node_ids]

    async def get_edges_batch(self, pairs: list[tuple[str, str]]) -> list[Union[dict, None]]:
        return [await self.get_edge(a, b) for a, b in pairs]

    async def node_degrees_batch(self, node_ids: list[str]) -> list[int]:
        return [await self.node_degree(n) for n in node_ids]

    async def edge_degrees_batch(self, pairs: list[tuple[str, str]]) -> list[int]:
        return [await self.edge_degree(a, b) for a, b in pairs]

    async def get_nodes_edges_batch(self, node_ids: list[str]) -> list[list[tuple[str, str]]]:
        return [await self.get_node_edges(n) or [] for n in node_ids]

    async def upsert_node(self, node_id: str, node_data: dict[str, Any]) -> None:
        raise NotImplementedError

    async def upsert_edge(self, source_node_id: str, target_node_id: str, edge_data: dict[str, Any]) -> None:
        raise NotImplementedError

    async def delete_node(self, node_id: str) -> None:
        raise NotImplementedError

    async def delete_edge(self, source_node_id: str, target_node_id: str) -> None:
        raise NotImplementedError

    async def clustering(self, algorithm: str, full: bool = False) -> None:
        raise NotImplementedError

    async def community_schema(self) -> dict[str, CommunitySchema]:
        raise NotImplementedError
