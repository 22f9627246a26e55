"""Who may reach the server and how much they may send: the rules the HTTP API and the MCP
server's HTTP transport share.

- Bound to a loopback address only the local machine can connect, and no key is needed.
  Bound anywhere else, the server refuses to start without an API key.
- With a key, every request carries it: ``Authorization: Bearer KEY``, ``X-API-Key: KEY``,
  or HTTP Basic with the key as password (what a browser sends for the web page once asked).
- Request bodies larger than the limit are refused with 413 before they are read whole.
"""
from __future__ import annotations

import base64
import hmac
import ipaddress
import json
from typing import Any, Awaitable, Callable, Optional

from graphrag.errors import ConfigurationError

API_KEY_ENV = "GRAPHRAG_API_KEY"

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, api_key: Optional[str]) -> None:
    """Refuse to listen beyond this machine without an API key."""
    if not is_loopback(host) and not api_key:
        raise ConfigurationError(
            f"refusing to listen on {host} without an API key: anyone who can reach it could read and "
            f"change the index. Set {API_KEY_ENV} (or pass --api-key), or bind 127.0.0.1")


async def _send_json(send: Callable[[dict], Awaitable[None]], status: int, body: dict[str, Any],
                     headers: Optional[list[tuple[bytes, bytes]]] = None) -> None:
    payload = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": payload})


def _presented_key(headers: dict[bytes, bytes]) -> Optional[str]:
    if b"x-api-key" in headers:
        return headers[b"x-api-key"].decode("latin-1")
    scheme, _, value = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip()).decode("utf-8").partition(":")[2]
        except ValueError:
            return None
    return None


class RequireAPIKey:
    """Every HTTP request must carry ``api_key``; 401 (a JSON error) otherwise."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._key = api_key.encode("utf-8")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            presented = _presented_key(dict(scope.get("headers") or []))
            if presented is None or not hmac.compare_digest(presented.encode("utf-8"), self._key):
                await _send_json(send, 401, {"error": "Unauthorized", "message": "a valid API key is required"},
                                 [(b"www-authenticate", b'Basic realm="graphrag", charset="UTF-8"')])
                return
        await self.app(scope, receive, send)


class LimitBodySize:
    """Refuse request bodies over ``max_bytes``: by their declared length at once, and a body
    sent without one as soon as it grows past the limit (the app then sees the client leave)."""

    def __init__(self, app: ASGIApp, max_bytes: Callable[[str], int]) -> None:
        """``max_bytes``: the limit for a request path."""
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
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

        async def counting_receive() -> dict:
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

        async def guarded_send(message: dict) -> None:
            nonlocal started
            if refused:  # the 413 went out; what the app answers to the "disconnect" does not
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counting_receive, guarded_send)

    @staticmethod
    async def _refuse(send: Any, limit: int) -> None:
        await _send_json(send, 413, {"error": "RequestTooLarge",
                                     "message": f"the request body is over the limit of {limit} bytes"})


def secured(app: ASGIApp, api_key: Optional[str], max_body_bytes: Callable[[str], int]) -> ASGIApp:
    """``app`` behind the key check (when a key is set) and the body size limit (by path)."""
    limited = LimitBodySize(app, max_body_bytes)
    return RequireAPIKey(limited, api_key) if api_key else limited
