"""The kept-alive HTTP client non-streamed chat calls go over (``graphrag/llm/http_pool.py``):
connections reused and closed, openai's errors, what a server's HTTP framing can be, and
the proxy case left to the SDK. Against the mock server, and a raw server for the framing."""
from __future__ import annotations

import asyncio
import gc
import gzip
import json
import logging
import time
from typing import Any, Awaitable, Callable

import openai
import pytest

from graphrag.errors import LLMError
from graphrag.llm import LLMClient, UsageCounter, openai_model_func
from graphrag.llm.http_pool import JSONPool, default_headers, proxy_for
from graphrag.llm.retry import retry_after_seconds
from mock_llm_server import Fault, MockLLMServer


def _wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def _chat(text: str = "hello") -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}


def test_calls_share_one_kept_alive_connection_and_close_leaves_none_open(llm_server: MockLLMServer) -> None:
    func = openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k")

    async def run() -> list[str]:
        answers = [await func(f"question {i}") for i in range(5)]
        assert llm_server.open_connections == 1
        await func.aclose()
        return answers

    answers = asyncio.run(run())
    assert all(a.strip() for a in answers) and len(llm_server.chat_requests) == 5
    assert llm_server.connections == 1
    assert _wait_for(lambda: llm_server.open_connections == 0)


def test_a_pool_used_again_after_closing_opens_a_new_connection(llm_server: MockLLMServer) -> None:
    pool = JSONPool(llm_server.base_url, default_headers("k"), timeout=10)

    async def run() -> None:
        await pool.post("/chat/completions", _chat())
        await pool.aclose()
        await pool.post("/chat/completions", _chat())
        await pool.aclose()

    asyncio.run(run())
    assert llm_server.connections == 2 and len(llm_server.chat_requests) == 2
    assert _wait_for(lambda: llm_server.open_connections == 0)


