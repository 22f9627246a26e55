"""The engine's errors as HTTP answers: one table of statuses, one JSON shape.

A client reads ``{"error": <class name>, "message": <text>}``; never a traceback, and never
a secret (``graphrag/redaction.py`` masks keys, tokens and passwords in messages).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from graphrag.errors import (
    ConfigurationError,
    ContextOverflowError,
    DocumentNotFound,
    EntityNotFound,
    GraphRAGError,
    InvalidInputError,
    LLMError,
    NoLLMConfiguredError,
    StorageError,
    StoreUnavailableError,
    WorkingDirLockedError,
    WorkspaceNotFound,
)
from graphrag.redaction import redact

# The most specific class of an error decides its status; anything else is a 500.
HTTP_STATUS: dict[type[BaseException], int] = {
    InvalidInputError: 400,
    ConfigurationError: 400,  # an option this index cannot work with (a window too small included)
    ContextOverflowError: 400,  # the question and its context are more than the model takes
    DocumentNotFound: 404,
    EntityNotFound: 404,
    WorkspaceNotFound: 404,
    NoLLMConfiguredError: 503,
    LLMError: 502,  # the model's server failed after the retries
    WorkingDirLockedError: 503,
    StoreUnavailableError: 503,  # a database server down: try again later
    StorageError: 500,
    GraphRAGError: 500,
}

INTERNAL_MESSAGE = "internal error (the server's log has the details)"
# Messages quote what the client sent (ids, names, model names): a client sending kilobytes
# does not get them all back.
MAX_MESSAGE_CHARS = 1000


def http_status(exc: BaseException) -> int:
    return next((HTTP_STATUS[cls] for cls in type(exc).__mro__ if cls in HTTP_STATUS), 500)


def error_body(exc: BaseException) -> dict[str, Any]:
    """What a client is told of ``exc``: its class and message for the engine's own errors;
    only that it failed for anything else (a bug's message may hold anything)."""
    if not isinstance(exc, GraphRAGError):
        return {"error": "InternalError", "message": INTERNAL_MESSAGE}
    body = {"error": type(exc).__name__, "message": capped(redact(str(exc)))}
    suggestions = getattr(exc, "suggestions", None)
    if suggestions:
        body["suggestions"] = list(suggestions)
    return body


def capped(message: str) -> str:
    """``message`` cut to ``MAX_MESSAGE_CHARS``, saying how much was left out."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}... ({len(message) - MAX_MESSAGE_CHARS} more characters)"


def validation_message(errors: Iterable[Mapping[str, Any]]) -> str:
    """Pydantic's validation errors as one line: each field's path and what is wrong with it."""
    return "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors)
