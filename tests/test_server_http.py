"""The HTTP API, served by uvicorn on a free 127.0.0.1 port and driven with httpx: every endpoint,
streaming, the API-key and binding rules, size limits, and writes as background jobs that never
block a query."""
from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from graphrag.errors import ConfigurationError, LLMError
from graphrag.query_param import QueryParam
from graphrag.readers import known_suffixes
from graphrag.server.app import build_app
from graphrag.redaction import register_secret
from graphrag.server.errors import error_body
from graphrag.server.security import MAX_FAILURES, MIN_KEY_CHARS, check_binding
from graphrag.server.service import JOBS_DIR, GraphService
from helpers_files import zip_bomb_docx
from helpers_server import CHAIN, DOCS, build_index, index_config, running, unsized_body, wait_for_job
from mock_llm_server import MockLLMServer


@pytest.fixture(scope="module")
def llm() -> Iterator[MockLLMServer]:
    with MockLLMServer(stream_chunk_delay=0.02) as server:
        yield server


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, llm: MockLLMServer) -> Iterator[httpx.Client]:
    """The API over the three-document corpus; answers come from the mock LLM; inserts are LLM-free."""
    wd = tmp_path_factory.mktemp("served") / "wd"
    build_index(wd)
    service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="test-key"))
    with running(build_app(service, max_body_bytes=4096, max_upload_bytes=64 * 1024)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            yield client


def test_health_docs_and_openapi(api: httpx.Client) -> None:
    health = api.get("/health").json()
    assert health == {"status": "ok", "read_only": False, "documents": 3, "jobs": {"queued": 0, "running": 0}}
    docs = api.get("/docs")
    assert docs.status_code == 200 and "https://" not in docs.text  # Swagger UI from the package, no CDN
    for asset in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css", "/static/docs.js"):
        assert asset in docs.text and api.get(asset).status_code == 200
    schema = api.get("/openapi.json").json()
    for path in ("/documents", "/documents/files", "/documents/{doc_id}", "/jobs", "/jobs/{job_id}", "/query",
                 "/retrieve", "/graph/entity/{name}", "/graph/neighbors/{name}", "/graph/paths",
                 "/graph/subgraph", "/graph/search", "/graph/graph_search", "/graph/view", "/chunks/{chunk_id}",
                 "/reports/{report_id}", "/health", "/graph/labels", "/graph/popular", "/graph/merge",
                 "/graph/never-merge", "/graph/undo", "/v1/models", "/v1/chat/completions", "/api/chat",
                 "/api/generate", "/api/tags", "/api/show", "/api/version"):
        assert path in schema["paths"], path
    # Every QueryParam field is an option of POST /query, with its default.
    query_fields = schema["components"]["schemas"]["QueryRequest"]["properties"]
    assert {f.name for f in fields(QueryParam)} | {"question", "stream"} == set(query_fields)
    assert query_fields["top_k"]["default"] == QueryParam().top_k


def test_the_page_and_its_assets_are_served_offline(api: httpx.Client) -> None:
    page = api.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for asset in ("/static/app.js", "/static/markdown.js", "/static/graph.js", "/static/cytoscape.min.js",
                  "/static/style.css"):
        assert asset in page.text
        assert api.get(asset).status_code == 200
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    assert "<script>" not in page.text  # no inline script: the policy allows none


def test_the_upload_suffixes_are_the_readers(api: httpx.Client) -> None:
    """The page's file picker offers what GET /readers lists: the readers' own registry."""
    suffixes = api.get("/readers").json()["suffixes"]
    assert suffixes == known_suffixes() and {".pdf", ".docx", ".html", ".md", ".txt", ".json"} <= set(suffixes)


def test_the_vendored_graph_library_is_package_data_and_offline() -> None:
    """Cytoscape.js ships in the wheel (package data ``static/*``) with its licence, and names
    no address it could fetch (its only URLs are in its licence comments)."""
    import re
    import tomllib
    from importlib import resources

    static = resources.files("graphrag.server") / "static"
    library = (static / "cytoscape.min.js").read_text(encoding="utf-8")
    assert "Permission is hereby granted" in (static / "cytoscape.LICENSE.txt").read_text(encoding="utf-8")
    assert not re.search(r"fetch\(|XMLHttpRequest|WebSocket|sendBeacon|importScripts|new Worker", library)
    code = re.sub(r"/\*.*?\*/", "", library, flags=re.DOTALL)  # its comments: licences and credits
    assert re.findall(r"https?://", library) and not re.findall(r"https?://", code)
    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text("utf-8"))
    assert "static/*" in pyproject["tool"]["setuptools"]["package-data"]["graphrag.server"]


def test_documents_are_listed(api: httpx.Client) -> None:
    docs = api.get("/documents").json()
    assert sorted(d["source"] for d in docs if d["source"] in DOCS) == sorted(DOCS)
    assert all(d["id"].startswith("doc-") and d["chunks"] >= 1 for d in docs)


