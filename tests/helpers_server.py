"""Test support for the served engine: a small indexed corpus, and uvicorn running an app on a
free 127.0.0.1 port in a background thread."""
from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from graphrag import GraphRAG, hash_embedding
from graphrag.config import GraphRAGConfig

# A three-hop chain over three documents: Marguerite Olvane -> Brightwater Instruments ->
# Kestrel Harbor -> Norland, beside distractors.
DOCS = {
    "people.txt": "Marguerite Olvane founded Brightwater Instruments in 1921. Marguerite Olvane was trained as a "
                  "clockmaker. Tobias Wren founded Ashcombe Mills. Tobias Wren liked to sail.",
    "companies.txt": "Brightwater Instruments is based in Kestrel Harbor. Brightwater Instruments makes compasses. "
                     "Ashcombe Mills is based in Pellham. Ashcombe Mills weaves wool.",
    "places.txt": "Kestrel Harbor is the capital of Norland. Kestrel Harbor has a lighthouse. Pellham is a town "
                  "in Vastria. Pellham hosts a fair.",
}
CHAIN = ["MARGUERITE OLVANE", "BRIGHTWATER INSTRUMENTS", "KESTREL HARBOR", "NORLAND"]
# The CLI's GRAPHRAG_EMBEDDING=hash has this dimension: an index built here opens there too.
EMBEDDING_DIM = 384
# The environment the CLI runs in, in tests: that embedding, nothing of the caller's.
CLI_ENV = {"PATH": "/usr/bin:/bin", "GRAPHRAG_EMBEDDING": "hash"}


def index_config(wd: Path, **options: Any) -> GraphRAGConfig:
    return GraphRAGConfig(**{"working_dir": str(wd), "extraction": "nlp",
                             "embedding_func": hash_embedding(EMBEDDING_DIM), **options})


def build_index(wd: Path) -> None:
    GraphRAG(index_config(wd)).insert(list(DOCS.values()), sources=list(DOCS))


def unsized_body(field: str) -> Iterator[bytes]:
    """A JSON body of about 10 kB with ``field`` as its one text, sent in pieces without a
    Content-Length (a size limit counts it as it arrives)."""
    yield b'{"' + field.encode() + b'": "'
    for _ in range(100):
        yield b"word " * 20
    yield b'"}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1, with the settings ``graphrag serve`` uses; yields
    its base URL."""
    import uvicorn

    from graphrag.server.security import uvicorn_config

    config = uvicorn_config(app, "127.0.0.1", free_port())
    config.lifespan = "on"  # a failing startup fails the test
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextlib.contextmanager
def cli_serving(wd: Path, *flags: str) -> Iterator[str]:
    """``graphrag serve`` over ``wd`` with ``flags`` on a free port, in a process of its own (the
    hash embedding); yields its base URL once it answers."""
    import subprocess
    import sys

    import httpx

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "graphrag.cli", "serve", "--working-dir", str(wd), "--port",
                                str(port), *flags], env=CLI_ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/livez").status_code == 200:
                    break
            except httpx.ConnectError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_for_job(client: Any, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] in ("done", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # Debian's (.ci/setup.sh)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium driven by selenium, in a profile of its own."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="graphrag-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1600",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def slow_question_config(wd: str, marker: str, seconds: float, **options: Any) -> GraphRAGConfig:
    """``index_config`` (with ``options``) whose embedding keeps the CPU busy for ``seconds`` on
    a text holding ``marker``: a query that long and CPU-bound. Module-level, so a reader
    process builds it."""
    embedding = hash_embedding(EMBEDDING_DIM)
    vectors = embedding.func

    async def embed(texts: list[str]) -> Any:
        if any(marker in t for t in texts):
            deadline = time.process_time() + seconds
            while time.process_time() < deadline:  # busy on this process's loop, as CPU work is
                pass
        return await vectors(texts)

    embedding.func = embed
    return index_config(Path(wd), embedding_func=embedding, **options)
