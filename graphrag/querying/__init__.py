"""Answering questions: the query, answer and retrieve policy behind ``GraphRAG``'s query methods.

``GraphRAG`` hands a :class:`~graphrag.querying.engine.QueryEngine` what a query reads (its
config, stores, tokenizer, model windows, best model and document lookup) and delegates
``aquery``, ``aquery_stream``, ``aquery_result_stream``, ``aquery_result`` and ``aretrieve``
to it. The modes themselves are registered in ``graphrag/operators/modes.py``; ``degraded.py``
answers around a store that is down, ``streaming.py`` streams the final answer, cited or not.
"""
from __future__ import annotations

from graphrag.querying.engine import EMPTY_INDEX_MESSAGE, NO_LLM_NOTE, QueryEngine

__all__ = ["EMPTY_INDEX_MESSAGE", "NO_LLM_NOTE", "QueryEngine"]