def test_query_answers_with_every_mode_and_options(api: httpx.Client) -> None:
    for mode in ("local", "global", "naive"):
        answer = api.post("/query", json={"question": "Who founded Brightwater Instruments?", "mode": mode})
        assert answer.status_code == 200 and answer.json()["answer"].strip()
    context = api.post("/query", json={"question": "Who founded Brightwater Instruments?", "mode": "local",
                                       "only_need_context": True, "top_k": 5}).json()["answer"]
    assert "MARGUERITE OLVANE" in context and "-----Entities-----" in context


def test_query_with_references_cites_passages_that_open(api: httpx.Client) -> None:
    result = api.post("/query", json={"question": "Where is Brightwater Instruments based?", "mode": "local",
                                      "with_references": True}).json()
    assert "[1]" in result["answer"] or "[2]" in result["answer"]
    assert result["references"]
    ref = result["references"][0]
    assert ref["number"] >= 1 and ref["chunk_id"] and ref["documents"][0]["source"] in DOCS
    chunk = api.get(f"/chunks/{ref['chunk_id']}").json()
    assert chunk["content"] in DOCS.values()
    assert api.get("/chunks/chunk-nope").status_code == 404


def sse(api: httpx.Client, body: dict) -> list[tuple[str, dict, float]]:
    """POST /query's server-sent events: (event name, data, arrival time), in order."""
    events, event = [], "message"
    with api.stream("POST", "/query", json={**body, "stream": True}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[6:]), time.monotonic()))
                event = "message"
    return events


def test_query_streams_server_sent_events(api: httpx.Client, llm: MockLLMServer) -> None:
    question = {"question": "What does Brightwater Instruments make?", "mode": "naive",
                "response_type": "One streamed paragraph"}
    events = sse(api, question)
    texts = [data["text"] for name, data, _ in events if name == "message"]
    arrivals = [at for name, _, at in events if name == "message"]
    assert [name for name, _, _ in events][-1] == "done" and len(texts) > 2
    assert arrivals[-1] - arrivals[0] > 0.02  # pieces arrived as written, not all at the end
    assert any(r.get("stream") for r in llm.chat_requests)
    # The streamed answer was cached whole: asked again, it is the same text in one piece.
    assert api.post("/query", json=question).json()["answer"] == "".join(texts)


def test_a_cited_answer_streams_then_its_references_come_as_an_event(api: httpx.Client) -> None:
    question = {"question": "Who founded Brightwater Instruments?", "mode": "local", "with_references": True,
                "response_type": "One cited streamed paragraph"}
    events = sse(api, question)
    names = [name for name, _, _ in events]
    texts = [data["text"] for name, data, _ in events if name == "message"]
    assert len(texts) > 2 and names[-2:] == ["references", "done"] and set(names[:-2]) == {"message"}
    assert events[len(texts) - 1][2] - events[0][2] > 0.02  # written in pieces, not all at the end
    references = events[-2][1]["references"]
    assert references and "[1]" in "".join(texts) and "References:" not in "".join(texts)
    # The same answer and references as the cited answer not streamed (now cached).
    assert api.post("/query", json=question).json() == {"answer": "".join(texts), "references": references}
    # Each reference's document is the stored one: its size and its chunks, the cited one among them.
    for ref in references:
        doc, = ref["documents"]
        assert doc["chars"] == len(DOCS[doc["source"]]) and ref["chunk_id"] in doc["chunk_ids"]
    # What no model writes streams too: the numbered context in one piece, every source referenced.
    context = sse(api, {**question, "only_need_context": True})
    assert [name for name, _, _ in context] == ["message", "references", "done"]
    assert "-----Sources-----" in context[0][1]["text"] and len(context[1][1]["references"]) >= len(references)


def test_retrieve_returns_records_with_their_sources(api: httpx.Client) -> None:
    found = api.post("/retrieve", json={"question": "Who founded Brightwater Instruments?", "mode": "local"}).json()
    assert found["mode"] == "local" and found["context"]
    assert any(e["name"] == "MARGUERITE OLVANE" for e in found["entities"])
    assert all(c["documents"] and c["documents"][0]["source"] in DOCS for c in found["chunks"])
    for chunk in found["chunks"]:  # each chunk's document as stored: its size and its chunks
        doc, = chunk["documents"]
        assert doc["chars"] == len(DOCS[doc["source"]]) and chunk["id"] in doc["chunk_ids"]


