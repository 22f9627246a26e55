"""Test helpers shipped with the package: a local OpenAI-compatible mock server.

Names are resolved lazily so ``python -m graphrag.testing.mock_llm_server`` runs cleanly.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Fault", "MockLLMServer", "detect_kind", "realistic_responder"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from graphrag.testing import mock_llm_server

        return getattr(mock_llm_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
