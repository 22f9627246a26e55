"""Who may reach the server, from where, and how much they may send: the rules the HTTP API
and the MCP server's HTTP transport share.

- Bound to a loopback address only the local machine can connect, and no key is needed.
  Bound anywhere else, the server refuses to start without an API key of at least
  ``MIN_KEY_CHARS`` characters.
- Every request names a host this server answers to (``Host``): the loopback names, the
  address it is bound to, and the names given with ``allowed_hosts`` (``--allowed-host``).
  Any other is refused (421), so a page on another site whose name was pointed at this
  machine (DNS rebinding) reaches nothing.
- A request a browser sends from another origin (``Origin`` other than the server's own, or
  ``Sec-Fetch-Site`` other than same-origin on a write) is refused (403): no other site's
  page can make a visitor's browser write to the index or read from it.
- With a key, every request but the public ones (the page shell, its static files, the API
  docs, ``/livez``) carries it: ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, any
  UTF-8. There is no HTTP Basic (a browser would resend it to any page on its own); the web
  page sends the key itself. Failures are logged without the key; a client with
  ``MAX_FAILURES`` failures within ``FAILURE_WINDOW_SECONDS`` is refused (429) until they age.
- Request bodies larger than the limit are refused with 413 before they are read whole.
- Every response carries the security headers (``SECURITY_HEADERS``).
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import time
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, MutableMapping, Optional
from urllib.parse import urlsplit

from graphrag.errors import ConfigurationError

if TYPE_CHECKING:
    import uvicorn

logger = logging.getLogger(__name__)

API_KEY_ENV = "GRAPHRAG_API_KEY"
MIN_KEY_CHARS = 16
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
ANY_HOST = "*"
MAX_FAILURES = 10
FAILURE_WINDOW_SECONDS = 60.0
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Message = MutableMapping[str, Any]  # an ASGI event, as Starlette types it
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[dict, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")


def check_key(api_key: str) -> None:
    """Refuse a key short enough to guess."""
    if len(api_key) < MIN_KEY_CHARS:
        raise ConfigurationError(f"the API key has {len(api_key)} characters; use at least {MIN_KEY_CHARS} "
                                 "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe())'`)")


def check_binding(host: str, api_key: Optional[str], allowed_hosts: Iterable[str] = ()) -> None:
    """Refuse a short key; refuse to listen beyond this machine without a key, or on every
    address without the names clients will use (the Host check needs them)."""
    if api_key:
        check_key(api_key)
    if is_loopback(host):
        return
    if not api_key:
        raise ConfigurationError(
            f"refusing to listen on {host} without an API key: anyone who can reach it could read and "
            f"change the index. Set {API_KEY_ENV} (or pass --api-key), or bind 127.0.0.1")
    if _is_wildcard(host) and not list(allowed_hosts):
        raise ConfigurationError(
            f"listening on every address ({host}): name the host(s) clients will use with --allowed-host "
            f"(a DNS name or address; {ANY_HOST!r} allows any, which DNS rebinding can abuse)")


def host_names(host: str, allowed_hosts: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names served: loopback names, the bound address, and ``allowed_hosts``."""
    names = set(LOOPBACK_NAMES) | {h.strip().lower().strip("[]") for h in allowed_hosts if h.strip()}
    if not _is_wildcard(host):
        names.add(host.lower().strip("[]"))
    return frozenset(names)


async def _send_json(send: Callable[[dict], Awaitable[None]], status: int, body: dict[str, Any],
                     headers: Optional[list[tuple[bytes, bytes]]] = None) -> None:
    payload = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": payload})