def test_graph_endpoints(api: httpx.Client) -> None:
    entity = api.get("/graph/entity/brightwater instruments").json()
    assert entity["name"] == "BRIGHTWATER INSTRUMENTS" and entity["documents"]
    missing = api.get("/graph/entity/Brightwater Instrument")
    assert missing.status_code == 404 and missing.json()["error"] == "EntityNotFound"
    assert "BRIGHTWATER INSTRUMENTS" in missing.json()["suggestions"]

    neighbors = api.get("/graph/neighbors/Kestrel Harbor", params={"depth": 1}).json()
    assert {"BRIGHTWATER INSTRUMENTS", "NORLAND"} <= {n["name"] for n in neighbors}
    assert all(n["distance"] == 1 and n["via"]["description"] for n in neighbors)

    paths = api.get("/graph/paths", params={"source": CHAIN[0], "target": CHAIN[-1]}).json()
    assert paths[0]["entities"] == CHAIN and len(paths[0]["hops"]) == 3

    sub = api.post("/graph/subgraph", json={"names": ["Kestrel Harbor"], "depth": 1}).json()
    assert "KESTREL HARBOR" in {e["name"] for e in sub["entities"]} and sub["relations"]

    drawn = api.get("/graph/view", params={"names": ["Kestrel Harbor", "Pellham"], "depth": 1})
    assert drawn.status_code == 200 and drawn.headers["content-type"].startswith("text/html")
    for name in ("KESTREL HARBOR", "NORLAND", "BRIGHTWATER INSTRUMENTS", "PELLHAM"):
        assert f'"name": "{name}"' in drawn.text  # the export renderer's embedded nodes
    assert api.get("/graph/view").status_code == 400  # names are required

    hits = api.get("/graph/search", params={"q": "Brightwater Instruments compasses", "top_k": 3}).json()
    assert 1 <= len(hits) <= 3 and all(h["score"] is not None for h in hits)
    assert "BRIGHTWATER INSTRUMENTS" in {h["name"] for h in hits}
    expanded = api.get("/graph/graph_search", params={"q": "Brightwater Instruments", "top_k": 2}).json()
    assert len(expanded) > len(hits[:2])  # the hits and entities around them


def test_errors_are_json_with_class_and_message_never_a_traceback(api: httpx.Client) -> None:
    cases = [
        (api.post("/query", json={"question": "x", "mode": "sideways"}), 400, "InvalidInputError"),
        (api.post("/query", json={"question": "x", "top_k": -1}), 400, "InvalidInputError"),
        (api.post("/query", json={"question": "x", "top_kk": 5}), 400, "InvalidInputError"),  # misspelt option
        (api.post("/query", content=b"{not json", headers={"content-type": "application/json"}), 400,
         "InvalidInputError"),
        (api.delete("/documents/doc-unknown"), 404, "DocumentNotFound"),
        (api.get("/jobs/nope"), 404, "HTTPError"),
        (api.get("/no/such/path"), 404, "HTTPError"),
        (api.post("/documents", json={}), 400, "InvalidInputError"),
    ]
    for response, status, error in cases:
        assert response.status_code == status, response.text
        if error:
            body = response.json()
            assert body["error"] == error and body["message"] and "Traceback" not in response.text


def test_error_bodies_hide_secrets_and_bugs() -> None:
    register_secret("sk-served-secret")
    body = error_body(LLMError("query", RuntimeError("bad key sk-served-secret"), 1))
    assert "sk-served-secret" not in body["message"] and "***" in body["message"]
    assert error_body(ZeroDivisionError("internal detail")) == {
        "error": "InternalError", "message": "internal error (the server's log has the details)"}


