"""Options of one query, with the same field names and defaults as nano-graphrag's ``QueryParam``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrag.errors import InvalidInputError
from graphrag.operators.modes import get_mode

# Fields that count tokens or items: none may be negative.
_NON_NEGATIVE_INT_FIELDS: tuple[str, ...] = (
    "level",
    "top_k",
    "naive_max_token_for_text_unit",
    "local_max_token_for_text_unit",
    "local_max_token_for_local_context",
    "local_max_token_for_community_report",
    "global_max_consider_community",
    "global_max_token_for_community_report",
)


@dataclass
class QueryParam:
    """How one question is answered.

    Token budgets are counted with the engine's tokenizer and cover a whole context
    section, its title line and table header included. A query cuts them further where the
    best model's window (``best_model_max_token_size``) leaves less room.
    """

    # One of the registered modes (``graphrag.operators.modes.MODES``).
    mode: str = "global"
    # Return the context the answer prompt would carry, making no LLM call at all.
    only_need_context: bool = False
    response_type: str = "Multiple Paragraphs"
    # Deepest community level used (0 is the coarsest).
    level: int = 2
    # How many entities (local) or chunks (naive) the vector search returns.
    top_k: int = 20

    # naive
    naive_max_token_for_text_unit: int = 12000

    # local
    local_max_token_for_text_unit: int = 4000
    # Shared by the entities and relationships tables: entities get at most half,
    # relationships get what entities left unused.
    local_max_token_for_local_context: int = 4800
    local_max_token_for_community_report: int = 3200
    local_community_single_one: bool = False

    # global
    global_min_community_rating: float = 0.0
    global_max_consider_community: int = 512
    # Each map group's table, and the reduce step's analyst reports, fit in this many tokens.
    global_max_token_for_community_report: int = 16384
    global_special_community_map_llm_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"response_format": {"type": "json_object"}}
    )

    # Hybrid's passages and local's Sources: among the first ``rerank_candidates`` (config), a
    # passage whose heading (a document's short first line) the question names goes first, in
    # the mode's order (operators/rerank.py: named_headings_first). Not in nano-graphrag.
    named_headings_first: bool = True

    # Answers with citations: the answer cites its sources as [n] and ``query()`` appends the
    # reference list (``aquery_result`` returns them as records). Not in nano-graphrag.
    with_references: bool = False

    # Earlier turns of a chat, oldest first, each {"role": "user" | "assistant", "content": text}
    # (LightRAG's name and shape). The answer model reads them before the question; the search
    # reads the question alone. Not in nano-graphrag.
    conversation_history: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        get_mode(self.mode)
        for name in _NON_NEGATIVE_INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInputError(f"{name} must be an integer, got {value!r}")
            if value < 0:
                raise InvalidInputError(f"{name} must be >= 0, got {value!r}")
        if not isinstance(self.named_headings_first, bool):
            raise InvalidInputError(f"named_headings_first must be true or false, got {self.named_headings_first!r}")
        rating = self.global_min_community_rating
        if isinstance(rating, bool) or not isinstance(rating, (int, float)):
            raise InvalidInputError(f"global_min_community_rating must be a number, got {rating!r}")
        if not isinstance(self.response_type, str) or not self.response_type.strip():
            raise InvalidInputError(f"response_type must be a non-empty string, got {self.response_type!r}")
        self.conversation_history = _checked_history(self.conversation_history)
        if not isinstance(self.global_special_community_map_llm_kwargs, dict):
            raise InvalidInputError(
                "global_special_community_map_llm_kwargs must be a dict, "
                f"got {type(self.global_special_community_map_llm_kwargs).__name__}"
            )


HISTORY_ROLES: tuple[str, ...] = ("user", "assistant")


def check_unicode(text: str, name: str) -> None:
    """Refuse ``text`` holding a lone surrogate (JSON's \\uXXXX escapes and Python strings can
    carry one): no model request can encode it, so the caller is told before any work."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} is not valid Unicode (a lone surrogate at character {exc.start})") from None


def _checked_history(history: object) -> list[dict[str, str]]:
    """The turns with their role and content only: other keys a client sends (names, tool
    calls) are not forwarded to the model."""
    if not isinstance(history, list):
        raise InvalidInputError(f"conversation_history must be a list of turns, got {type(history).__name__}")
    for i, turn in enumerate(history):
        if not (isinstance(turn, dict) and turn.get("role") in HISTORY_ROLES and isinstance(turn.get("content"), str)):
            raise InvalidInputError(f"conversation_history[{i}] must be {{'role': 'user' or 'assistant', "
                                    f"'content': text}}, got {repr(turn)[:80]}")
        check_unicode(turn["content"], f"conversation_history[{i}]")
    return [{"role": turn["role"], "content": turn["content"]} for turn in history]
