"""What a model function is: the nano-graphrag signature, and the answer it may return."""
from __future__ import annotations

from typing import Awaitable, Callable, Optional

# (prompt, system_prompt=None, history_messages=[], **kwargs) -> str, as in nano-graphrag.
ModelFunc = Callable[..., Awaitable[str]]

# Keyword arguments that belong to the engine (or to nano-graphrag's own caching) and must
# never reach a model's server or the cache key.
ENGINE_KWARGS = frozenset({"hashing_kv", "stage", "use_cache", "priority"})


class Completion(str):
    """A model's answer, carrying the token counts the server reported (None if it did not),
    so usage counts need not re-tokenise it."""

    prompt_tokens: Optional[int]
    completion_tokens: Optional[int]

    def __new__(cls, text: str, prompt_tokens: Optional[int] = None, completion_tokens: Optional[int] = None
                ) -> "Completion":
        obj = super().__new__(cls, text)
        obj.prompt_tokens = prompt_tokens if isinstance(prompt_tokens, int) else None
        obj.completion_tokens = completion_tokens if isinstance(completion_tokens, int) else None
        return obj