def test_oversized_bodies_are_refused(api: httpx.Client) -> None:
    big = api.post("/documents", json={"text": "word " * 2000})
    assert big.status_code == 413 and big.json()["error"] == "RequestTooLarge"

    streamed = api.post("/documents", content=unsized_body("text"), headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    upload = api.post("/documents/files", files={"files": ("big.txt", b"word " * 20000, "text/plain")})
    assert upload.status_code == 413  # uploads have their own, larger, limit
    assert api.get("/health").status_code == 200


def test_uploads_go_through_the_file_readers(api: httpx.Client) -> None:
    """An uploaded page loses its navigation and script, a Latin-1 file is decoded, and each
    keeps its file name as its source."""
    page = (b"<html><head><title>Harbour</title><script>var tracker = 1;</script></head><body>"
            b"<nav>Home | About | Contact</nav><main><h1>Harbour</h1>"
            b"<p>Wenna Tull keeps the Kestrel lighthouse in Dunmere.</p></main></body></html>")
    latin = "Caf\u00e9 Morrow serves the harbour pilots of Dunmere.".encode("latin-1")
    upload = api.post("/documents/files", files=[("files", ("harbour.html", page, "text/html")),
                                                 ("files", ("cafe.txt", latin, "text/plain"))])
    assert upload.status_code == 202
    assert wait_for_job(api, upload.json()["id"])["stats"]["documents_inserted"] == 2
    assert {"harbour.html", "cafe.txt"} <= {d["source"] for d in api.get("/documents").json()}
    context = api.post("/query", json={"question": "Who keeps the Kestrel lighthouse?", "mode": "naive",
                                       "only_need_context": True}).json()["answer"]
    assert "Wenna Tull" in context and "tracker" not in context and "Contact" not in context
    assert "Caf\u00e9 Morrow" in api.post("/query", json={"question": "Who serves the harbour pilots?", "mode": "naive",
                                                          "only_need_context": True}).json()["answer"]


def test_queued_slow_uploads_hold_up_no_query(tmp_path: Path) -> None:
    """Uploads that each take a while to read, more of them than the loop's default threads:
    they wait for the reading process one after another while a drawing and a query (whose
    embedding runs in a thread) answer at once."""
    import os

    wd = tmp_path / "wd"
    build_index(wd)
    slow = b"<div>" * 40_000  # markup the HTML reader parses for a fraction of a second, to no text
    count = min(32, (os.cpu_count() or 1) + 4) + 10  # asyncio's default executor size, and more
    finished: list[float] = []
    with running(build_app(GraphService(index_config(wd)))) as url:
        def upload(n: int) -> None:
            httpx.post(url + "/documents/files", files={"files": (f"slow-{n}.html", slow, "text/html")}, timeout=120)
            finished.append(time.monotonic())

        uploads = [threading.Thread(target=upload, args=(n,)) for n in range(count)]
        for thread in uploads:
            thread.start()
        time.sleep(1.5)  # every upload received and waiting for its read
        done_before = len(finished)
        drawn = httpx.get(url + "/graph/view", params={"names": "Norland"}, timeout=120)
        asked = httpx.post(url + "/retrieve", json={"question": "Where is Brightwater Instruments based?"}, timeout=120)
        answered, done_by_then = time.monotonic(), len(finished)
        for thread in uploads:
            thread.join()
    assert drawn.status_code == 200 and asked.status_code == 200
    # Without their own thread, the reads hold every default thread until all but a few are done.
    assert done_by_then - done_before <= 2 and answered < max(finished), (done_before, done_by_then, count)


def test_insert_upload_and_delete_run_as_jobs(api: httpx.Client) -> None:
    job = api.post("/documents", json={"text": "Ilse Varga founded Quillmoor Press in Dunmere.",
                                       "source": "press.txt"})
    assert job.status_code == 202 and job.json()["status"] in ("queued", "running")
    done = wait_for_job(api, job.json()["id"])
    assert done["status"] == "done" and done["stats"]["documents_inserted"] == 1
    assert done["started"] <= done["finished"] and done["progress"]["stage"] == "Community reports"
    assert api.get("/graph/entity/Quillmoor Press").status_code == 200  # visible once done

    upload = api.post("/documents/files", files=[
        ("files", ("mill.md", "Orrin Hale runs Fenwick Mill in Dunmere.".encode(), "text/markdown"))])
    assert wait_for_job(api, upload.json()["id"])["status"] == "done"
    sources = {d["source"]: d["id"] for d in api.get("/documents").json()}
    assert {"press.txt", "mill.md"} <= set(sources)
    bad = api.post("/documents/files", files={"files": ("bin.txt", bytes(range(256)) * 4, "text/plain")})
    assert bad.status_code == 400 and bad.json()["message"].startswith("bin.txt: ")
    bomb = api.post("/documents/files", files={"files": ("bomb.docx", zip_bomb_docx(text_bytes=4 << 20),
                                                         "application/octet-stream")})
    assert bomb.status_code == 400 and "bomb.docx: word/document.xml unpacks to" in bomb.json()["message"]
    deep = api.post("/documents/files", files={"files": ("deep.json", b"[" * 20_000 + b"]" * 20_000, "application/json")})
    assert deep.status_code == 400 and deep.json()["message"] == "deep.json: it is nested deeper than the reader can follow"

    for source in ("press.txt", "mill.md"):
        deleted = api.delete(f"/documents/{sources[source]}")
        assert deleted.status_code == 202
        assert wait_for_job(api, deleted.json()["id"])["stats"]["documents_removed"] == 1
    assert {"press.txt", "mill.md"}.isdisjoint(d["source"] for d in api.get("/documents").json())
    assert api.get("/graph/entity/Quillmoor Press").status_code == 404
    jobs = api.get("/jobs").json()
    assert [j["kind"] for j in jobs][-4:] == ["insert", "insert", "delete", "delete"]


def test_two_insert_jobs_run_one_after_the_other(api: httpx.Client) -> None:
    first = api.post("/documents", json={"texts": ["Petra Lund sails the Gullwing.", "Oskar Brandt repairs nets."],
                                         "sources": ["a1.txt", "a2.txt"]}).json()
    second = api.post("/documents", json={"text": "Mira Sol paints the Gullwing.", "source": "a3.txt"}).json()
    one, two = wait_for_job(api, first["id"]), wait_for_job(api, second["id"])
    assert one["status"] == two["status"] == "done"
    assert one["stats"]["documents_inserted"] == 2 and two["stats"]["documents_inserted"] == 1
    assert one["finished"] <= two["started"]
    ids = [d["id"] for d in api.get("/documents").json() if d["source"] in ("a1.txt", "a2.txt", "a3.txt")]
    for doc_id in ids:
        wait_for_job(api, api.delete(f"/documents/{doc_id}").json()["id"])


def test_queries_answer_while_an_insert_runs_and_see_it_once_committed(tmp_path: Path) -> None:
    """The insert's LLM answers take 0.3 s each; queries meanwhile read the last commit."""
    wd = tmp_path / "wd"
    build_index(wd)
    with MockLLMServer(latency=0.3) as slow_llm:
        config = index_config(wd, llm_base_url=slow_llm.base_url, llm_api_key="k", extraction="llm")
        with running(build_app(GraphService(config))) as url, httpx.Client(base_url=url, timeout=60) as client:
            job = client.post("/documents", json={"text": "Ilse Varga founded Quillmoor Press in Dunmere. "
                                                          "Quillmoor Press prints maps.", "source": "press.txt"}).json()
            latencies, during = [], 0
            while True:
                started = time.monotonic()
                answer = client.post("/query", json={"question": "Who founded Quillmoor Press?", "mode": "local",
                                                     "only_need_context": True})
                latencies.append(time.monotonic() - started)
                sources = {d["source"] for d in client.get("/documents").json() if d["status"] == "indexed"}
                status = client.get(f"/jobs/{job['id']}").json()["status"]  # after: not done -> not committed
                if status == "done":
                    break
                assert answer.status_code == 200 and "QUILLMOOR" not in answer.json()["answer"]
                assert "press.txt" not in sources
                during += status == "running"
            # Answered throughout the insert, typically without waiting for any of its 0.3 s calls.
            assert during >= 3 and statistics.median(latencies) < 0.1
            after = client.post("/query", json={"question": "Who founded Quillmoor Press?", "mode": "local",
                                                "only_need_context": True}).json()["answer"]
            assert "QUILLMOOR PRESS" in after


def test_a_commit_by_another_process_is_seen(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd)))) as url, httpx.Client(base_url=url) as client:
        assert len(client.get("/documents").json()) == 3
        from graphrag import GraphRAG

        def insert_elsewhere() -> None:
            with GraphRAG(index_config(wd)) as other:
                other.insert("Ilse Varga founded Quillmoor Press.")

        writer = threading.Thread(target=insert_elsewhere)
        writer.start()
        deadline = time.monotonic() + 30
        while len(client.get("/documents").json()) != 4:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        writer.join()  # its close (journals folded) ends within the test


