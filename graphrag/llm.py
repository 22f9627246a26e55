"""LLM access: OpenAI-compatible model funcs, and a client adding limits, cache, retries and usage.

``openai`` is imported lazily everywhere so that ``import graphrag.llm`` stays cheap and
LLM-free (``extraction="nlp"``) runs never pay for it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import heapq
import importlib
import itertools
import json
import logging
import os
import random
import re
import sys
import threading
import time
import weakref
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import xxhash

logger = logging.getLogger(__name__)

ModelFunc = Callable[..., Awaitable[str]]

STAGES = ("extraction", "gleaning", "summary", "report", "query")

# Keyword arguments that belong to us (or to nano-graphrag's own caching) and must never
# reach a model function or the cache key.
_OUR_KWARGS = frozenset({"hashing_kv", "stage", "use_cache", "priority"})

# Extra tries for an empty completion; models sometimes return nothing once.
_EMPTY_RETRIES = 2

_NO_LLM_MESSAGE = (
    "No LLM is configured. Set OPENAI_API_KEY (and OPENAI_BASE_URL for an OpenAI-compatible "
    "local server such as Ollama, vLLM or llama.cpp), or pass llm_api_key/llm_base_url, or pass "
    "best_model_func/cheap_model_func, or use extraction=\"nlp\" for LLM-free indexing."
)


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


class LLMError(RuntimeError):
    """An LLM call that failed for good; names the pipeline stage so users know what broke,
    and what to change when the server refused a prompt as too long."""

    def __init__(self, stage: str, cause: BaseException, attempts: int = 1) -> None:
        self.stage = stage
        self.cause = cause
        self.attempts = attempts
        hint = f" ({CONTEXT_OVERFLOW_HINT})" if _is_context_overflow(cause) else ""
        super().__init__(
            f"LLM call failed during {stage} after {attempts} attempt{'s' if attempts != 1 else ''}: "
            f"{type(cause).__name__}: {cause}{hint}"
        )


class NoLLMConfiguredError(LLMError):
    """Raised on the first call when no key, base URL or model function was given."""

    def __init__(self, stage: str = "setup", message: str = _NO_LLM_MESSAGE) -> None:
        RuntimeError.__init__(self, message)
        self.stage = stage
        self.cause = None  # type: ignore[assignment]
        self.attempts = 0


# --------------------------------------------------------------------------- usage


@dataclass
class _StageUsage:
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0


_USAGE_FIELDS = tuple(f.name for f in fields(_StageUsage))


class UsageCounter:
    """Per-stage call/token/retry counts, so runs can report what the LLM cost."""

    def __init__(self) -> None:
        self._stages: dict[str, _StageUsage] = {}

    def record(
        self,
        stage: str,
        *,
        calls: int = 0,
        cached: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        retries: int = 0,
        failures: int = 0,
    ) -> None:
        u = self._stages.setdefault(stage, _StageUsage())
        u.calls += calls
        u.cached += cached
        u.prompt_tokens += prompt_tokens
        u.completion_tokens += completion_tokens
        u.retries += retries
        u.failures += failures

    def snapshot(self) -> dict[str, dict[str, int]]:
        """A plain, JSON-able copy: ``{stage: {field: int}}``."""
        return {s: {f: getattr(u, f) for f in _USAGE_FIELDS} for s, u in self._stages.items()}

    def total(self) -> dict[str, int]:
        out = {f: 0 for f in _USAGE_FIELDS}
        for u in self._stages.values():
            for f in _USAGE_FIELDS:
                out[f] += getattr(u, f)
        return out

    def reset(self) -> None:
        self._stages.clear()

    def __repr__(self) -> str:
        return f"UsageCounter({self.snapshot()!r})"


# --------------------------------------------------------------------------- openai funcs


def _resolve_endpoint(base_url: Optional[str], api_key: Optional[str]) -> tuple[Optional[str], str]:
    """Explicit values first, then the env vars; a keyless local server gets a dummy key."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if not api_key:
        if not base_url:
            raise NoLLMConfiguredError()
        api_key = "sk-no-key-required"
    return base_url, api_key


class _PerLoop:
    """Keeps one object per running event loop: asyncio primitives and HTTP pools die with theirs."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._items: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        item = self._items.get(loop)
        if item is None:
            item = self._factory()
            self._items[loop] = item
        return item

    def pop(self) -> Any:
        """Forget (and return) the current loop's object, e.g. to close it before the loop ends."""
        return self._items.pop(asyncio.get_running_loop(), None)


