"""``LLMClient``: one model func plus the policy every pipeline call needs (bounded
concurrency by priority, a response cache, retries, per-stage usage counts)."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Optional

import xxhash

from graphrag.aio import PerLoop, PrioritySlots, per_loop_slots
from graphrag.errors import ConfigurationError, NoLLMConfiguredError
from graphrag.llm.model_func import ENGINE_KWARGS, ModelFunc
from graphrag.llm.openai_transport import chat_pools, openai_clients, openai_model_func
from graphrag.llm.retry import EMPTY_ANSWER_RETRIES, backoff_seconds, final_error, is_retryable
from graphrag.llm.usage import UsageCounter

if TYPE_CHECKING:
    from graphrag.config import GraphRAGConfig
    from graphrag.storage.base import BaseKVStorage

logger = logging.getLogger(__name__)

def _default_count_tokens(text: str) -> int:
    return len(text) // 4



class LLMClient:
    """One model func plus the policy every pipeline call needs: bounded concurrency,
    a response cache, retries with backoff, and per-stage usage counts."""

    def __init__(
        self,
        func: ModelFunc,
        *,
        model_id: str,
        max_async: int,
        usage: UsageCounter,
        cache: Optional[BaseKVStorage] = None,
        count_tokens: Callable[[str], int] = _default_count_tokens,
        max_retries: int = 6,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        shared_slots: "Optional[PerLoop[PrioritySlots]]" = None,
    ) -> None:
        """``shared_slots``: a pool of concurrency slots this client shares with others (one
        server serving several models); a call then holds one of its own and one shared."""
        if max_async <= 0:
            raise ConfigurationError(f"max_async must be positive, got {max_async!r}")
        self.func = func
        self.model_id = model_id
        self.max_async = max_async
        self.usage = usage
        self.cache = cache
        self.count_tokens = count_tokens
        # Gleaning re-sends the extraction prompt and answer as history: count each text once.
        self._token_counts: dict[str, int] = {}
        self.max_retries = max(0, max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._semaphores = per_loop_slots(max_async)
        self._shared_slots = shared_slots

    def warm_up(self) -> None:
        """Let the model func get ready in the background (an openai func builds its HTTP
        client), e.g. while documents are chunked; funcs without ``warm_up`` need nothing."""
        warm_up = getattr(self.func, "warm_up", None)
        if warm_up is not None:
            warm_up()

    async def aclose(self) -> None:
        """Close the model's HTTP connections for the running loop (sync wrappers' loops end)."""
        closer = getattr(self.func, "aclose", None)
        if closer is not None:
            await closer()

    @asynccontextmanager
    async def _slot(self, priority: int) -> AsyncIterator[None]:
        async with self._semaphores.get().slot(priority):
            if self._shared_slots is None:
                yield
            else:
                async with self._shared_slots.get().slot(priority):
                    yield

    def _count(self, text: str) -> int:
        """``count_tokens`` memoised over recent texts (usage stats only; tokenising is not free)."""
        n = self._token_counts.get(text)
        if n is None:
            if len(self._token_counts) >= 4096:
                self._token_counts.clear()
            n = self._token_counts[text] = self.count_tokens(text)
        return n

    def _prompt_tokens(self, prompt: str, system_prompt: Optional[str], history: list[dict]) -> int:
        tokens = self._count(prompt) + (self._count(system_prompt) if system_prompt else 0)
        return tokens + sum(self._count(str(m.get("content", ""))) for m in history)

    def cache_key(
        self,
        prompt: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict]] = None,
        **kwargs: Any,
    ) -> str:
        """Hash of everything that can change the answer, in a canonical order."""
        payload = {
            "model": self.model_id,
            "system_prompt": system_prompt,
            "history_messages": history_messages or [],
            "prompt": prompt,
            "kwargs": {k: v for k, v in kwargs.items() if k not in ENGINE_KWARGS},
        }
        canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
        return xxhash.xxh128_hexdigest(canon.encode("utf-8"))

    async def _look_up(self, stage: str, use_cache: bool, prompt: str, system_prompt: Optional[str],
                       history: list[dict], kwargs: dict[str, Any]) -> tuple[Optional[str], Optional[str]]:
        """``(cache key, cached answer)``; the key is None for a call the cache does not keep.
        Drops the engine's own keywords from ``kwargs`` (they never reach the model)."""
        for k in ENGINE_KWARGS:
            kwargs.pop(k, None)
        if not use_cache or self.cache is None:
            return None, None
        key = self.cache_key(prompt, system_prompt, history, **kwargs)
        hit = await self.cache.get_by_id(key)
        if hit is not None and hit.get("return"):
            self.usage.record(stage, cached=1)
            logger.debug("llm %s stage=%s cache hit %s", self.model_id, stage, key)
            return key, hit["return"]
        return key, None

    def _backoff(self, attempt: int, exc: Optional[BaseException]) -> float:
        return backoff_seconds(attempt, exc, self.backoff_base, self.backoff_max)

    async def __call__(
        self,
        prompt: str,
        *,
        stage: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict]] = None,
        use_cache: bool = True,
        priority: int = 0,
        **kwargs: Any,
    ) -> str:
        """``priority``: lower goes first when calls wait for a concurrency slot."""
        history = list(history_messages or [])
        key, cached = await self._look_up(stage, use_cache, prompt, system_prompt, history, kwargs)
        if cached is not None:
            return cached

        attempt = 0  # failed attempts so far (errors)
        empties = 0
        while True:
            t0 = time.perf_counter()
            try:
                async with self._slot(priority):
                    self.usage.record(stage, calls=1)
                    answer = await self.func(prompt, system_prompt=system_prompt,
                                             history_messages=list(history), **kwargs)
                # Let the call that just got our slot send its request before this one's
                # answer is parsed and acted on: otherwise the slot idles meanwhile.
                await asyncio.sleep(0)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError) or not isinstance(exc, Exception):
                    raise
                if isinstance(exc, NoLLMConfiguredError):
                    self.usage.record(stage, failures=1)
                    exc.stage = stage
                    raise
                attempt += 1
                if not is_retryable(exc) or attempt > self.max_retries:
                    self.usage.record(stage, failures=1)
                    logger.warning("llm %s stage=%s failed after %d attempt(s): %r",
                                   self.model_id, stage, attempt + empties, exc)
                    raise final_error(stage, exc, attempt + empties) from exc
                delay = self._backoff(attempt - 1, exc)
                self.usage.record(stage, retries=1)
                logger.info("llm %s stage=%s retry %d in %.2fs after %s: %s",
                            self.model_id, stage, attempt, delay, type(exc).__name__, exc)
                await asyncio.sleep(delay)
                continue

            answer = answer if isinstance(answer, str) else ("" if answer is None else str(answer))
            if not answer.strip() and empties < EMPTY_ANSWER_RETRIES:
                empties += 1
                self.usage.record(stage, retries=1)
                delay = self._backoff(empties - 1, None)
                logger.info("llm %s stage=%s empty answer, retry %d in %.2fs", self.model_id, stage, empties, delay)
                await asyncio.sleep(delay)
                continue
            break

        # Prefer the server's own counts; count with the engine's tokenizer otherwise.
        prompt_tokens = getattr(answer, "prompt_tokens", None)
        if prompt_tokens is None:
            prompt_tokens = self._prompt_tokens(prompt, system_prompt, history)
        completion_tokens = getattr(answer, "completion_tokens", None)
        if completion_tokens is None:
            completion_tokens = self._count(answer)
        answer = str(answer)
        self.usage.record(stage, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        logger.debug("llm %s stage=%s %.2fs prompt_tokens=%d completion_tokens=%d",
                     self.model_id, stage, time.perf_counter() - t0, prompt_tokens, completion_tokens)
        if key is not None and answer.strip():
            await self.cache.upsert({key: {"return": answer, "model": self.model_id}})
        return answer

    async def stream(
        self,
        prompt: str,
        *,
        stage: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict]] = None,
        use_cache: bool = True,
        priority: int = 0,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """The answer in pieces as the model writes them (a model func with a ``stream``
        attribute, e.g. :func:`openai_model_func`); a cached answer, or a func that cannot
        stream, comes as one piece. A call that fails before its first piece is retried like
        any call; once text went out, a failure is final."""
        history = list(history_messages or [])
        key, cached = await self._look_up(stage, use_cache, prompt, system_prompt, history, kwargs)
        if cached is not None:
            yield cached
            return
        streamer = getattr(self.func, "stream", None)
        if streamer is None:
            yield await self(prompt, stage=stage, system_prompt=system_prompt, history_messages=history,
                             use_cache=False, priority=priority, **kwargs)
            return
        pieces: list[str] = []
        try:
            async with self._slot(priority):
                self.usage.record(stage, calls=1)
                async for piece in streamer(prompt, system_prompt=system_prompt, history_messages=list(history),
                                            **kwargs):
                    if piece:
                        pieces.append(piece)
                        yield piece
        except Exception as exc:
            self.usage.record(stage, failures=1)
            if isinstance(exc, NoLLMConfiguredError):
                exc.stage = stage
                raise
            if pieces or not is_retryable(exc):
                raise final_error(stage, exc, 1) from exc
            logger.info("llm %s stage=%s stream failed before its first piece (%s); answering in one piece",
                        self.model_id, stage, exc)
            yield await self(prompt, stage=stage, system_prompt=system_prompt, history_messages=history,
                             use_cache=use_cache, priority=priority, **kwargs)
            return
        answer = "".join(pieces)
        self.usage.record(stage, prompt_tokens=self._prompt_tokens(prompt, system_prompt, history),
                          completion_tokens=self._count(answer))
        if key is not None and answer.strip():
            await self.cache.upsert({key: {"return": answer, "model": self.model_id}})