KEY = "s3cret-key-\u00e9t\u00e9-0123456789"  # any UTF-8, at least MIN_KEY_CHARS


def test_api_key_is_required_on_every_request_when_set(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    utf8 = KEY.encode("utf-8")
    with running(build_app(GraphService(index_config(wd)), api_key=KEY)) as url:
        for path in ("/health", "/documents", "/jobs", "/graph/view?names=Norland"):
            refused = httpx.get(url + path)
            assert refused.status_code == 401 and refused.json()["error"] == "Unauthorized"
            assert refused.headers["www-authenticate"].startswith("Bearer")  # no Basic: a browser never resends it
        # The page's shell, its files, the docs and liveness need no key and hold nothing of the index.
        for path in ("/", "/static/app.js", "/docs", "/openapi.json", "/livez"):
            assert httpx.get(url + path).status_code == 200, path
        assert httpx.get(url + "/livez").json() == {"status": "ok"}
        assert httpx.get(url + "/health", headers={"Authorization": b"Bearer wrong"}).status_code == 401
        assert httpx.get(url + "/health", headers={"Authorization": b"Bearer " + utf8}).status_code == 200
        assert httpx.get(url + "/health", headers={"X-API-Key": utf8}).status_code == 200
        assert httpx.get(url + "/health", auth=("anyone", KEY)).status_code == 401  # Basic is not taken
        posted = httpx.post(url + "/query", json={"question": "Who founded Brightwater Instruments?",
                                                  "only_need_context": True}, headers={"X-API-Key": utf8})
        assert posted.status_code == 200


def test_failed_keys_are_logged_without_the_key_and_throttled(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd)), api_key=KEY)) as url, \
            caplog.at_level("WARNING", logger="graphrag.server.security"):
        statuses = [httpx.get(url + "/documents", headers={"X-API-Key": f"guess-{n}-wrong-key"}).status_code
                    for n in range(MAX_FAILURES + 3)]
        assert statuses[:MAX_FAILURES] == [401] * MAX_FAILURES and set(statuses[MAX_FAILURES:]) == {429}
        # Locked before any comparison: even the right key waits until the failures age.
        locked = httpx.get(url + "/documents", headers={"X-API-Key": KEY.encode()})
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) >= 1
    lines = [r.getMessage() for r in caplog.records]
    assert any("a wrong API key" in line and "127.0.0.1" in line for line in lines)
    assert not any("guess-" in line for line in lines)