class _BuiltInThread:
    """One object per running event loop, like ``_PerLoop``, for objects slow to build (an HTTP
    client: imports, a TLS context, openai's platform probe): built in a worker thread, so a
    warm-up overlaps the insert's own preparation and the event loop never stalls on a
    build. Callers that arrive while a build is under way share it; a failed build is not kept."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._items: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()
        self._building: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future]" = (
            weakref.WeakKeyDictionary())

    def _start(self) -> "asyncio.Future":
        loop = asyncio.get_running_loop()
        building = self._building.get(loop)
        if building is None:
            building = self._building[loop] = asyncio.ensure_future(asyncio.to_thread(self._factory))
            building.add_done_callback(lambda done: self._finish(loop, done))
        return building

    def _finish(self, loop: asyncio.AbstractEventLoop, done: "asyncio.Future") -> None:
        self._building.pop(loop, None)
        if not done.cancelled() and done.exception() is None:
            self._items.setdefault(loop, done.result())

    async def aget(self) -> Any:
        item = self._items.get(asyncio.get_running_loop())
        if item is None:
            # The build's own result: the loop's entry may be popped (closed) meanwhile, or not
            # stored yet (a build just done stores it in a callback still to run).
            item = await asyncio.shield(self._start())
        return item

    def pop(self) -> Any:
        """Forget (and return) the current loop's object, e.g. to close it before the loop ends."""
        return self._items.pop(asyncio.get_running_loop(), None)

    async def apop(self) -> Any:
        """``pop``, after any build under way for this loop has ended (so it is not left behind)."""
        building = self._building.get(asyncio.get_running_loop())
        if building is not None:
            await asyncio.gather(asyncio.shield(building), return_exceptions=True)
        return self.pop()

    def warm_up(self) -> None:
        """Start building the running loop's object now, unless it exists or is being built.
        A failure here is left for the first real use to raise."""
        if asyncio.get_running_loop() not in self._items:
            self._start()


class _PrioritySlots:
    """A semaphore whose waiters go lowest ``priority`` first (FIFO among equals).

    With a plain FIFO semaphore a task that becomes ready late (a parent community's
    report, once its children are done) queues behind everything already waiting,
    and the end of a run becomes a chain of half-idle rounds.
    """

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._order = itertools.count()

    @asynccontextmanager
    async def slot(self, priority: int = 0) -> AsyncIterator[None]:
        if self._free > 0 and not self._waiters:
            self._free -= 1
        else:
            granted = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiters, (priority, next(self._order), granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # handed a slot just as we were cancelled: pass it on
                granted.cancel()
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            _, _, granted = heapq.heappop(self._waiters)
            if not granted.done():
                granted.set_result(None)
                return
        self._free += 1


class Completion(str):
    """A model's answer, carrying the token counts the server reported (None if it did not)."""

    prompt_tokens: Optional[int]
    completion_tokens: Optional[int]

    def __new__(cls, text: str, prompt_tokens: Optional[int] = None, completion_tokens: Optional[int] = None
                ) -> "Completion":
        obj = super().__new__(cls, text)
        obj.prompt_tokens = prompt_tokens if isinstance(prompt_tokens, int) else None
        obj.completion_tokens = completion_tokens if isinstance(completion_tokens, int) else None
        return obj


# openai's per-request arguments, passed as request options rather than in the JSON body.
_REQUEST_OPTIONS = {"timeout": "timeout", "extra_headers": "headers", "extra_query": "params",
                    "extra_body": "extra_json"}


_TLS_LOCK = threading.Lock()
_TLS_CONTEXTS: "dict[tuple[Optional[str], Optional[str]], concurrent.futures.Future]" = {}


def shared_tls_context() -> "concurrent.futures.Future":
    """The default TLS context of openai's HTTP library, built once per process (per
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``), in a thread of its own.

    Loading the CA bundle takes ~40 ms, and every openai client paid it again: every sync
    ``insert`` or ``query`` runs its own event loop, so builds its own client. OpenSSL loads
    it without holding the GIL, so a first build also overlaps the client's imports.
    A failed build is not kept.
    """
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _TLS_LOCK:
        future = _TLS_CONTEXTS.get(key)
        if future is None or (future.done() and future.exception() is not None):
            future = _TLS_CONTEXTS[key] = concurrent.futures.Future()
            threading.Thread(target=_build_tls_context, args=(future,), name="graphrag-tls", daemon=True).start()
    return future


def _build_tls_context(future: "concurrent.futures.Future") -> None:
    try:
        import openai

        # httpx (openai 1.x, 2.x) or httpx2 (3.x): the library openai's default client is built on.
        library = next(module for module in (sys.modules.get(cls.__module__.split(".")[0])
                                             for cls in openai.DefaultAsyncHttpxClient.__mro__)
                       if hasattr(module, "create_ssl_context"))
        future.set_result(library.create_ssl_context())
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, which falls back
        future.set_exception(exc)


def _http_client(tls: "concurrent.futures.Future") -> Any:
    """openai's default async HTTP client on the shared TLS context; None (openai builds its
    own) if that context could not be made."""
    import openai

    try:
        return openai.DefaultAsyncHttpxClient(verify=tls.result())
    except Exception as exc:
        logger.debug("No shared TLS context (%r); the HTTP client builds its own", exc)
        return None


def openai_clients(base_url: Optional[str] = None, api_key: Optional[str] = None, timeout: float = 180.0
                   ) -> "_BuiltInThread":
    """OpenAI-compatible clients, built lazily (one per event loop), that model funcs for the
    same server can share: one connection pool, warm for whichever model asks next.

    ``max_retries=0``: ``LLMClient`` owns retries so that backoff, Retry-After and usage
    counts live in one place.
    """

    def _make_client() -> Any:
        import platform

        tls = shared_tls_context()
        # Two first-request costs, paid here instead (in the worker thread, while the TLS
        # context loads) and cached by Python for the process: openai probes the platform
        # for its headers (a subprocess, ``uname -p``), and httpcore's async I/O imports
        # anyio's asyncio backend.
        platform.platform()
        with contextlib.suppress(ImportError):
            importlib.import_module("anyio._backends._asyncio")
        import openai

        url, key = _resolve_endpoint(base_url, api_key)
        return openai.AsyncOpenAI(base_url=url, api_key=key, timeout=timeout, max_retries=0,
                                  http_client=_http_client(tls))

    return _BuiltInThread(_make_client)


def openai_model_func(
    model: str,
    *,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    timeout: float = 180.0,
    clients: Optional["_BuiltInThread"] = None,
) -> ModelFunc:
    """A nano-graphrag style model func over any OpenAI-compatible chat endpoint.

    ``clients`` (from :func:`openai_clients`) shares one connection pool with other model
    funcs for the same server; by default the func has its own.
    """
    clients = clients or openai_clients(base_url, api_key, timeout)

    async def model_func(
        prompt: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict]] = None,
        **kwargs: Any,
    ) -> str:
        client = await clients.aget()
        messages: list[dict] = []
        if system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        messages.extend(history_messages or [])
        messages.append({"role": "user", "content": prompt})
        for k in _OUR_KWARGS:
            kwargs.pop(k, None)
        options = {option: kwargs.pop(arg) for arg, option in _REQUEST_OPTIONS.items() if arg in kwargs}
        # The low-level post skips the SDK's per-call typed transform of the request and
        # model construction of the reply: about a third of its CPU cost per call.
        resp = await client.post("/chat/completions", body={"model": model, "messages": messages, **kwargs},
                                 cast_to=object, options=options)
        choices = resp.get("choices") or [] if isinstance(resp, dict) else []
        content = ((choices[0].get("message") or {}).get("content") or "") if choices else ""
        usage = resp.get("usage") or {} if isinstance(resp, dict) else {}
        return Completion(content, usage.get("prompt_tokens"), usage.get("completion_tokens"))

    async def aclose() -> None:
        client = await clients.apop()
        if client is not None:
            await client.close()

    model_func.__name__ = model
    model_func.__qualname__ = f"openai_model_func({model})"
    model_func.aclose = aclose  # type: ignore[attr-defined]
    model_func.warm_up = clients.warm_up  # type: ignore[attr-defined]
    return model_func


def openai_embedding_func(
    model: str = "text-embedding-3-small",
    embedding_dim: int = 1536,
    max_token_size: int = 8191,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
) -> Any:
    """An ``EmbeddingFunc`` over an OpenAI-compatible ``/embeddings`` endpoint.

    Embeddings are not wrapped by ``LLMClient``, so the openai client's own retries are kept.
    """
    import numpy as np

    from graphrag.embedding import EmbeddingFunc

    def _make_client() -> Any:
        tls = shared_tls_context()
        import openai

        url, key = _resolve_endpoint(base_url, api_key)
        return openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=4, http_client=_http_client(tls))

    clients = _BuiltInThread(_make_client)

    async def _embed(texts: list[str]) -> "np.ndarray":
        if not texts:
            return np.zeros((0, embedding_dim), dtype=np.float32)
        client = await clients.aget()
        resp = await client.embeddings.create(model=model, input=list(texts), encoding_format="float")
        data = sorted(resp.data, key=lambda d: d.index)
        return np.asarray([d.embedding for d in data], dtype=np.float32)

    return EmbeddingFunc(embedding_dim=embedding_dim, max_token_size=max_token_size, func=_embed)


# --------------------------------------------------------------------------- retry policy


def _is_context_overflow(exc: BaseException) -> bool:
    return _CONTEXT_OVERFLOW.search(str(exc)) is not None


def _is_retryable(exc: BaseException) -> bool:
    # A prompt too long for the model fails the same way every time, whatever the status.
    if isinstance(exc, NoLLMConfiguredError) or _is_context_overflow(exc):
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


def _retry_after_seconds(exc: BaseException) -> Optional[float]:
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


def _default_count_tokens(text: str) -> int:
    return len(text) // 4


# --------------------------------------------------------------------------- client


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
        cache: Any = None,
        count_tokens: Callable[[str], int] = _default_count_tokens,
        max_retries: int = 6,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        shared_slots: Optional["_PerLoop"] = None,
    ) -> None:
        """``shared_slots``: a pool of concurrency slots this client shares with others (one
        server serving several models); a call then holds one of its own and one shared."""
        if max_async <= 0:
            raise ValueError("max_async must be positive")
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
        self._semaphores = _PerLoop(lambda: _PrioritySlots(self.max_async))
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
            "kwargs": {k: v for k, v in kwargs.items() if k not in _OUR_KWARGS},
        }
        canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
        return xxhash.xxh128_hexdigest(canon.encode("utf-8"))

    def _backoff(self, attempt: int, exc: Optional[BaseException]) -> float:
        retry_after = _retry_after_seconds(exc) if exc is not None else None
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        return random.uniform(0.0, min(self.backoff_max, self.backoff_base * (2 ** attempt)))

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
        for k in _OUR_KWARGS:
            kwargs.pop(k, None)
        history = list(history_messages or [])
        key: Optional[str] = None
        if use_cache and self.cache is not None:
            key = self.cache_key(prompt, system_prompt, history, **kwargs)
            hit = await self.cache.get_by_id(key)
            if hit is not None and hit.get("return"):
                self.usage.record(stage, cached=1)
                logger.debug("llm %s stage=%s cache hit %s", self.model_id, stage, key)
                return hit["return"]

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
                if not _is_retryable(exc) or attempt > self.max_retries:
                    self.usage.record(stage, failures=1)
                    logger.warning("llm %s stage=%s failed after %d attempt(s): %r",
                                   self.model_id, stage, attempt + empties, exc)
                    raise LLMError(stage, exc, attempt + empties) from exc
                delay = self._backoff(attempt - 1, exc)
                self.usage.record(stage, retries=1)
                logger.info("llm %s stage=%s retry %d in %.2fs after %s: %s",
                            self.model_id, stage, attempt, delay, type(exc).__name__, exc)
                await asyncio.sleep(delay)
                continue

            answer = answer if isinstance(answer, str) else ("" if answer is None else str(answer))
            if not answer.strip() and empties < _EMPTY_RETRIES:
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
            prompt_tokens = self._count(prompt) + (self._count(system_prompt) if system_prompt else 0)
            prompt_tokens += sum(self._count(str(m.get("content", ""))) for m in history)
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


def build_llm_clients(
    config: Any,
    usage: UsageCounter,
    cache: Any = None,
    count_tokens: Callable[[str], int] = _default_count_tokens,
) -> tuple[LLMClient, LLMClient]:
    """(best, cheap) clients from a ``GraphRAGConfig``; user model funcs win over the OpenAI client."""
    if not getattr(config, "enable_llm_cache", True):
        cache = None

    total = getattr(config, "llm_max_async_total", None)
    shared = _PerLoop(lambda: _PrioritySlots(total)) if total else None
    connections = openai_clients(config.llm_base_url, config.llm_api_key, config.llm_timeout)

    def make(func: Optional[ModelFunc], name: str, max_async: int) -> LLMClient:
        if func is None:
            func = openai_model_func(name, clients=connections)
            model_id = name
        else:
            model_id = getattr(func, "__name__", None) or "custom"
        return LLMClient(func, model_id=model_id, max_async=max_async, usage=usage, cache=cache,
                         count_tokens=count_tokens, max_retries=config.llm_max_retries, shared_slots=shared)

    best = make(config.best_model_func, config.best_model_name, config.best_model_max_async)
    cheap = make(config.cheap_model_func, config.cheap_model_name, config.cheap_model_max_async)
    return best, cheap
