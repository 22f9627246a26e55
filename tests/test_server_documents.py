"""The document status pipeline over real uvicorn: every document queued, processing, indexed,
failed (with why) or cancelled, kept in the working dir across restarts; paging, filtering and
search; reprocess, cancel and the input folder's scan; `graphrag docs` showing the same."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from graphrag import GraphRAG
from graphrag.server.app import build_app
from graphrag.server.doc_status import STATUS_DIR, DocumentStatus, read_statuses
from graphrag.server.input_folder import OUTSIDE
from graphrag.server.service import GraphService
from helpers_server import DOCS, build_index, index_config, running, wait_for_job
from mock_llm_server import Fault, MockLLMServer

NEW_TEXT = "Ilse Varga founded Quillmoor Press in Dunmere. Quillmoor Press prints maps."
OTHER_TEXT = "Bram Tolliver founded Ashgrove Forge in Cindermoor. Ashgrove Forge casts bells."


@pytest.fixture
def llm() -> Iterator[MockLLMServer]:
    with MockLLMServer() as server:
        yield server


def _llm_config(wd: Path, llm: MockLLMServer) -> Any:
    return index_config(wd, llm_base_url=llm.base_url, llm_api_key="k", extraction="llm")


def _documents(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    listed = client.get("/documents", params=params)
    assert listed.status_code == 200, listed.text
    return listed.json()


def _wait_until_running(client: httpx.Client, job_id: str) -> None:
    deadline = time.monotonic() + 30
    while client.get(f"/jobs/{job_id}").json()["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_documents_are_listed_with_status_a_page_at_a_time(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(index_config(wd)))) as url, httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/documents", json={"texts": [NEW_TEXT, OTHER_TEXT], "sources": ["Press.txt", "forge.txt"]})
        assert wait_for_job(client, job.json()["id"])["status"] == "done"
        listed = client.get("/documents")
        docs = listed.json()
        assert listed.headers["X-Total-Count"] == "5" and len(docs) == 5
        for d in docs:
            assert d["status"] == "indexed" and d["progress"] is None and d["error"] is None
            assert d["failed_chunks"] == 0 and d["chunks"] >= 1 and d["chars"] > 0
        # The served documents' time is known; those indexed before the server have none.
        assert {d["source"] for d in docs if d["updated"]} == {"Press.txt", "forge.txt"}
        assert all(d["updated"] is None for d in docs if d["source"] in DOCS)
        # Paging: the pages together are the list, in its order; the total stays.
        pages = [client.get("/documents", params={"offset": o, "limit": 2}) for o in (0, 2, 4)]
        assert [d for p in pages for d in p.json()] == docs
        assert all(p.headers["X-Total-Count"] == "5" for p in pages)
        # Search by source (any case), filter by status.
        found = client.get("/documents", params={"q": "PRESS"})
        assert [d["source"] for d in found.json()] == ["Press.txt"] and found.headers["X-Total-Count"] == "1"
        assert len(_documents(client, status="indexed")) == 5 and _documents(client, status="failed") == []
        for bad in ({"status": "done"}, {"limit": 1001}, {"limit": 0}, {"offset": -1}):
            assert client.get("/documents", params=bad).status_code == 400, bad


def test_a_failed_insert_is_kept_with_why_and_reprocessed(tmp_path: Path, llm: MockLLMServer) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    with running(build_app(GraphService(_llm_config(wd, llm)))) as url, httpx.Client(base_url=url, timeout=60) as client:
        llm.inject(*[Fault.status(401)] * 50)  # the model refuses the key: the insert fails
        job = client.post("/documents/files", files={"files": ("press.md", NEW_TEXT.encode(), "text/markdown")})
        assert wait_for_job(client, job.json()["id"])["status"] == "failed"
        failed = _documents(client, status="failed")
        assert len(failed) == 1 and failed[0]["source"] == "press.md"
        assert "401" in failed[0]["error"] and failed[0]["updated"] and failed[0]["chunks"] is None
        # The CLI reads the same statuses from the working dir.
        shown = subprocess.run([sys.executable, "-m", "graphrag.cli", "docs", "-w", str(wd), "--status", "failed",
                                "--json"], capture_output=True, text=True, env={**os.environ, "GRAPHRAG_EMBEDDING": "hash"})
        assert shown.returncode == 0, shown.stderr
        assert [(d["id"], d["status"], d["error"]) for d in json.loads(shown.stdout)] == \
            [(failed[0]["id"], "failed", failed[0]["error"])]
        table = subprocess.run([sys.executable, "-m", "graphrag.cli", "docs", "-w", str(wd)], capture_output=True,
                               text=True, env={**os.environ, "GRAPHRAG_EMBEDDING": "hash"}).stdout
        assert "failed" in table and "press.md" in table and "401" in table

        assert client.post("/documents/reprocess", json={"ids": ["doc-unknown"]}).status_code == 400
        llm.reset()
        again = client.post("/documents/reprocess")  # no ids: every failed one
        assert again.status_code == 202 and again.json()["kind"] == "reprocess"
        assert wait_for_job(client, again.json()["id"])["status"] == "done"
        assert _documents(client, status="failed") == []
        indexed = _documents(client, q="press.md")
        assert [(d["id"], d["status"], d["error"]) for d in indexed] == [(failed[0]["id"], "indexed", None)]
        assert client.post("/documents/reprocess").status_code == 400  # nothing failed now


def test_cancelled_work_leaves_no_partial_document(tmp_path: Path, llm: MockLLMServer) -> None:
    """A running insert cancelled mid-extraction and a queued one: both ``cancelled``, the index
    as it was (the write's transaction never committed), and the writer still writes."""
    wd = tmp_path / "wd"
    build_index(wd)
    llm.latency = 0.3
    with running(build_app(GraphService(_llm_config(wd, llm)))) as url, httpx.Client(base_url=url, timeout=60) as client:
        running_job = client.post("/documents", json={"text": NEW_TEXT, "source": "press.txt"}).json()
        queued_job = client.post("/documents", json={"text": OTHER_TEXT, "source": "forge.txt"}).json()
        _wait_until_running(client, running_job["id"])
        deadline = time.monotonic() + 30
        while not (processing := _documents(client, status="processing"))[0]["stage"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert [d["source"] for d in processing] == ["press.txt"]
        assert processing[0]["stage"] == "Extracting entities" and 0 <= processing[0]["progress"] < 1
        assert [d["source"] for d in _documents(client, status="queued")] == ["forge.txt"]
        cancelled = client.post(f"/jobs/{queued_job['id']}/cancel").json()
        assert cancelled["status"] == "cancelled" and cancelled["started"] is None
        cancelled = client.post(f"/jobs/{running_job['id']}/cancel").json()
        assert cancelled["status"] == "cancelled" and cancelled["started"] is not None
        assert client.post("/jobs/nope/cancel").status_code == 404
        assert {d["source"]: d["error"] for d in _documents(client, status="cancelled")} == \
            {"press.txt": "cancelled by request", "forge.txt": "cancelled by request"}
        assert {d["source"] for d in _documents(client, status="indexed")} == set(DOCS)
        context = client.post("/query", json={"question": "Who founded Quillmoor Press?", "mode": "local",
                                              "only_need_context": True}).json()["answer"]
        assert "QUILLMOOR" not in context
        # On disk too: a fresh engine over the working dir finds only the three documents.
        assert {d["source"] for d in GraphRAG(index_config(wd)).list_documents()} == set(DOCS)
        llm.latency = 0.0
        press_id = next(d["id"] for d in _documents(client, q="press"))
        again = client.post("/documents/reprocess", json={"ids": [press_id]}).json()
        assert wait_for_job(client, again["id"])["status"] == "done"
        assert {d["source"]: d["status"] for d in _documents(client)} == \
            {**{s: "indexed" for s in DOCS}, "press.txt": "indexed", "forge.txt": "cancelled"}


def test_a_document_processing_when_the_server_stopped_is_requeued(tmp_path: Path, llm: MockLLMServer) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    llm.latency = 0.3
    with running(build_app(GraphService(_llm_config(wd, llm)))) as url, httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/documents", json={"text": NEW_TEXT, "source": "press.txt"}).json()
        _wait_until_running(client, job["id"])
    # The server stopped mid-job: the working dir still says processing.
    kept = read_statuses(str(wd))
    assert [e["status"] for e in kept.values()] == ["processing"]
    llm.latency = 0.0
    service = GraphService(_llm_config(wd, llm))  # its job queue runs the job again
    assert [(e["status"], e["error"].split(":")[0]) for e in read_statuses(str(wd)).values()] == [("queued", "requeued")]
    with running(build_app(service)) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert wait_for_job(client, job["id"])["status"] == "done"
        press = _documents(client, q="press")
        assert [(d["status"], d["error"]) for d in press] == [("indexed", None)]


def test_a_document_whose_job_was_lost_is_failed_as_interrupted(tmp_path: Path) -> None:
    status = DocumentStatus(str(tmp_path))
    status.queued("job-a", [("doc-1", "one.txt")])
    status.processing("job-a")
    status.queued("job-b", [("doc-2", "two.txt")])
    DocumentStatus(str(tmp_path)).recover(["job-b"])  # the queue kept job-b only
    kept = read_statuses(str(tmp_path))
    assert kept["doc-1"]["status"] == "failed" and kept["doc-1"]["error"].startswith("interrupted")
    assert kept["doc-2"]["status"] == "queued" and kept["doc-2"]["error"].startswith("requeued")
    assert os.path.isdir(tmp_path / STATUS_DIR)


def test_scan_indexes_the_input_folder_s_new_and_changed_files(tmp_path: Path) -> None:
    wd, folder = tmp_path / "wd", tmp_path / "inbox"
    folder.mkdir()
    (folder / "press.txt").write_text(NEW_TEXT, encoding="utf-8")
    (folder / "forge.md").write_text(OTHER_TEXT, encoding="utf-8")
    (folder / "broken.docx").write_bytes(b"not a zip at all")
    with running(build_app(GraphService(index_config(wd), input_dir=str(folder)))) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/documents/scan")
        assert job.status_code == 202 and job.json()["kind"] == "scan"
        assert wait_for_job(client, job.json()["id"])["status"] == "done"
        docs = {os.path.basename(d["source"]): d for d in _documents(client)}
        assert {n: d["status"] for n, d in docs.items()} == \
            {"press.txt": "indexed", "forge.md": "indexed", "broken.docx": "failed"}
        assert docs["broken.docx"]["error"] and docs["broken.docx"]["id"].startswith("file:")
        # Unchanged files are not read again; an edited one is, as an update.
        again = client.post("/documents/scan").json()
        assert wait_for_job(client, again["id"])["stats"]["indexed"] == []
        (folder / "press.txt").write_text(NEW_TEXT + " Quillmoor Press also binds atlases.", encoding="utf-8")
        edited = client.post("/documents/scan").json()
        stats = wait_for_job(client, edited["id"])["stats"]
        assert [os.path.basename(p) for p in stats["updated"]] == ["press.txt"]
        press = [d for d in _documents(client, q="press.txt")]
        assert len(press) == 1 and press[0]["chars"] > len(NEW_TEXT)
    # Without an input folder there is nothing to scan.
    with running(build_app(GraphService(index_config(wd)))) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.post("/documents/scan").status_code == 400


def test_scan_reads_only_the_input_folder_s_own_files_with_text_names(tmp_path: Path) -> None:
    """Whoever may drop files into the input folder cannot have the server index a file
    elsewhere on its disk through a symlink (it fails as outside the folder), and a
    file whose name is not UTF-8 is left out rather than breaking the scan, the document list
    and the jobs after it."""
    wd, folder, elsewhere = tmp_path / "wd", tmp_path / "inbox", tmp_path / "private"
    folder.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text(OTHER_TEXT, encoding="utf-8")
    (folder / "press.txt").write_text(NEW_TEXT, encoding="utf-8")
    (folder / "empty.txt").write_text("", encoding="utf-8")
    os.symlink(elsewhere / "secret.txt", folder / "notes.txt")
    open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "w").write(OTHER_TEXT)  # a Latin-1 name
    with running(build_app(GraphService(index_config(wd), input_dir=str(folder)))) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/documents/scan").json()
        assert wait_for_job(client, job["id"])["status"] == "done"
        statuses = {os.path.basename(d["source"]): (d["status"], d["error"]) for d in _documents(client)}
        assert statuses.keys() == {"press.txt", "notes.txt", "empty.txt"}
        assert statuses["press.txt"] == ("indexed", None)
        assert statuses["notes.txt"] == ("failed", OUTSIDE) and statuses["empty.txt"][0] == "failed"
        # A failed file that has become a symlink out of the folder is not read by a reprocess.
        os.remove(folder / "empty.txt")
        os.symlink(elsewhere / "secret.txt", folder / "empty.txt")
        again = client.post("/documents/reprocess").json()
        assert wait_for_job(client, again["id"])["status"] == "done"
        assert {d["status"] for d in _documents(client, q="empty.txt")} == {"failed"}
        labels = client.get("/graph/labels", params={"q": "Ashgrove"}).json()
        assert all("ASHGROVE" not in label["name"] for label in labels)
        after = client.post("/documents", json={"text": OTHER_TEXT, "source": "forge.txt"}).json()
        assert wait_for_job(client, after["id"])["status"] == "done"
        # Nor can a client send such text: JSON's escapes carry lone surrogates.
        refused = client.post("/documents", content=b'{"text": "x", "source": "caf\\udce9.txt"}',
                              headers={"content-type": "application/json"})
        assert refused.status_code == 400 and refused.json()["error"] == "InvalidInputError"


def test_a_file_edited_while_its_scan_runs_is_read_again_by_the_next(tmp_path: Path, llm: MockLLMServer) -> None:
    """The scan remembers a file as it found it, not as it is when the job ends: an edit made
    while the job read and indexed the older text is indexed by the next scan."""
    wd, folder = tmp_path / "wd", tmp_path / "inbox"
    folder.mkdir()
    press = folder / "press.txt"
    press.write_text(NEW_TEXT, encoding="utf-8")
    with running(build_app(GraphService(_llm_config(wd, llm), input_dir=str(folder)))) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        llm.inject(Fault.delay(1.5))  # the job is still extracting when the file is saved again
        job = client.post("/documents/scan").json()
        deadline = time.monotonic() + 30
        while not llm.requests:  # read and sent to the model
            assert time.monotonic() < deadline
            time.sleep(0.02)
        press.write_text(NEW_TEXT + " Quillmoor Press also binds atlases.", encoding="utf-8")
        assert wait_for_job(client, job["id"])["status"] == "done"
        again = client.post("/documents/scan").json()
        assert [os.path.basename(p) for p in wait_for_job(client, again["id"])["stats"]["updated"]] == ["press.txt"]
        assert _documents(client, q="press.txt")[0]["chars"] > len(NEW_TEXT)