def test_a_forwarded_for_header_does_not_escape_the_throttle(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A client naming a new address in X-Forwarded-For with each guess is still one client
    (its connection's address) unless FORWARDED_ALLOW_IPS names a proxy."""
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd)), api_key=KEY)) as url, \
            caplog.at_level("WARNING", logger="graphrag.server.security"):
        statuses = [httpx.get(url + "/documents", headers={"X-API-Key": f"guess-{n}-wrong-key",
                                                           "X-Forwarded-For": f"203.0.113.{n}"}).status_code
                    for n in range(MAX_FAILURES + 2)]
    assert statuses[MAX_FAILURES:] == [429, 429]
    assert not any("203.0.113." in r.getMessage() for r in caplog.records)  # the logged address is the real one


def test_keys_too_short_to_resist_guessing_are_refused(tmp_path: Path) -> None:
    for short in ("k", "x" * (MIN_KEY_CHARS - 1)):
        with pytest.raises(ConfigurationError, match="at least"):
            check_binding("127.0.0.1", short)
        with pytest.raises(ConfigurationError, match="at least"):
            build_app(GraphService(index_config(tmp_path)), api_key=short)


def test_binding_beyond_loopback_needs_a_key(tmp_path: Path) -> None:
    check_binding("127.0.0.1", None)
    check_binding("::1", None)
    check_binding("localhost", None)
    check_binding("0.0.0.0", KEY, ["graphs.example.org"])
    with pytest.raises(ConfigurationError, match="--allowed-host"):  # the Host check needs the names
        check_binding("0.0.0.0", KEY)
    with pytest.raises(ConfigurationError, match="without an API key"):
        check_binding("0.0.0.0", None)
    with pytest.raises(ConfigurationError):
        check_binding("192.168.1.20", "")
    for command in ("serve", "mcp"):
        done = subprocess.run([sys.executable, "-m", "graphrag.cli", command, "--working-dir", str(tmp_path),
                               "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "GRAPHRAG_EMBEDDING": "hash"})
        assert done.returncode == 2 and "without an API key" in done.stderr and "Traceback" not in done.stderr


# Every endpoint that takes a body or changes the index, with a body it would accept.
STATE_CHANGING = [
    ("POST", "/documents", {"json": {"text": "Evil Corp owns Kestrel Harbor.", "source": "evil.txt"}}),
    ("POST", "/documents/files", {"files": {"files": ("evil.txt", b"Evil Corp owns Kestrel Harbor.", "text/plain")}}),
    ("DELETE", "/documents/{doc_id}", {}),
    ("POST", "/query", {"json": {"question": "Who owns Kestrel Harbor?", "only_need_context": True}}),
    ("POST", "/retrieve", {"json": {"question": "Who owns Kestrel Harbor?"}}),
    ("POST", "/graph/subgraph", {"json": {"names": ["Kestrel Harbor"]}}),
    ("POST", "/graph/merge", {"json": {"names": ["Pellham"], "into": "Kestrel Harbor"}}),
    ("POST", "/graph/never-merge", {"json": {"names": ["Pellham", "Kestrel Harbor"]}}),
    ("POST", "/graph/undo", {"json": {"names": ["Pellham"]}}),
    ("POST", "/v1/chat/completions", {"json": {"model": "graphrag-local",
                                               "messages": [{"role": "user", "content": "Who owns Kestrel Harbor?"}]}}),
    ("POST", "/api/chat", {"json": {"model": "graphrag-local", "stream": False,
                                    "messages": [{"role": "user", "content": "Who owns Kestrel Harbor?"}]}}),
    ("POST", "/api/generate", {"json": {"model": "graphrag-local", "prompt": "Who owns Kestrel Harbor?"}}),
    ("POST", "/api/show", {"json": {"model": "graphrag-local"}}),

    ("POST", "/documents/reprocess", {"json": {}}),
    ("POST", "/documents/scan", {}),
    ("POST", "/jobs/{job_id}/cancel", {}),
]


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_cross_origin_and_foreign_host_requests_are_refused(tmp_path: Path, keyed: bool) -> None:
    """A page on another site (Origin, Sec-Fetch-Site) or a rebound DNS name (Host) reaches no
    endpoint, with or without the key; the server's own origin and non-browser clients do."""
    wd = tmp_path / "wd"
    build_index(wd)
    key = {"X-API-Key": KEY.encode()} if keyed else {}
    with running(build_app(GraphService(index_config(wd)), api_key=KEY if keyed else None)) as url:
        port = url.rsplit(":", 1)[1]
        doc_id = httpx.get(url + "/documents", headers=key).json()[0]["id"]
        schema = httpx.get(url + "/openapi.json").json()["paths"]
        assert {(m.upper(), p) for p, ops in schema.items() for m in ops if m in ("post", "delete")} == \
            {(m, p) for m, p, _ in STATE_CHANGING}  # the list covers every write
        hostile = [({"Origin": "https://evil.example"}, 403), ({"Origin": "null"}, 403),
                   ({"Origin": f"http://localhost:{int(port) + 1}"}, 403),  # same site, another origin
                   ({"Sec-Fetch-Site": "cross-site"}, 403), ({"Sec-Fetch-Site": "same-site"}, 403),
                   ({"Origin": "http://[::1"}, 403), ({"Origin": "file://"}, 403),  # malformed, hostless
                   ({"Host": f"evil.example:{port}"}, 421), ({"Host": f"evil.example:{port}", **key}, 421),
                   ({"Host": f"evil.example@127.0.0.1:{port}"}, 421), ({"Host": f"127.0.0.1:{port}/x"}, 421)]
        for method, path, body in STATE_CHANGING:
            for headers, status in hostile:
                refused = httpx.request(method, url + path.format(doc_id=doc_id, job_id='none'), headers={**key, **headers}, **body)
                assert refused.status_code == status, (method, path, headers, refused.text)
                assert refused.json()["error"] in ("CrossOriginRequest", "MisdirectedRequest")
        assert httpx.get(url + "/documents", headers={**key, "Host": f"evil.example:{port}"}).status_code == 421
        assert httpx.get(url + "/documents", headers={**key, "Origin": "https://evil.example"}).status_code == 403
        assert len(httpx.get(url + "/documents", headers=key).json()) == 3  # nothing got through
        # The page's own origin, and a client that sends no Origin, write as before.
        for headers in ({"Origin": url, "Sec-Fetch-Site": "same-origin"}, {"Host": f"localhost:{port}"}, {}):
            accepted = httpx.post(url + "/query", headers={**key, **headers},
                                  json={"question": "Who founded Brightwater Instruments?", "only_need_context": True})
            assert accepted.status_code == 200, (headers, accepted.text)


def test_security_headers_on_every_response(api: httpx.Client) -> None:
    for path in ("/", "/documents", "/graph/view?names=Norland", "/docs", "/no/such/path", "/livez"):
        headers = api.get(path).headers
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self' 'sha256-" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"


def test_a_read_only_server_has_no_write_endpoint(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd), read_only=True))) as url:
        paths = httpx.get(url + "/openapi.json").json()["paths"]
        assert "/documents/files" not in paths and "post" not in paths["/documents"]
        assert not any("delete" in ops for ops in paths.values())
        for method, path, body in STATE_CHANGING[:3]:
            assert httpx.request(method, url + path.format(doc_id="doc-x"), **body).status_code in (404, 405)
        assert httpx.get(url + "/health").json()["read_only"] is True


