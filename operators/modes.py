"""The query modes: one registry every entry point draws from.

A mode declares, by reference, the function answering with it (its runner) and the one
returning what it retrieves as a :class:`~graphrag.records.Retrieval` (its retriever); the
prompts of its plain and of its cited answers; the ``QueryParam`` budgets its context packs
under; what it cites (chunks or reports); the mode that answers for it while a store it needs
is down; and a one-line description. ``QueryParam``'s validation, the answer policy
(``graphrag/querying/``), the CLI's choices, the MCP tools' schema, the HTTP API and the web
page's list all read :data:`MODES`, so adding a mode is one module in ``operators/`` and one
:func:`register` call below.

Functions are named as ``"module:function"`` and imported on first use, so reading the
registry (``import graphrag``, the CLI's ``--help``) loads no query code, numpy included.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping

from graphrag.errors import InvalidInputError

# The budgets of a context made of entity, relation, report and passage tables (local's shape).
TABLE_BUDGETS: tuple[str, ...] = ("local_max_token_for_community_report", "local_max_token_for_local_context",
                                  "local_max_token_for_text_unit")


def _load(reference: str) -> Callable[..., Any]:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class QueryMode:
    """One query mode (see the module docstring). ``runner``: ``async (question, stores,
    param, *, llm, tokenizer) -> str``; ``retriever``: ``async (question, stores, param,
    tokenizer, cited=False) -> Retrieval | None``."""

    name: str
    description: str
    runner: str
    retriever: str
    # The answer prompts, in the order they are sent: one, given the context; or two, a map
    # call per context group then a reduce (global). The context fits the window beside each.
    prompts: tuple[str, ...]
    cited_prompts: tuple[str, ...]
    budgets: tuple[str, ...]
    # What a citation [n] numbers: the retrieval's chunks or its community reports.
    cites: Literal["chunks", "reports"] = "chunks"
    # A store that is down ("graph", "vector") -> the mode answering without it.
    degraded: Mapping[str, str] = field(default_factory=dict)

    def run(self) -> Callable[..., Any]:
        return _load(self.runner)

    def retrieve(self) -> Callable[..., Any]:
        return _load(self.retriever)


_MODES: dict[str, QueryMode] = {}
MODES: Mapping[str, QueryMode] = MappingProxyType(_MODES)  # name -> mode, in registration order


def register(mode: QueryMode) -> QueryMode:
    """Add ``mode`` (or replace the one of its name); every entry point offers it from then on
    (the HTTP API's request schema is built when ``graphrag.server.app`` is imported: register first)."""
    unknown = set(mode.degraded) - {"graph", "vector"}
    if unknown:
        raise InvalidInputError(f"mode {mode.name!r}: no store named {', '.join(sorted(unknown))}")
    _MODES[mode.name] = mode
    return mode


def unregister(name: str) -> None:
    """Remove the mode called ``name`` (a plugin's, or one registered for a test)."""
    _MODES.pop(name, None)


def mode_names() -> tuple[str, ...]:
    return tuple(_MODES)


def get_mode(name: str) -> QueryMode:
    """The mode called ``name``; an unknown name is the caller's error."""
    mode = _MODES.get(name)
    if mode is None:
        raise InvalidInputError(f"mode must be one of {', '.join(_MODES)}; got {name!r}")
    return mode


def describe_modes() -> str:
    """``name: description`` of every mode, for help texts."""
    return "; ".join(f"{m.name}: {m.description}" for m in _MODES.values())


_OPERATORS = "graphrag.operators"
# Without the graph, the passages by vector; without the vectors, local reaches the graph
# through the entity names in the question (see ``graphrag/querying/degraded.py``).
_AROUND_A_STORE = {"graph": "naive", "vector": "local"}

register(QueryMode(
    name="local", description="entities near the question, their relations, reports and passages",
    runner=f"{_OPERATORS}.query_local:local_query", retriever=f"{_OPERATORS}.query_local:retrieve_local",
    prompts=("local_rag_response",), cited_prompts=("local_rag_response_cited",), budgets=TABLE_BUDGETS,
    degraded=_AROUND_A_STORE))
register(QueryMode(
    name="global", description="themes across the whole collection, from community reports",
    runner=f"{_OPERATORS}.query_global:global_query", retriever=f"{_OPERATORS}.query_global:retrieve_global",
    prompts=("global_map_rag_points", "global_reduce_rag_response"),
    cited_prompts=("global_map_rag_points_cited", "global_reduce_rag_response_cited"),
    budgets=("global_max_token_for_community_report",), cites="reports"))
register(QueryMode(
    name="naive", description="plain passage search by vector similarity",
    runner=f"{_OPERATORS}.query_naive:naive_query", retriever=f"{_OPERATORS}.query_naive:retrieve_naive",
    prompts=("naive_rag_response",), cited_prompts=("naive_rag_response_cited",),
    budgets=("naive_max_token_for_text_unit",), degraded={"vector": "local"}))
register(QueryMode(
    name="hybrid", description="passages ranked by a walk over entities and chunks, fused with vector search",
    runner=f"{_OPERATORS}.query_hybrid:hybrid_query", retriever=f"{_OPERATORS}.query_hybrid:retrieve_hybrid",
    # Hybrid's context has local's tables (entities, relations, sources), so local's prompts read it.
    prompts=("local_rag_response",), cited_prompts=("local_rag_response_cited",), budgets=TABLE_BUDGETS,
    degraded=_AROUND_A_STORE))
