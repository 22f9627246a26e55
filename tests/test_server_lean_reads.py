"""POST /query and /retrieve past FastAPI (``app.LeanReads``): the same answers and errors,
byte for byte, as FastAPI's routes give; the same Host, Origin, key, throttle and size checks;
and, over reader processes, each of many concurrent requests answered with its own reply."""
from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from graphrag.server.app import MAX_BODY_BYTES, LeanReads, build_app, create_app
from graphrag.server.reader_processes import json_bytes
from graphrag.server.security import MAX_FAILURES, secured
from graphrag.server.service import GraphService
from graphrag.server.workspaces import Workspaces, selecting_workspace
from helpers_server import CHAIN, build_index, index_config, running, unsized_body

KEY = "lean-reads-test-key-0123456789"
QUESTION = "Who founded Brightwater Instruments?"
CONTEXT = {"question": QUESTION, "only_need_context": True}
JSON = {"content-type": "application/json"}
# FastAPI reads this as JSON too, but the lean path takes only the plain type: the same request
# by FastAPI's route.
JSON_BY_FASTAPI = {"content-type": "application/json; charset=utf-8"}


class CountingRequests:
    """An ASGI app counting the HTTP requests that reach it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, CountingRequests]]:
    """The API as ``build_app`` stacks it, with FastAPI's app counting what reaches it."""
    wd = tmp_path_factory.mktemp("lean") / "wd"
    build_index(wd)
    service = Workspaces.of(GraphService(index_config(wd)))
    fastapi_app = CountingRequests(create_app(service))
    app = secured(selecting_workspace(LeanReads(fastapi_app, service), service), None, lambda _path: MAX_BODY_BYTES)
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, fastapi_app


def both_ways(client: httpx.Client, counted: CountingRequests, path: str, content: bytes,
              headers: dict[str, str] = {}) -> tuple[httpx.Response, httpx.Response, int]:
    """The request sent as the lean path takes it, then as only FastAPI takes it; and how many
    of the two reached FastAPI."""
    before = counted.requests
    lean = client.post(path, content=content, headers={**JSON, **headers})
    normal = client.post(path, content=content, headers={**JSON_BY_FASTAPI, **headers})
    return lean, normal, counted.requests - before


@pytest.mark.parametrize("path, body, headers", [
    ("/query", {**CONTEXT, "mode": "naive"}, {}),
    ("/query", {**CONTEXT, "mode": "local", "top_k": 5}, {}),
    ("/query", {**CONTEXT, "mode": "hybrid"}, {}),
    ("/query", {**CONTEXT, "mode": "local", "with_references": True}, {}),
    ("/retrieve", {"question": QUESTION, "mode": "local"}, {}),
    ("/retrieve", {"question": QUESTION, "mode": "naive", "stream": True}, {}),  # /retrieve never streams
    # errors raised past validation: the same handler's JSON and status
    ("/query", {**CONTEXT, "top_k": -1}, {}),
    ("/query", {**CONTEXT, "mode": "local"}, {"X-Workspace": "nowhere"}),
    ("/retrieve", {"question": QUESTION}, {"X-Workspace": "bad name!"}),
])
def test_the_lean_path_answers_byte_for_byte_as_fastapis_route(
        served: tuple[httpx.Client, CountingRequests], path: str, body: dict[str, Any],
        headers: dict[str, str]) -> None:
    client, counted = served
    lean, normal, reached_fastapi = both_ways(client, counted, path, json.dumps(body).encode(), headers)
    assert reached_fastapi == 1  # only the second
    assert (lean.status_code, lean.content) == (normal.status_code, normal.content)
    assert lean.headers["content-type"] == normal.headers["content-type"] == "application/json"
    assert lean.headers["content-length"] == normal.headers["content-length"]
    assert lean.headers["content-security-policy"] == normal.headers["content-security-policy"]
    if lean.status_code == 200:
        reply = lean.json()
        assert (reply["answer"] if "answer" in reply else json.dumps(reply)).upper().count("BRIGHTWATER")
    else:
        assert set(lean.json()) >= {"error", "message"} and lean.json()["error"] in (
            "InvalidInputError", "WorkspaceNotFound")


@pytest.mark.parametrize("content", [
    b"{not json", b"", b"[]", b'"a question"', json.dumps({"question": ""}).encode(),
    json.dumps({"question": QUESTION, "mode": "sideways"}).encode(),  # not a registered mode
    json.dumps({"question": QUESTION, "top_kk": 5}).encode(),  # a misspelt option
    json.dumps({"question": QUESTION, "top_k": "5", "only_need_context": True}).encode(),  # FastAPI's coercion
])
def test_a_body_that_does_not_validate_is_fastapis_to_answer(
        served: tuple[httpx.Client, CountingRequests], content: bytes) -> None:
    client, counted = served
    lean, normal, reached_fastapi = both_ways(client, counted, "/query", content)
    assert reached_fastapi == 2 - (lean.status_code == 200)  # a valid coerced body is the lean path's
    assert (lean.status_code, lean.content) == (normal.status_code, normal.content)
    if lean.status_code != 200:
        assert lean.status_code == 400 and lean.json()["error"] == "InvalidInputError" and lean.json()["message"]


