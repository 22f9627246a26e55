"""What every ``graphrag`` command shares (``cli.py``'s and ``cli_graph.py``'s): exit codes,
the user-facing error, and opening the engine on a working dir."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional

from graphrag.errors import GraphRAGError

if TYPE_CHECKING:
    from graphrag.embedding_func import EmbeddingFunc
    from graphrag.graphrag import GraphRAG

EXIT_OK = 0
EXIT_FAILED = 1  # nothing to index, unknown document id, unusable working dir files
EXIT_USAGE = 2  # bad arguments or options, a path or working dir that does not exist
EXIT_LLM = 3  # no LLM configured (without --offline), or an LLM call failed for good
EXIT_EXTRACTION_FAILED = 4  # the model's answers held no record for any chunk of the insert

EMBEDDING_ENV = "GRAPHRAG_EMBEDDING"


class CLIError(GraphRAGError):
    """A user-facing failure: one line on stderr and an exit code, never a traceback."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def cli_embedding_func() -> Optional[EmbeddingFunc]:
    choice = os.environ.get(EMBEDDING_ENV, "local").strip().lower() or "local"
    from graphrag.embedding import hash_embedding

    if choice == "hash":
        return hash_embedding(384)  # the local model's dimension, so working dirs stay compatible
    if choice == "local":
        return None  # the config's (flags, GRAPHRAG_EMBEDDING_* variables), else the bundled model
    raise CLIError(f"{EMBEDDING_ENV} must be 'local' or 'hash', not {choice!r}", EXIT_USAGE)


def existing_working_dir(path: str) -> str:
    if not os.path.isdir(path):
        raise CLIError(f"working dir {path!r} does not exist (build one with `graphrag index PATH "
                       f"--working-dir {path}`)", EXIT_USAGE)
    return path


def open_rag(working_dir: str, offline: bool, create: bool = False, **config: Any) -> GraphRAG:
    from graphrag.graphrag import GraphRAG

    return GraphRAG(working_dir=working_dir, always_create_working_dir=create,
                    extraction="nlp" if offline else "llm", embedding_func=cli_embedding_func(), **config)