@pytest.mark.parametrize("how", ["refused", "silent"])
def test_health_answers_within_a_second_when_a_store_is_down(tmp_path: Path, how: str) -> None:
    """The documents' store is a PostgreSQL that refuses connections, or one that accepts them
    and never answers (which would hold a connection for its whole connect timeout)."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # connections complete in the kernel's backlog; nothing ever answers
        port = 1 if how == "refused" else silent.getsockname()[1]
        config = index_config(tmp_path / "wd", kv_storage="postgres",
                              storage_options={"dsn": f"postgresql://graphrag:pw-secret-77@127.0.0.1:{port}/graphrag"})
        with running(build_app(GraphService(config))) as url:
            assert httpx.get(url + "/livez").json() == {"status": "ok"}
            started = time.monotonic()
            health = httpx.get(url + "/health")
            assert time.monotonic() - started < 1.0
            assert health.status_code == 503 and health.json()["status"] == "unavailable"
            assert set(health.json()["stores"]) == {"kv"} and "pw-secret-77" not in health.text


@pytest.mark.parametrize("kind", ["graph", "vector"])
def test_health_names_a_graph_or_vector_server_that_is_down(tmp_path: Path, kind: str) -> None:
    """/health asks every store on a server, not only the documents': a Bolt graph or a Milvus
    that refuses connections is named, within the second."""
    wd = tmp_path / "wd"
    build_index(wd)
    down = {"graph": dict(graph_storage="neo4j", storage_options={"neo4j_uri": "bolt://127.0.0.1:1"}),
            "vector": dict(vector_storage="milvus", storage_options={"milvus_uri": "http://127.0.0.1:1"})}[kind]
    with running(build_app(GraphService(index_config(wd, **down)))) as url:
        started = time.monotonic()
        health = httpx.get(url + "/health")
        assert time.monotonic() - started < 1.0
        assert health.status_code == 503 and set(health.json()["stores"]) == {kind}


def test_a_vector_server_that_never_answers_stalls_no_other_request(tmp_path: Path) -> None:
    """Milvus at an address that accepts connections and never answers: a search waits for the
    client's connect timeout, off the event loop, while liveness and health (503, naming it)
    answer at once."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))  # refused while the service opens, silent once it listens
        config = index_config(tmp_path / "wd", vector_storage="milvus",
                              storage_options={"milvus_uri": f"http://127.0.0.1:{silent.getsockname()[1]}"})
        service = GraphService(config)
        silent.listen(16)
        with running(build_app(service)) as url:
            search = threading.Thread(target=httpx.get, args=(url + "/graph/search",),
                                      kwargs={"params": {"q": "harbour"}, "timeout": 60})
            search.start()
            time.sleep(0.5)  # the search is connecting
            started = time.monotonic()
            health = httpx.get(url + "/health")
            assert httpx.get(url + "/livez").status_code == 200 and health.status_code == 503
            assert set(health.json()["stores"]) == {"vector"}  # named, not waited for
            assert time.monotonic() - started < 1.0 and search.is_alive()
            search.join()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_jobs_outlive_the_server(tmp_path: Path, stop: signal.Signals) -> None:
    """`graphrag serve` stopped while an insert job runs and another waits: started again, it
    reports the first as interrupted, runs it again and then the queued one."""
    from helpers_server import free_port

    wd, port = tmp_path / "wd", free_port()
    url = f"http://127.0.0.1:{port}"
    with MockLLMServer(latency=0.3) as slow_llm:
        env = {"PATH": "/usr/bin:/bin", "GRAPHRAG_EMBEDDING": "hash", "OPENAI_BASE_URL": slow_llm.base_url,
               "OPENAI_API_KEY": "k"}

        def serve() -> subprocess.Popen:
            process = subprocess.Popen([sys.executable, "-m", "graphrag.cli", "serve", "--working-dir", str(wd),
                                        "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + "/livez").status_code == 200:
                        return process
                except httpx.ConnectError:
                    assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                    time.sleep(0.1)

        process = serve()
        try:
            first = httpx.post(url + "/documents", json={"text": "Ilse Varga founded Quillmoor Press in Dunmere. "
                                                                 "Quillmoor Press prints maps.", "source": "press.txt"})
            second = httpx.post(url + "/documents", json={"text": "Orrin Hale runs Fenwick Mill.",
                                                          "source": "mill.txt"})
            first_id, second_id = first.json()["id"], second.json()["id"]
            deadline = time.monotonic() + 30
            while httpx.get(f"{url}/jobs/{first_id}").json()["status"] != "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)  # some of its LLM calls answered
            process.send_signal(stop)
            process.wait(timeout=30)
            assert (wd / JOBS_DIR / f"{first_id}.json").exists()  # its request, to run it again

            process = serve()
            with httpx.Client(base_url=url, timeout=60) as client:
                jobs = {j["id"]: j for j in client.get("/jobs").json()}
                assert jobs[first_id]["interrupted"] is not None and jobs[second_id]["interrupted"] is None
                assert [jobs[first_id]["status"], jobs[second_id]["status"]] != ["done", "done"]
                one, two = wait_for_job(client, first_id), wait_for_job(client, second_id)
                assert one["status"] == two["status"] == "done" and one["finished"] <= two["started"]
                assert {"press.txt", "mill.txt"} <= {d["source"] for d in client.get("/documents").json()}
                assert not list((wd / JOBS_DIR).glob("*[0-9a-f].json"))  # finished: their requests are gone
        finally:
            process.terminate()
            process.wait(timeout=30)


def test_health_is_ok_with_every_store_on_a_live_server(tmp_path: Path, postgres_options: dict) -> None:
    config = index_config(tmp_path / "wd", kv_storage="postgres", vector_storage="pgvector",
                          graph_storage="postgres", storage_options=postgres_options)
    with running(build_app(GraphService(config))) as url:
        health = httpx.get(url + "/health")
        assert health.status_code == 200 and health.json()["documents"] == 0


def test_messages_quoting_what_a_client_sent_are_capped(api: httpx.Client) -> None:
    """An unknown id, model or entity of many kilobytes is named in the 404, cut short."""
    from graphrag.server.errors import MAX_MESSAGE_CHARS

    long = "x" * 20_000
    for answer in (api.delete(f"/documents/{long}"), api.get(f"/v1/models/graphrag-{long}"),
                   api.get(f"/graph/entity/{long}")):
        assert answer.status_code in (400, 404), answer.text
        message = answer.json()["message"]
        assert len(message) <= MAX_MESSAGE_CHARS + 40 and "more characters" in message


def test_a_jobs_description_quoting_a_huge_name_is_capped(tmp_path: Path) -> None:
    """A job's description names what it works on (sources, ids): kilobytes of a client's
    name are not repeated in every listing of the jobs."""
    from graphrag.server.errors import MAX_MESSAGE_CHARS
    from graphrag.server.jobs import JobQueue

    async def run(request: dict) -> dict:
        return {}

    queue = JobQueue(run, state_dir=str(tmp_path))
    job = queue.submit("insert", "insert 1 document(s): " + "n" * 30_000, {"op": "insert", "parts": []})
    assert len(job.description) <= MAX_MESSAGE_CHARS + 40 and job.description.startswith("insert 1 document(s): n")