def test_a_streamed_query_is_fastapis(served: tuple[httpx.Client, CountingRequests]) -> None:
    client, counted = served
    before = counted.requests
    streamed = client.post("/query", json={**CONTEXT, "mode": "local", "stream": True})
    assert counted.requests == before + 1
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "BRIGHTWATER INSTRUMENTS" in streamed.text and "event: done" in streamed.text


def test_the_lean_path_runs_the_servers_checks(tmp_path: Path) -> None:
    """Host, Origin, key, throttle and size checks on POST /query and /retrieve sent as the
    lean path takes them: each refusal in the README's JSON error shape."""
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd)), api_key=KEY, max_body_bytes=2048)) as url:
        port = url.rsplit(":", 1)[1]
        key = {"X-API-Key": KEY}
        body = json.dumps({**CONTEXT, "mode": "local"}).encode()

        def post(path: str, headers: dict[str, str], content: bytes = body) -> httpx.Response:
            return httpx.post(url + path, content=content, headers={**JSON, **headers}, timeout=60)

        for path in ("/query", "/retrieve"):
            answered = post(path, key)
            assert answered.status_code == 200 and "BRIGHTWATER" in answered.text.upper()
            assert answered.headers["x-frame-options"] == "DENY"  # the security headers too
            for headers, status, error in [
                ({}, 401, "Unauthorized"),
                ({"Authorization": "Bearer not-the-key-at-all-000"}, 401, "Unauthorized"),
                ({**key, "Origin": "https://evil.example"}, 403, "CrossOriginRequest"),
                ({**key, "Sec-Fetch-Site": "cross-site"}, 403, "CrossOriginRequest"),
                ({**key, "Host": f"evil.example:{port}"}, 421, "MisdirectedRequest"),
            ]:
                refused = post(path, headers)
                assert refused.status_code == status, (path, headers, refused.text)
                assert refused.json()["error"] == error and refused.json()["message"]
        bad_json = post("/query", key, b"{not json")
        assert bad_json.status_code == 400 and bad_json.json()["error"] == "InvalidInputError"
        assert "JSON" in bad_json.json()["message"]
        too_big = post("/query", key, json.dumps({**CONTEXT, "question": "word " * 1000}).encode())
        assert too_big.status_code == 413 and too_big.json()["error"] == "RequestTooLarge"
        streamed = httpx.post(url + "/query", content=unsized_body("question"), headers={**JSON, **key}, timeout=60)
        assert streamed.status_code == 413 and streamed.json()["error"] == "RequestTooLarge"
        # A client with too many failures is refused, the right key or not.
        for _ in range(MAX_FAILURES):
            post("/query", {"X-API-Key": "wrong-key-wrong-key-0000"})
        locked = post("/query", key)
        assert locked.status_code == 429 and locked.json()["error"] == "TooManyFailures"


def test_reader_processes_answer_each_of_many_concurrent_requests_with_its_own_reply(tmp_path: Path) -> None:
    """A burst's requests and their replies share each worker's connection, interleaved: each
    reply reaches its own request."""
    wd = tmp_path / "wd"
    build_index(wd)
    make = functools.partial(index_config, wd)
    service = GraphService(make(), read_only=True, workers=2, worker_config=make)
    names = [name.title() for name in CHAIN] + ["Tobias Wren", "Ashcombe Mills", "Pellham"]
    with running(build_app(service)) as url:
        async def ask() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                return await asyncio.gather(*(
                    client.post(path, json={"question": f"What about {name}?", "mode": "local",
                                            "only_need_context": True, "top_k": 1})
                    for _ in range(4) for name in names for path in ("/query", "/retrieve")))

        replies = asyncio.run(ask())
        assert service.reader_processes is not None and all(n > 0 for n in service.reader_processes.answered())
        with httpx.Client(base_url=url, timeout=60) as client:
            for reply in replies:
                assert reply.status_code == 200, reply.text
                request = json.loads(reply.request.content)
                alone = client.post(reply.request.url.path, json=request)  # the same request on its own
                assert reply.content == alone.content
    assert len({r.content for r in replies}) >= len(names)  # a reply given to another request would show


def test_a_text_reply_is_encoded_as_json_encodes_it() -> None:
    """orjson writes a text as ``json.dumps`` (``ensure_ascii=False``) does, every escape
    included; other values are json's own."""
    texts = ["plain", "quote \" backslash \\ slash /", "".join(map(chr, range(32))) + "\x7f",
             "accents é, CJK 漢字, emoji 🙂, separators \u2028\u2029", ""]
    for text in texts:
        assert json_bytes(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")
    assert json_bytes({"score": 1e16, "n": [1, 2.5]}) == b'{"score":1e+16,"n":[1,2.5]}'
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate fails as it did with json alone
        json_bytes("half \ud800 a pair")
