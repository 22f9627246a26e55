"""JSON over kept-alive HTTP/1.1 connections to one OpenAI-compatible server, for the calls
the engine makes by the thousand (an insert's chat completions).

The openai SDK spends, per request, more CPU than the engine's own work on it: typed request
options, URL and header merging, httpx's request and response models, and httpcore's pool,
which probes each idle connection on every request (numbers in benchmarks/README.md). Here a
request is one ``write`` of bytes built from a fixed head, and an answer one read of the head
and one of the body. What the SDK's callers rely on is kept: failures are raised as openai's
own exception classes (``openai.RateLimitError`` with the response's ``Retry-After``,
``openai.APITimeoutError``...), so ``retry.py`` and error messages treat both paths alike;
the key goes in the ``Authorization`` header only, never into an error. Streaming, proxies
and per-request query parameters stay on the SDK (``openai_transport.py`` decides).

Connections belong to one event loop (asyncio streams cannot move between loops): the pool
is held per loop and closed by ``aclose()``; a pool dropped with its loop unclosed just lets
its sockets go, as the SDK's does.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.parse
import urllib.request
import zlib
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, TypeVar, Union

if TYPE_CHECKING:
    import ssl
    from types import ModuleType

    from graphrag.schema import JSONValue

T = TypeVar("T")

# Idle connections kept per pool, and how long one may idle before it is closed rather than
# reused (servers close idle keep-alive connections, and a request sent on one as it closes
# is lost): the figures of openai's default HTTP client.
MAX_IDLE = 100
IDLE_EXPIRY_S = 5.0
_MAX_HEAD_BYTES = 64 * 1024
# How long closing waits for connections to finish closing before it drops them.
CLOSE_WAIT_S = 2.0


def proxy_for(url: str) -> Optional[str]:
    """The proxy the environment (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``...) sets for
    ``url``, which httpx would use and this pool does not speak; None to go direct."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxy


async def _within(seconds: Optional[float], work: Awaitable[T]) -> T:
    """``work`` under a deadline (``TimeoutError`` past it); Python 3.10 has no ``asyncio.timeout``."""
    if seconds is None:
        return await work
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)  # pragma: no cover - Python 3.10


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        self.writer.close()


class _Answer:
    __slots__ = ("status", "headers", "body", "reusable", "json")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, reusable: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.reusable = reusable
        content_type = next((v for k, v in headers if k == "content-type"), "")
        self.json = content_type.split(";", 1)[0].strip().lower().endswith("json")


class _StaleConnection(Exception):
    """A reused connection the server had closed before it answered anything."""


