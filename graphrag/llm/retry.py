"""When an LLM call is worth trying again, how long to wait, and how a final failure reads."""
from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from typing import Optional

from graphrag.errors import ContextOverflowError, LLMError, NoLLMConfiguredError

# Extra tries for an empty completion; models sometimes return nothing once.
EMPTY_ANSWER_RETRIES = 2

# How servers word a prompt longer than the model's window: OpenAI and vLLM ("maximum context
# length", code context_length_exceeded), llama.cpp ("exceeds the available context size",
# sometimes as a 500), llama-cpp-python ("exceed context window"), Anthropic ("prompt is too long").
_CONTEXT_OVERFLOW = re.compile(r"context[ _]length|context window|context size|maximum context|"
                               r"prompt is too long|too many tokens", re.I)

CONTEXT_OVERFLOW_HINT = (
    "the prompt is longer than the model's context window: set best_model_max_token_size and "
    "cheap_model_max_token_size to the models' windows (prompts are then cut to fit), and lower "
    "chunk_token_size if extraction prompts still overflow"
)


def is_context_overflow(exc: BaseException) -> bool:
    return _CONTEXT_OVERFLOW.search(str(exc)) is not None


def is_retryable(exc: BaseException) -> bool:
    # A prompt too long for the model fails the same way every time, whatever the status.
    if isinstance(exc, NoLLMConfiguredError) or is_context_overflow(exc):
        return False
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a hard dependency
        return False
    if isinstance(exc, (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError,
                        openai.InternalServerError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return status >= 500 or status in (408, 409, 429)
    return False


def retry_after_seconds(exc: BaseException) -> Optional[float]:
    """Seconds the server asked us to wait (``Retry-After``/``retry-after-ms``), if it said."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:  # odd header containers: just fall back to backoff
        return None
    if value is None:
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_seconds(attempt: int, exc: Optional[BaseException], base: float, maximum: float) -> float:
    """The server's Retry-After when it gave one, else full-jitter exponential backoff
    (``attempt`` counts from 0), never more than ``maximum``."""
    retry_after = retry_after_seconds(exc) if exc is not None else None
    if retry_after is not None:
        return min(retry_after, maximum)
    return random.uniform(0.0, min(maximum, base * (2 ** attempt)))


def final_error(stage: str, exc: BaseException, attempts: int) -> LLMError:
    """The error a call that failed for good raises: a refused over-long prompt says which
    options fit prompts to the model's window."""
    if is_context_overflow(exc):
        return ContextOverflowError(stage, exc, attempts, hint=CONTEXT_OVERFLOW_HINT)
    return LLMError(stage, exc, attempts)