# What a Host header may hold: a name or address, or a bracketed IPv6 address, and a port.
# Anything else (user info, a path) names no host: it is refused, not parsed leniently.
_HOST_HEADER = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[^\s:@/?#\[\]]+)(?::\d*)?")


def _hostname(netloc: str) -> str:
    """``name`` of ``name:port`` or ``[v6]:port``, lower-case; "" for anything else."""
    found = _HOST_HEADER.fullmatch(netloc)
    return found.group("name").strip("[]").lower() if found else ""


def _authority(netloc: str, scheme: str) -> str:
    """``netloc`` without the scheme's default port, lower-case: how two spellings of one
    origin compare."""
    netloc = netloc.lower()
    default = ":443" if scheme == "https" else ":80"
    return netloc[:-len(default)] if netloc.endswith(default) else netloc


def _same_origin(origin: str, host: str) -> bool:
    """Whether ``Origin`` names this server as the request reached it; an opaque ("null") or
    malformed origin never does."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return bool(parts.scheme and parts.netloc) and _authority(parts.netloc, parts.scheme) == _authority(host, parts.scheme)


class CheckOrigin:
    """Refuse a ``Host`` not served (421) and a browser's request from another origin (403)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        if ANY_HOST not in self.hosts and _hostname(host) not in self.hosts:
            await _send_json(send, 421, {"error": "MisdirectedRequest",
                                         "message": "this server does not answer to that Host name"})
            return
        origin = headers.get(b"origin", b"").decode("latin-1")
        site = headers.get(b"sec-fetch-site", b"").decode("latin-1")
        if origin:
            same = _same_origin(origin, host)
        else:
            same = scope.get("method") not in UNSAFE_METHODS or site in ("", "same-origin", "none")
        if not same:
            await _send_json(send, 403, {"error": "CrossOriginRequest",
                                         "message": "requests from another site's pages are refused"})
            return
        await self.app(scope, receive, send)


def _presented_key(headers: dict[bytes, bytes]) -> Optional[bytes]:
    """The key a request carries, as the bytes sent (UTF-8 for any client that sends text)."""
    if b"x-api-key" in headers:
        return headers[b"x-api-key"].strip()
    scheme, _, value = headers.get(b"authorization", b"").partition(b" ")
    return value.strip() if scheme.lower() == b"bearer" else None


class RequireAPIKey:
    """Every HTTP request but the public paths must carry ``api_key``; 401 (a JSON error)
    otherwise, and 429 for a client that has failed too often lately."""

    def __init__(self, app: ASGIApp, api_key: str, public: Callable[[str], bool] = lambda _path: False) -> None:
        self.app = app
        self._key = api_key.encode("utf-8")
        self._public = public
        self._failures: defaultdict[str, deque[float]] = defaultdict(deque)

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._public(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("unknown",))[0]
        failures = self._failures[client]
        now = time.monotonic()
        while failures and failures[0] < now - FAILURE_WINDOW_SECONDS:
            failures.popleft()
        if not failures:  # only clients with recent failures are remembered
            del self._failures[client]
            failures = deque()
        if len(failures) >= MAX_FAILURES:  # before any comparison: a locked client learns nothing
            wait = int(failures[0] + FAILURE_WINDOW_SECONDS - now) + 1
            await _send_json(send, 429, {"error": "TooManyFailures", "message": "too many requests without a "
                                         f"valid API key from this client; retry in {wait} s"},
                             [(b"retry-after", str(wait).encode())])
            return
        presented = _presented_key(dict(scope.get("headers") or []))
        if presented is None or not hmac.compare_digest(presented, self._key):
            failures = self._failures[client]
            failures.append(now)
            if len(failures) == 1 or len(failures) == MAX_FAILURES:
                logger.warning("refused %s %s from %s: %s API key (%d failure(s) from it in %.0f s%s)",
                               scope.get("method"), scope.get("path"), client,
                               "no" if presented is None else "a wrong", len(failures), FAILURE_WINDOW_SECONDS,
                               "; refusing it for now" if len(failures) == MAX_FAILURES else "")
            await _send_json(send, 401, {"error": "Unauthorized", "message": "a valid API key is required "
                                         "(Authorization: Bearer KEY, or X-API-Key: KEY)"},
                             [(b"www-authenticate", b'Bearer realm="graphrag"')])
            return
        await self.app(scope, receive, send)


class LimitBodySize:
    """Refuse request bodies over ``max_bytes``: by their declared length at once, and a body
    sent without one as soon as it grows past the limit (the app then sees the client leave)."""

    def __init__(self, app: ASGIApp, max_bytes: Callable[[str], int]) -> None:
        """``max_bytes``: the limit for a request path."""
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, limit)
            return
        received = 0
        started = refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit and not refused:
                    refused = True
                    if not started:
                        await self._refuse(send, limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:  # the 413 went out; what the app answers to the "disconnect" does not
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counting_receive, guarded_send)

    @staticmethod
    async def _refuse(send: Send, limit: int) -> None:
        await _send_json(send, 413, {"error": "RequestTooLarge",
                                     "message": f"the request body is over the limit of {limit} bytes"})


def security_headers(content_security_policy: str) -> list[tuple[bytes, bytes]]:
    """The headers every response carries: what may run and load in a page, that no other site
    may frame it, that a response is never sniffed as another type, and that no URL leaks."""
    return [(b"content-security-policy", content_security_policy.encode("ascii")),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY"),
            (b"cross-origin-opener-policy", b"same-origin")]


class AddHeaders:
    """Add ``headers`` to every HTTP response (replacing any of the same names)."""

    def __init__(self, app: ASGIApp, headers: list[tuple[bytes, bytes]]) -> None:
        self.app = app
        self.headers = headers
        self._names = {name for name, _ in headers}

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in self._names]
                message = {**message, "headers": kept + self.headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# Nothing but this server's own scripts, styles and images; no frame of it anywhere.
DEFAULT_POLICY = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                  "form-action 'self'; frame-ancestors 'none'")


FORWARDED_ENV = "FORWARDED_ALLOW_IPS"


def uvicorn_config(app: ASGIApp, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings for ``app``. The client's address (which the key check counts
    failures by, and logs) is the connection's own: ``X-Forwarded-For`` is believed only from
    the proxies named in ``FORWARDED_ALLOW_IPS``, since by default uvicorn believes any local
    client, which could then give each wrong key a new address and never be slowed."""
    import os

    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="warning", proxy_headers=FORWARDED_ENV in os.environ)


def secured(app: ASGIApp, api_key: Optional[str], max_body_bytes: Callable[[str], int], *,
            hosts: frozenset[str] = LOOPBACK_NAMES, public: Callable[[str], bool] = lambda _path: False,
            content_security_policy: str = DEFAULT_POLICY) -> ASGIApp:
    """``app`` behind, outermost first: the security headers, the Host and Origin checks, the
    key check (when a key is set; ``public`` paths aside), and the body size limit (by path)."""
    inner: ASGIApp = LimitBodySize(app, max_body_bytes)
    if api_key:
        inner = RequireAPIKey(inner, api_key, public)
    return AddHeaders(CheckOrigin(inner, hosts), security_headers(content_security_policy))
