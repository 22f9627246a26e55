"""Reads of a working dir's index for a person or a tool (``graphrag stats``, ``docs``,
``entities``): no embedding model, no LLM, no lock, no recovery (a reader must not write),
vector files described rather than loaded. ``GraphRAG.inspect(working_dir)`` opens one over
a working dir's files; ``rag.inspection`` is one over an engine's own stores.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Optional

from graphrag.aio import blocking
from graphrag.failed_chunks import read_failed_chunks
from graphrag.records import split_field
from graphrag.stores import Stores

if TYPE_CHECKING:
    from graphrag.storage.base import BaseGraphStorage, BaseKVStorage


class Inspection:
    """What ``graphrag stats``, ``docs`` and ``entities`` show, each ``a*`` read with its
    blocking twin."""

    def __init__(self, stores: Stores, working_dir: str) -> None:
        self.stores = stores
        self.working_dir = working_dir

    @classmethod
    def open(cls, working_dir: str) -> "Inspection":
        """Over a working dir's files, without the engine."""
        from graphrag.config import GraphRAGConfig
        from graphrag.stores import open_stores

        return cls(open_stores(GraphRAGConfig(working_dir=working_dir, always_create_working_dir=False), None),
                   working_dir)

    async def aclose(self) -> None:
        await self.stores.close()

    async def astats(self) -> dict[str, Any]:
        """Everything ``graphrag stats`` shows."""
        return await _stats(self.stores, self.working_dir)

    stats = blocking(astats)

    async def adocuments(self) -> list[dict[str, Any]]:
        """Each document: id, source, size, chunks and how many of them wait for a retry."""
        return await _documents(self.stores)

    documents = blocking(adocuments)

    async def acounts(self) -> dict[str, int]:
        """What the index holds: documents, chunks, entities, relations."""
        stores = self.stores
        return {"documents": await stores.full_docs.count(), "chunks": await stores.text_chunks.count(),
                "entities": await stores.graph.count_nodes(), "relations": await stores.graph.count_edges()}

    counts = blocking(acounts)

    async def abuilt_offline(self) -> bool:
        """True when every community report was written without an LLM (an ``--offline`` index)."""
        return await _built_offline(self.stores)

    built_offline = blocking(abuilt_offline)

    async def amerged_entities(self) -> dict[str, list[str]]:
        """Each node that entity resolution merged names into, with those names."""
        return await _merged_entities(self.stores)

    merged_entities = blocking(amerged_entities)


async def _records(store: Optional[BaseKVStorage]) -> dict[str, Any]:
    if store is None:
        return {}
    keys = await store.all_keys()
    return {k: r for k, r in zip(keys, await store.get_by_ids(keys)) if r is not None}


async def _built_offline(stores: Stores) -> bool:
    reports = await _records(stores.community_reports)
    sources = {r.get("report_source") for r in reports.values() if isinstance(r, dict)}
    return bool(sources) and sources <= {"extractive"}


async def _graph_counts(graph: BaseGraphStorage) -> tuple[int, int, dict[int, int]]:
    levels: dict[int, set] = {}
    for _, data in await graph.get_all_nodes():
        raw = data.get("clusters")
        if not raw:
            continue
        try:
            for c in json.loads(raw):
                levels.setdefault(int(c["level"]), set()).add(str(c["cluster"]))
        except (ValueError, KeyError, TypeError):
            continue
    return await graph.count_nodes(), await graph.count_edges(), {k: len(v) for k, v in sorted(levels.items())}


async def _stats(stores: Stores, working_dir: str) -> dict[str, Any]:
    reports = await _records(stores.community_reports)
    entities, relations, graph_levels = await _graph_counts(stores.graph)
    per_level: dict[str, int] = {}
    for record in reports.values():
        if isinstance(record, dict):
            level = str(record.get("level", 0))
            per_level[level] = per_level.get(level, 0) + 1
    if not per_level:  # no reports yet: count clusters in the graph
        per_level = {str(k): v for k, v in graph_levels.items()}
    cache = await _records(stores.llm_response_cache)
    by_model: dict[str, int] = {}
    for entry in cache.values():
        if isinstance(entry, dict):
            model = str(entry.get("model") or "unknown")
            by_model[model] = by_model.get(model, 0) + 1
    failed = await read_failed_chunks(stores.index_meta)
    usage = await stores.index_meta.get_by_id("llm_usage")
    usage = usage if isinstance(usage, dict) else {}
    usage_total: dict[str, int] = {}
    for counts in usage.values():
        if isinstance(counts, dict):
            for key, value in counts.items():
                if isinstance(value, (int, float)):
                    usage_total[key] = usage_total.get(key, 0) + int(value)
    size = 0
    files = 0
    for root, _, names in os.walk(working_dir):
        for name in names:
            try:
                size += os.path.getsize(os.path.join(root, name))
                files += 1
            except OSError:
                pass
    return {
        "working_dir": os.path.abspath(working_dir),
        "documents": await stores.full_docs.count(),
        "chunks": await stores.text_chunks.count(),
        # Chunks whose extraction failed (no record in the model's answers), waiting for a retry.
        "chunks_failed_extraction": len(failed),
        "chunks_failed_with_fallback": sum(bool(f.get("fallback")) for f in failed.values()),
        "entities": entities,
        "relations": relations,
        "communities": sum(per_level.values()),
        "communities_per_level": dict(sorted(per_level.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0)),
        "built_offline": await _built_offline(stores),
        "llm_cached_responses": len(cache),
        "llm_cached_responses_by_model": dict(sorted(by_model.items())),
        # Cumulative over every insert and delete (queries not included); {} for older dirs.
        "llm_usage_total": usage_total,
        "llm_usage_by_stage": usage,
        "entity_vectors": stores.stored_vectors("entities"),
        "chunk_vectors": stores.stored_vectors("chunks"),
        "relation_vectors": stores.stored_vectors("relations"),
        "files": files,
        "size_bytes": size,
        "size_human": human_bytes(size),
        "commit_pending": stores.commit_pending(),
    }


async def _documents(stores: Stores) -> list[dict[str, Any]]:
    failed = await read_failed_chunks(stores.index_meta)
    docs = await _records(stores.full_docs)
    per_doc: dict[str, int] = {}
    if any(not isinstance(r.get("chunk_ids"), list) for r in docs.values() if isinstance(r, dict)):
        # A working dir written before documents listed their chunks.
        for chunk in (await _records(stores.text_chunks)).values():
            if isinstance(chunk, dict) and chunk.get("full_doc_id"):
                per_doc[chunk["full_doc_id"]] = per_doc.get(chunk["full_doc_id"], 0) + 1
    return [
        {"id": k, "source": r.get("source"), "chars": len(r.get("content", "")),
         "chunks": len(r["chunk_ids"]) if isinstance(r.get("chunk_ids"), list) else per_doc.get(k, 0),
         "failed_chunks": sum(c in failed for c in r.get("chunk_ids") or [])}
        for k, r in docs.items() if isinstance(r, dict)
    ]


async def _merged_entities(stores: Stores) -> dict[str, list[str]]:
    nodes = await stores.graph.get_all_nodes()
    return {name: list(split_field(data.get("aliases"))) for name, data in sorted(nodes) if data.get("aliases")}


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover
