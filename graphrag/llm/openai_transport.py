"""OpenAI-compatible servers: model and embedding funcs over the ``openai`` client, and the
start-up work (TLS context, client build) moved off the first request's path.

``openai`` is imported inside functions only, so importing this module stays cheap and
LLM-free (``extraction="nlp"``) runs never pay for it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import os
import threading
import urllib.parse
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional, Union

from graphrag.aio import PerLoop, PerLoopBuiltInThread
from graphrag.errors import NoLLMConfiguredError
from graphrag.llm.http_pool import JSONPool, default_headers, http_library, proxy_for
from graphrag.llm.model_func import ENGINE_KWARGS, Completion, ModelFunc

if TYPE_CHECKING:
    import ssl

    import openai

    from graphrag.embedding_func import EmbeddingFunc

logger = logging.getLogger(__name__)

_NO_LLM_MESSAGE = (
    "No LLM is configured. Set OPENAI_API_KEY (and OPENAI_BASE_URL for an OpenAI-compatible "
    "local server such as Ollama, vLLM or llama.cpp), or pass llm_api_key/llm_base_url, or pass "
    "best_model_func/cheap_model_func, or use extraction=\"nlp\" for LLM-free indexing."
)


def _resolve_endpoint(base_url: Optional[str], api_key: Optional[str]) -> tuple[Optional[str], str]:
    """Explicit values first, then the env vars; a keyless local server gets a dummy key."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if not api_key:
        if not base_url:
            raise NoLLMConfiguredError(_NO_LLM_MESSAGE)
        api_key = "sk-no-key-required"
    return base_url, api_key



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
        future.set_result(http_library().create_ssl_context())
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, which falls back
        future.set_exception(exc)


def _http_client(tls: "concurrent.futures.Future") -> Optional[openai.DefaultAsyncHttpxClient]:
    """openai's default async HTTP client on the shared TLS context; None (openai builds its
    own) if that context could not be made."""
    import openai

    try:
        return openai.DefaultAsyncHttpxClient(verify=tls.result())
    except Exception as exc:
        logger.debug("No shared TLS context (%r); the HTTP client builds its own", exc)
        return None


def openai_clients(base_url: Optional[str] = None, api_key: Optional[str] = None, timeout: float = 180.0,
                   max_retries: int = 0) -> "PerLoopBuiltInThread":
    """OpenAI-compatible clients, built lazily (one per event loop), that model funcs for the
    same server can share: one connection pool, warm for whichever model asks next.

    ``max_retries=0`` by default: ``LLMClient`` owns retries so that backoff, Retry-After and
    usage counts live in one place.
    """

    def _make_client() -> openai.AsyncOpenAI:
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
        return openai.AsyncOpenAI(base_url=url, api_key=key, timeout=timeout, max_retries=max_retries,
                                  http_client=_http_client(tls))

    return PerLoopBuiltInThread(_make_client)


# The base URL openai's client uses when none is configured.
_OPENAI_BASE_URL = "https://api.openai.com/v1"
# What the per-loop pool holds where requests must go through the SDK (a proxy is set).
_VIA_SDK = False


def chat_pools(base_url: Optional[str] = None, api_key: Optional[str] = None,
               timeout: float = 180.0) -> PerLoop[Union[JSONPool, bool]]:
    """Per event loop, the kept-alive connections that non-streamed chat calls to the server
    go over (``http_pool.JSONPool``, the SDK's request and response machinery skipped), or
    ``_VIA_SDK`` where the environment sets a proxy for the server. Model funcs for the same
    server share them, as they share :func:`openai_clients`."""

    def make() -> "Union[JSONPool, bool]":
        url, key = _resolve_endpoint(base_url, api_key)
        url = url or _OPENAI_BASE_URL
        if proxy_for(url) is not None or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            return _VIA_SDK

        async def tls() -> Union[ssl.SSLContext, bool]:
            try:
                return await asyncio.wrap_future(shared_tls_context())
            except Exception as exc:
                logger.debug("No shared TLS context (%r); Python's default one is used", exc)
                return True

        return JSONPool(url, default_headers(key), timeout, tls=tls)

    return PerLoop(make)