def in_language(llm: Callable[..., Awaitable[str]], language: Optional[str]) -> Callable[..., Awaitable[str]]:
    """``llm`` told, in its system prompt, to write in ``language``; ``llm`` itself when None
    (the prompts then ask for the language of their data)."""
    if not language:
        return llm
    line = f"Write your answer in {language}, keeping names as the data writes them."

    async def call(prompt: str, *, system_prompt: Optional[str] = None, **kwargs: Any) -> str:
        return await llm(prompt, system_prompt=f"{system_prompt}\n\n{line}" if system_prompt else line, **kwargs)

    return call


def build_llm_clients(
    config: GraphRAGConfig,
    usage: UsageCounter,
    cache: Optional[BaseKVStorage] = None,
    count_tokens: Callable[[str], int] = _default_count_tokens,
) -> tuple[LLMClient, LLMClient]:
    """(best, cheap) clients from a ``GraphRAGConfig``; user model funcs win over the OpenAI client."""
    if not getattr(config, "enable_llm_cache", True):
        cache = None

    total = getattr(config, "llm_max_async_total", None)
    shared = per_loop_slots(total) if total else None
    connections = openai_clients(config.llm_base_url, config.llm_api_key, config.llm_timeout)
    pools = chat_pools(config.llm_base_url, config.llm_api_key, config.llm_timeout)

    def make(func: Optional[ModelFunc], name: str, max_async: int) -> LLMClient:
        if func is None:
            func = openai_model_func(name, clients=connections, pools=pools)
            model_id = name
        else:
            model_id = getattr(func, "__name__", None) or "custom"
        return LLMClient(func, model_id=model_id, max_async=max_async, usage=usage, cache=cache,
                         count_tokens=count_tokens, max_retries=config.llm_max_retries, shared_slots=shared)

    best = make(config.best_model_func, config.best_model_name, config.best_model_max_async)
    cheap = make(config.cheap_model_func, config.cheap_model_name, config.cheap_model_max_async)
    return best, cheap
