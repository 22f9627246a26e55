"""LLM access: ``LLMClient`` wraps a model func with limits, cache, retries and usage counts;
``openai_model_func`` is the default model func, for any OpenAI-compatible server.

    retry.py             what is retried, how long to wait, context-overflow errors
    client.py            LLMClient, build_llm_clients, in_language
    usage.py             UsageCounter
    model_func.py        the model func signature and its Completion answer
    openai_transport.py  openai clients, TLS warm-up, openai_model_func, openai_embedding_func
    http_pool.py         JSONPool: the kept-alive connections non-streamed chat calls go over

Names are imported on first use, like ``graphrag``'s own, so importing this package is free.
"""
from __future__ import annotations

from graphrag.lazy import lazy_exports

_EXPORTS = {
    "LLMClient": "graphrag.llm.client",
    "build_llm_clients": "graphrag.llm.client",
    "in_language": "graphrag.llm.client",
    "UsageCounter": "graphrag.llm.usage",
    "Completion": "graphrag.llm.model_func",
    "ModelFunc": "graphrag.llm.model_func",
    "CONTEXT_OVERFLOW_HINT": "graphrag.llm.retry",
    "openai_clients": "graphrag.llm.openai_transport",
    "chat_pools": "graphrag.llm.openai_transport",
    "openai_model_func": "graphrag.llm.openai_transport",
    "openai_embedding_func": "graphrag.llm.openai_transport",
    "LLMError": "graphrag.errors",
    "ContextOverflowError": "graphrag.errors",
    "NoLLMConfiguredError": "graphrag.errors",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