def _chat_request(model: str, prompt: str, system_prompt: Optional[str], history_messages: Optional[list[dict]],
                  kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chat request's JSON body, and its per-request options, for one call."""
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.extend(history_messages or [])
    messages.append({"role": "user", "content": prompt})
    kwargs = {k: v for k, v in kwargs.items() if k not in ENGINE_KWARGS}
    options = {option: kwargs.pop(arg) for arg, option in _REQUEST_OPTIONS.items() if arg in kwargs}
    return {"model": model, "messages": messages, **kwargs}, options


def _pool_takes(options: dict[str, Any]) -> bool:
    """Whether a call's per-request options are ones ``JSONPool.post`` honours (a number of
    seconds, plain headers, more body); others (query parameters, an httpx ``Timeout``) go
    through the SDK."""
    timeout, headers, extra = options.get("timeout"), options.get("headers"), options.get("extra_json")
    return (options.keys() <= {"timeout", "headers", "extra_json"}
            and (timeout is None or isinstance(timeout, (int, float)))
            and (headers is None or (isinstance(headers, dict)
                                     and all(isinstance(v, str) for v in headers.values())))
            and (extra is None or isinstance(extra, dict)))


def openai_model_func(
    model: str,
    *,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    timeout: float = 180.0,
    clients: Optional["PerLoopBuiltInThread"] = None,
    pools: Optional[PerLoop[Union[JSONPool, bool]]] = None,
) -> ModelFunc:
    """A nano-graphrag style model func over any OpenAI-compatible chat endpoint.

    ``clients`` (from :func:`openai_clients`, for streamed calls) and ``pools`` (from
    :func:`chat_pools`, for the others) share connections with other model funcs for the
    same server; by default the func has its own.
    """
    clients = clients or openai_clients(base_url, api_key, timeout)
    pools = pools or chat_pools(base_url, api_key, timeout)

    async def model_func(
        prompt: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict]] = None,
        **kwargs: Any,
    ) -> str:
        body, options = _chat_request(model, prompt, system_prompt, history_messages, kwargs)
        pool = pools.get()
        if isinstance(pool, JSONPool) and _pool_takes(options):
            resp = await pool.post("/chat/completions", {**body, **(options.get("extra_json") or {})},
                                   timeout=options.get("timeout"), headers=options.get("headers"))
        else:
            client = await clients.aget()
            # The low-level post skips the SDK's per-call typed transform of the request and
            # model construction of the reply: about a third of its CPU cost per call.
            resp = await client.post("/chat/completions", body=body, cast_to=object, options=options)
        choices = resp.get("choices") or [] if isinstance(resp, dict) else []
        content = ((choices[0].get("message") or {}).get("content") or "") if choices else ""
        usage = resp.get("usage") or {} if isinstance(resp, dict) else {}
        return Completion(content, usage.get("prompt_tokens"), usage.get("completion_tokens"))

    async def stream(
        prompt: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict]] = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """The answer's text as the server streams it (server-sent events)."""
        import openai

        client = await clients.aget()
        body, options = _chat_request(model, prompt, system_prompt, history_messages, kwargs)
        chunks = await client.post("/chat/completions", body={**body, "stream": True}, cast_to=object,
                                   options=options, stream=True, stream_cls=openai.AsyncStream[object])
        async with chunks:
            async for chunk in chunks:
                choices = chunk.get("choices") or [] if isinstance(chunk, dict) else []
                text = ((choices[0].get("delta") or {}).get("content") or "") if choices else ""
                if text:
                    yield text

    def warm_up() -> None:
        """Start what the first call waits for: the TLS context of an https server, or the
        SDK's client where calls go through it. A failure is left for that call to raise."""
        try:
            pool = pools.get()
        except NoLLMConfiguredError:
            return
        if not isinstance(pool, JSONPool):
            clients.warm_up()
        elif pool.base_url.startswith("https:"):
            shared_tls_context()

    async def aclose() -> None:
        pool = pools.pop()
        if isinstance(pool, JSONPool):
            await pool.aclose()
        client = await clients.apop()
        if client is not None:
            await client.close()

    model_func.__name__ = model
    model_func.__qualname__ = f"openai_model_func({model})"
    model_func.aclose = aclose  # type: ignore[attr-defined]
    model_func.stream = stream  # type: ignore[attr-defined]
    model_func.warm_up = warm_up  # type: ignore[attr-defined]
    return model_func


def openai_embedding_func(
    model: str = "text-embedding-3-small",
    embedding_dim: int = 1536,
    max_token_size: int = 8191,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    batch_size: int = 64,
    max_retries: int = 4,
    timeout: float = 600.0,
    max_async: Optional[int] = None,
) -> EmbeddingFunc:
    """An ``EmbeddingFunc`` over an OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama,
    vLLM, TEI, llama.cpp ``--embedding``...): at most ``batch_size`` texts a request, at most
    ``max_async`` requests in flight (the engine's ``embedding_func_max_async`` when None).

    Embeddings are not wrapped by ``LLMClient``, so the openai client's own retries (with
    backoff, honouring Retry-After) are kept. A server answering with vectors of another
    dimension than ``embedding_dim`` is refused: stores of mixed dimensions cannot be searched.
    """
    import numpy as np

    from graphrag.embedding_func import EmbeddingFunc
    from graphrag.errors import EmbeddingFuncError

    clients = openai_clients(base_url, api_key, timeout=timeout, max_retries=max_retries)

    async def _embed(texts: list[str]) -> "np.ndarray":
        if not texts:
            return np.zeros((0, embedding_dim), dtype=np.float32)
        client = await clients.aget()
        rows: list[list[float]] = []
        for start in range(0, len(texts), max(1, batch_size)):
            batch = list(texts[start:start + max(1, batch_size)])
            resp = await client.embeddings.create(model=model, input=batch, encoding_format="float")
            rows.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        vectors = np.asarray(rows, dtype=np.float32)
        if vectors.shape != (len(texts), embedding_dim):
            raise EmbeddingFuncError(f"the embedding server answered {vectors.shape[0]} vectors of "
                                     f"{vectors.shape[-1] if vectors.ndim == 2 else '?'} dimensions for {len(texts)} "
                                     f"texts; embedding_dim is {embedding_dim} (set it to the model's dimension)")
        return vectors

    return EmbeddingFunc(embedding_dim=embedding_dim, max_token_size=max_token_size, func=_embed, max_async=max_async,
                         name=f"openai-compatible:{model}")