class JSONPool:
    """POSTs JSON to one server over kept-alive connections of the running event loop.

    ``tls``: returns the TLS context for an ``https`` URL (awaited once, on first connect).
    ``headers``: sent with every request (the key's ``Authorization`` among them)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: Optional[float],
                 tls: Optional[Callable[[], Awaitable[Union[ssl.SSLContext, bool]]]] = None) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._https = parts.scheme == "https"
        self._tls = tls
        self._prefix = parts.path.rstrip("/")
        host = f"[{self._host}]" if ":" in self._host else self._host
        if parts.port:
            host = f"{host}:{parts.port}"
        self._head_lines = "".join(f"{k}: {v}\r\n" for k, v in {
            "Host": host, "Accept": "application/json", "Accept-Encoding": "gzip",
            "Content-Type": "application/json", "Connection": "keep-alive", **headers}.items())
        self.timeout = timeout
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._closed = False

    # ------------------------------------------------------------------ connections

    async def _connect(self, timeout: Optional[float]) -> _Connection:
        ssl_context: Union[ssl.SSLContext, bool, None] = None
        if self._https:  # the caller's context, else Python's default one
            ssl_context = await self._tls() if self._tls is not None else True
        reader, writer = await _within(timeout, asyncio.open_connection(
            self._host, self._port, ssl=ssl_context, limit=_MAX_HEAD_BYTES,
            server_hostname=self._host if self._https else None))
        return _Connection(reader, writer)

    def _take_idle(self) -> Optional[_Connection]:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < IDLE_EXPIRY_S and not conn.reader.at_eof() \
                    and not conn.writer.is_closing():
                return conn
            conn.close()
        return None

    def _put_back(self, conn: _Connection) -> None:
        self._busy.discard(conn)
        if self._closed or len(self._idle) >= MAX_IDLE:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _drop(self, conn: _Connection) -> None:
        self._busy.discard(conn)
        conn.close()

    async def aclose(self) -> None:
        """Close every connection; a request still running on one fails. Idempotent."""
        self._closed = True
        conns = self._idle + list(self._busy)
        self._idle.clear()
        self._busy.clear()
        for conn in conns:
            conn.close()
        if not conns:
            return
        try:  # a TLS connection waits for the server's close_notify: not for long
            await _within(CLOSE_WAIT_S, asyncio.gather(*(c.writer.wait_closed() for c in conns),
                                                       return_exceptions=True))
        except (asyncio.TimeoutError, TimeoutError):
            for conn in conns:
                conn.writer.transport.abort()

    # ------------------------------------------------------------------ requests

    async def post(self, path: str, body: dict[str, Any], *, timeout: Optional[float] = None,
                   headers: Optional[dict[str, str]] = None) -> JSONValue:
        """``body`` POSTed to ``path`` (under the base URL); the answer's JSON (its text when
        the server says it is not JSON). A status of
        400 and up raises the matching ``openai.APIStatusError`` subclass, a timeout
        ``openai.APITimeoutError``, a lost connection ``openai.APIConnectionError``."""
        if self._closed:
            self._closed = False  # a pool is reopened by its next use, like the SDK's clients
        timeout = self.timeout if timeout is None else timeout
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        request = (f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head_lines}{extra}"
                   f"Content-Length: {len(data)}\r\n\r\n").encode("latin-1") + data
        try:
            answer = await self._exchange(request, timeout)
        except (asyncio.TimeoutError, TimeoutError, OSError, EOFError, ValueError, zlib.error,
                _StaleConnection) as exc:
            raise _openai_error(self.base_url + path, None, exc) from exc
        if answer.status >= 400:
            raise _openai_error(self.base_url + path, answer, None)
        if not answer.json:  # as openai hands back an answer of another type: its text
            return answer.body.decode("utf-8", "replace")
        return json.loads(answer.body)

    async def _exchange(self, request: bytes, timeout: Optional[float]) -> _Answer:
        """One request and its answer. A reused connection that the server closed before
        answering is replaced by a new one, once; any other failure closes the connection."""
        conn = self._take_idle()
        reused = conn is not None
        if conn is None:
            conn = await self._connect(timeout)
        self._busy.add(conn)
        try:
            try:
                answer = await _within(timeout, self._send_and_read(conn, request, reused))
            except _StaleConnection:
                self._drop(conn)
                conn = await self._connect(timeout)
                self._busy.add(conn)
                answer = await _within(timeout, self._send_and_read(conn, request, False))
        except BaseException:
            self._drop(conn)  # its state is unknown (a cancel mid-answer, too): never reused
            raise
        if answer.reusable:
            self._put_back(conn)
        else:
            self._drop(conn)
        return answer

    @staticmethod
    async def _send_and_read(conn: _Connection, request: bytes, reused: bool) -> _Answer:
        reader = conn.reader
        conn.writer.write(request)
        try:
            await conn.writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
            partial = getattr(exc, "partial", b"")
            if reused and not partial:
                raise _StaleConnection() from exc
            raise
        except asyncio.LimitOverrunError as exc:
            raise ValueError("the server's response head is too long") from exc
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        status = int(rest[:3])
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append((name.strip().lower(), value.strip()))
        fields = dict(headers)
        connection = fields.get("connection", "").lower()
        reusable = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        if "chunked" in fields.get("transfer-encoding", "").lower():
            body = await _read_chunked(reader)
        elif "content-length" in fields:
            body = await reader.readexactly(int(fields["content-length"]))
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:
            body = await reader.read()  # delimited by the server closing the connection
            reusable = False
        if fields.get("content-encoding", "").lower() == "gzip":
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        return _Answer(status, headers, body, reusable)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


_STATUS_ERRORS = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
                  404: "NotFoundError", 409: "ConflictError", 422: "UnprocessableEntityError",
                  429: "RateLimitError"}


def http_library() -> ModuleType:
    """httpx (openai 1.x, 2.x) or httpx2 (3.x): the library openai's exceptions carry requests
    and responses of."""
    import openai

    return next(module for module in (sys.modules.get(cls.__module__.split(".")[0])
                                      for cls in openai.DefaultAsyncHttpxClient.__mro__)
                if hasattr(module, "create_ssl_context"))


def _openai_error(url: str, answer: Optional[_Answer], cause: Optional[BaseException]) -> Exception:
    """The exception openai's client raises for the same failure, worded as it words it."""
    import openai

    http = http_library()
    request = http.Request("POST", url)
    if answer is None:
        if isinstance(cause, (asyncio.TimeoutError, TimeoutError)):
            return openai.APITimeoutError(request=request)
        return openai.APIConnectionError(message=f"Connection error: {cause!r}", request=request)
    response = http.Response(answer.status, headers=answer.headers, content=answer.body, request=request)
    text = answer.body.decode("utf-8", "replace").strip()
    body: JSONValue = text
    try:
        body = json.loads(text)
        message = f"Error code: {answer.status} - {body}"
    except ValueError:
        message = text or f"Error code: {answer.status}"
    data = body.get("error", body) if isinstance(body, dict) else body
    name = "InternalServerError" if answer.status >= 500 else _STATUS_ERRORS.get(answer.status, "APIStatusError")
    return getattr(openai, name)(message, response=response, body=data)


def default_headers(api_key: str) -> dict[str, str]:
    """What openai's client sends besides the body: the key, and the organization and project
    its environment variables name."""
    headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "graphrag-http-pool"}
    for variable, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(variable):
            headers[header] = os.environ[variable]
    return headers