def test_a_pool_dropped_with_its_loop_unclosed_logs_no_error(llm_server: MockLLMServer,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """What ``asyncio.run(rag.aquery(...))`` without ``aclose`` leaves: no ERROR from the loop."""
    caplog.set_level(logging.WARNING)

    async def run() -> str:
        func = openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k")
        return await func("hello")

    assert asyncio.run(run()).strip()
    gc.collect()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert _wait_for(lambda: llm_server.open_connections == 0)  # the sockets went with the loop


@pytest.mark.parametrize("status, error", [(400, openai.BadRequestError), (401, openai.AuthenticationError),
                                           (404, openai.NotFoundError), (429, openai.RateLimitError),
                                           (503, openai.InternalServerError)])
def test_an_error_status_raises_openais_class_with_the_response(llm_server: MockLLMServer, status: int,
                                                                 error: type) -> None:
    llm_server.inject(Fault.status(status, retry_after=7, message="the server's words"))
    pool = JSONPool(llm_server.base_url, default_headers("sk-secret-test-key"), timeout=10)

    async def run() -> BaseException:
        try:
            with pytest.raises(error) as info:
                await pool.post("/chat/completions", _chat())
            assert (await pool.post("/chat/completions", _chat()))["choices"]  # the connection goes on
            return info.value
        finally:
            await pool.aclose()

    exc = asyncio.run(run())
    assert exc.status_code == status and "the server's words" in str(exc)
    assert exc.body["message"] == "the server's words"
    assert retry_after_seconds(exc) == 7.0
    assert "sk-secret" not in str(exc) and "sk-secret" not in repr(exc.request.headers)
    assert llm_server.connections == 1


def test_a_timeout_and_a_reset_raise_openais_errors_and_are_retried(llm_server: MockLLMServer) -> None:
    usage = UsageCounter()
    client = LLMClient(openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k", timeout=0.3),
                       model_id="gpt-4o-mini", max_async=2, usage=usage, backoff_base=0.01, backoff_max=0.05)
    pool = JSONPool(llm_server.base_url, default_headers("k"), timeout=0.3)

    async def run() -> str:
        llm_server.inject(Fault.delay(1.0))
        with pytest.raises(openai.APITimeoutError):
            await pool.post("/chat/completions", _chat())
        llm_server.inject(Fault.reset())
        with pytest.raises(openai.APIConnectionError):
            await pool.post("/chat/completions", _chat())
        await pool.aclose()
        llm_server.inject(Fault.delay(1.0), Fault.reset())
        try:
            return await client("hello", stage="query")
        finally:
            await client.aclose()

    assert asyncio.run(run()).strip()
    assert usage.total()["retries"] == 2 and usage.total()["calls"] == 3


def test_permanent_failure_names_the_stage_and_keeps_openais_cause(llm_server: MockLLMServer) -> None:
    llm_server.inject(*[Fault.status(500)] * 3)
    client = LLMClient(openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k"),
                       model_id="gpt-4o-mini", max_async=2, usage=UsageCounter(), max_retries=2,
                       backoff_base=0.01, backoff_max=0.05)

    async def run() -> None:
        try:
            await client("hello", stage="extraction")
        finally:
            await client.aclose()

    with pytest.raises(LLMError) as info:
        asyncio.run(run())
    assert info.value.stage == "extraction" and isinstance(info.value.cause, openai.InternalServerError)


# --------------------------------------------------------------------------- a raw server


class RawServer:
    """Answers each request on a connection with the next scripted raw HTTP answer (bytes), or
    closes the connection when the script says None; records each request's head and body."""

    def __init__(self, script: list[list[Any]], tls: Any = None) -> None:
        self.script = script  # one list of answers per connection, in connection order
        self.tls = tls
        self.requests: list[tuple[str, bytes]] = []
        self.connections = 0
        self.server: Any = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers = self.script[self.connections] if self.connections < len(self.script) else []
        self.connections += 1
        try:
            for answer in answers:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                length = int(next(line.split(":", 1)[1] for line in head.split("\r\n")
                                  if line.lower().startswith("content-length:")))
                self.requests.append((head, await reader.readexactly(length)))
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
            else:
                await reader.read()  # keep the connection open until the client closes it
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()


def _reply(payload: Any, *, chunked: bool = False, gzipped: bool = False, extra: str = "",
           content_type: str = "application/json") -> bytes:
    body = json.dumps(payload).encode() if content_type.endswith("json") else str(payload).encode()
    headers = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n" + extra
    if gzipped:
        body = gzip.compress(body)
        headers += "Content-Encoding: gzip\r\n"
    if not chunked:
        return f"{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:]))
    return f"{headers}Transfer-Encoding: chunked\r\n\r\n".encode() + chunks + b"0\r\n\r\n"


def _run(script: list[list[Any]], work: Callable[[str], Awaitable[Any]], tls: Any = None) -> tuple[Any, RawServer]:
    raw = RawServer(script, tls)

    async def run() -> Any:
        async with raw as url:
            return await work(url)

    return asyncio.run(run()), raw


def test_chunked_gzipped_and_non_json_answers_are_read_and_the_request_is_what_openai_sends() -> None:
    answers = [_reply({"n": 1}, chunked=True), _reply({"n": 2}, gzipped=True),
               _reply({"n": 3}, chunked=True, gzipped=True),
               _reply("<html>a proxy's page</html>", content_type="text/html; charset=utf-8")]

    async def work(url: str) -> list[Any]:
        pool = JSONPool(url, default_headers("sk-test-1234567"), timeout=5)
        try:
            return [await pool.post("/chat/completions", _chat("é"), headers={"X-Extra": "yes"}) for _ in answers]
        finally:
            await pool.aclose()

    got, raw = _run([answers], work)
    assert got == [{"n": 1}, {"n": 2}, {"n": 3}, "<html>a proxy's page</html>"] and raw.connections == 1
    head, body = raw.requests[0]
    lines = head.split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert "Authorization: Bearer sk-test-1234567" in lines and "X-Extra: yes" in lines
    assert json.loads(body) == _chat("é")


async def _two_posts(url: str) -> list[Any]:
    pool = JSONPool(url, default_headers("k"), timeout=5)
    try:
        return [await pool.post("/chat/completions", _chat()) for _ in range(2)]
    finally:
        await pool.aclose()


def test_an_answer_without_keep_alive_closes_its_connection() -> None:
    got, raw = _run([[_reply({"n": 1}, extra="Connection: close\r\n")], [_reply({"n": 2})]], _two_posts)
    assert got == [{"n": 1}, {"n": 2}] and raw.connections == 2


def test_a_kept_connection_the_server_dropped_is_replaced_once() -> None:
    """The server closes a kept-alive connection as the next request arrives on it (its idle
    timeout): the request goes again on a new connection, not failed."""
    got, raw = _run([[_reply({"n": 1}), None], [_reply({"n": 2})]], _two_posts)
    assert got == [{"n": 1}, {"n": 2}] and raw.connections == 2 and len(raw.requests) == 3


def test_a_new_connection_dropped_without_an_answer_is_a_connection_error() -> None:
    async def work(url: str) -> None:
        pool = JSONPool(url, default_headers("k"), timeout=5)
        try:
            with pytest.raises(openai.APIConnectionError):
                await pool.post("/chat/completions", _chat())
        finally:
            await pool.aclose()

    _, raw = _run([[None]], work)
    assert raw.connections == 1  # a fresh connection is not tried again here: LLMClient retries


def test_an_https_server_is_reached_through_the_tls_context_given_and_verified(tmp_path: Any) -> None:
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def trusting() -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(cert))

    async def default() -> ssl.SSLContext:
        return ssl.create_default_context()

    async def work(url: str) -> list[Any]:
        got = []
        for tls in (trusting, default):
            pool = JSONPool(url, default_headers("k"), timeout=5, tls=tls)
            try:
                got.append(await pool.post("/chat/completions", _chat()))
            except openai.APIConnectionError as exc:  # the certificate is not one the default trusts
                got.append(type(exc.__cause__).__name__)
            finally:
                await pool.aclose()
        return got

    got, raw = _run([[_reply({"n": 1})], []], work, tls=server_tls)
    assert got == [{"n": 1}, "SSLCertVerificationError"]
    assert raw.requests[0][0].startswith("POST /v1/chat/completions HTTP/1.1")


# --------------------------------------------------------------------------- proxies


def test_a_proxy_in_the_environment_sends_chat_calls_through_the_sdk(llm_server: MockLLMServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens: the proxy is unreachable
    assert proxy_for(llm_server.base_url) == "http://127.0.0.1:9"

    async def ask() -> str:
        func = openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k", timeout=5)
        try:
            return await func("hello")
        finally:
            await func.aclose()

    with pytest.raises(openai.APIConnectionError):  # httpx tried the proxy
        asyncio.run(ask())
    assert llm_server.chat_requests == []
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert proxy_for(llm_server.base_url) is None
    assert asyncio.run(ask()).strip() and len(llm_server.chat_requests) == 1
