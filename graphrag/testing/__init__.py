"""Test helpers shipped with the package: a local OpenAI-compatible mock server."""
from graphrag.testing.mock_llm_server import Fault, MockLLMServer, detect_kind, realistic_responder

__all__ = ["Fault", "MockLLMServer", "detect_kind", "realistic_responder"]
