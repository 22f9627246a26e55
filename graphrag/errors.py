"""Every error the engine raises on purpose, in one hierarchy.

Catch :class:`GraphRAGError` for all of them. Each class also derives from the built-in
exception it replaces (``ValueError``, ``KeyError``, ``TimeoutError``, ``RuntimeError``), so
code written against earlier versions, or against nano-graphrag, keeps catching them.
"""
from __future__ import annotations

from typing import Sequence


class GraphRAGError(Exception):
    """Base of the engine's own errors."""


class ConfigurationError(GraphRAGError, ValueError):
    """An option, or a combination of options, the engine cannot work with."""


class InvalidInputError(GraphRAGError, ValueError):
    """A document, question or argument that cannot be used as given."""


class ContextWindowError(ConfigurationError):
    """A model window (``best_model_max_token_size``, ``cheap_model_max_token_size``) too small
    for a prompt, found before any call is paid for."""


class EmbeddingFuncError(ConfigurationError, TypeError):
    """An ``embedding_func`` the stores cannot use: not callable, or without ``embedding_dim``
    and ``max_token_size``. Also a ``TypeError``, which it was before."""


class EmbeddingSchemeError(ConfigurationError):
    """The index's vectors were made by another embedding model, or its chunk vectors with the other
    ``local_embedding(long_texts=...)``."""


class LLMError(GraphRAGError, RuntimeError):
    """An LLM call that failed for good; names the pipeline stage so users know what broke."""

    def __init__(self, stage: str, cause: BaseException, attempts: int = 1, hint: str = "") -> None:
        self.stage = stage
        self.cause = cause
        self.attempts = attempts
        super().__init__(
            f"LLM call failed during {stage} after {attempts} attempt{'s' if attempts != 1 else ''}: "
            f"{type(cause).__name__}: {cause}{f' ({hint})' if hint else ''}"
        )


class ContextOverflowError(LLMError):
    """The server refused a prompt as longer than the model's context window."""


class NoLLMConfiguredError(LLMError):
    """Raised on the first call when no key, base URL or model function was given."""

    def __init__(self, message: str) -> None:
        GraphRAGError.__init__(self, message)
        self.stage, self.cause, self.attempts = "setup", None, 0


class StorageError(GraphRAGError):
    """A store that cannot be read, written or reached."""


class StoreUnavailableError(StorageError, ConnectionError):
    """A store's server cannot be reached. ``store`` says which kind: "kv", "vector" or "graph".
    A query answers from the stores still up (with a warning); a write refuses, unwritten."""

    def __init__(self, message: str, *, store: str) -> None:
        super().__init__(message)
        self.store = store


class WorkingDirLockedError(StorageError, TimeoutError):
    """Another process held the working dir's writer lock for longer than ``lock_timeout``."""


class _NotFound(GraphRAGError, KeyError):
    """``str()`` shows the message, not ``KeyError``'s quoted repr."""

    def __init__(self, message: str, missing: Sequence[str] = (), suggestions: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing = list(missing)
        self.suggestions = list(suggestions)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DocumentNotFound(_NotFound):
    """A document id that is not indexed."""


class WorkspaceNotFound(_NotFound):
    """A workspace name no write created (the server's ``X-Workspace`` header)."""


class EntityNotFound(_NotFound):
    """An entity name that is in no node; ``suggestions`` holds close matches."""



# --- reading files (graphrag.readers) ---


class MissingExtraError(ConfigurationError):
    """A file type whose reader needs an optional package that is not installed; the message
    names the extra that installs it."""


class UnreadableFileError(InvalidInputError):
    """A file that cannot be read as a document (corrupt, encrypted, image-only, binary,
    empty, too big); a folder insert reports it with this message and goes on."""


class LabelledQuestionsError(InvalidInputError):
    """A labelled-questions file (``graphrag eval``) with a line that is not a question with
    gold sources or gold passages."""
