"""Secrets stay out of log lines, CLI errors and HTTP error bodies, even when the model's server
echoes the key it was sent in its 401 answer (as OpenAI's does: "Incorrect API key provided")."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from graphrag.redaction import MASK, RedactSecrets, redact, register_config_secrets, register_secret
from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from helpers_server import build_index, index_config, running, wait_for_job
from mock_llm_server import Fault, MockLLMServer

SK_KEY = "sk-test-SECRET123-abcdefghijkl"
PLAIN_KEY = "proj-plain-secret-4242-zyxw"  # not shaped like a key: known from the configuration only


def echoed(key: str) -> Fault:
    return Fault.status(401, message=f"Incorrect API key provided: {key}. You can find your API key at "
                                     "the provider's dashboard.")


@pytest.fixture()
def llm() -> Iterator[MockLLMServer]:
    with MockLLMServer() as server:
        yield server


def test_redact_masks_known_and_shaped_secrets() -> None:
    register_secret("registered-value-123")
    text = ("key sk-live-0123456789abcdef, header Authorization: Bearer abc.def-ghi, "
            "dsn postgresql://graph:pg-pass-word@db:5432/rag, value registered-value-123")
    masked = redact(text)
    for secret in ("sk-live-0123456789abcdef", "abc.def-ghi", "pg-pass-word", "registered-value-123"):
        assert secret not in masked
    assert "postgresql://graph:***@db:5432/rag" in masked and "Bearer ***" in masked
    config = index_config(Path("/unused"), llm_api_key="config-llm-key-xyz", embedding_api_key="config-emb-key-xyz",
                          storage_options={"neo4j_password": "neo-pass-9876",
                                           "postgres_dsn": "postgres://u:dsn-pass-5555@h/db"})
    register_config_secrets(config)
    masked = redact("config-llm-key-xyz config-emb-key-xyz neo-pass-9876 dsn-pass-5555")
    assert masked == f"{MASK} {MASK} {MASK} {MASK}"
    assert "config-llm-key-xyz" not in repr(config) and "config-emb-key-xyz" not in repr(config)


def test_a_rerank_endpoint_key_and_url_password_are_secrets() -> None:
    config = index_config(Path("/unused"), rerank="https://ranker:rerank-url-pass-77@rerank.example/rerank",
                          rerank_api_key="rerank-key-plain-3141")
    register_config_secrets(config)
    masked = redact("401: rerank-key-plain-3141 rejected; rerank-url-pass-77 too")
    assert "rerank-key-plain-3141" not in masked and "rerank-url-pass-77" not in masked
    assert "rerank-key-plain-3141" not in repr(config)


def test_the_filter_masks_arguments_and_tracebacks() -> None:
    logger = logging.getLogger("graphrag.test_redaction_probe")
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Keep()
    handler.addFilter(RedactSecrets())
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError(f"server said: Incorrect API key provided: {SK_KEY}")
        except RuntimeError as exc:
            logger.warning("call failed: %r", exc, exc_info=True)
    finally:
        logger.removeHandler(handler)
    assert records and "call failed" in records[0] and "Traceback" in records[0]
    assert SK_KEY not in records[0]


def test_an_echoed_key_stays_out_of_the_server_log_and_the_job(tmp_path: Path, llm: MockLLMServer,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    wd = tmp_path / "wd"
    build_index(wd)
    llm.inject(*[echoed(PLAIN_KEY)] * 50)
    service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key=PLAIN_KEY, extraction="llm"))
    with caplog.at_level(logging.INFO), running(build_app(service)) as url, httpx.Client(base_url=url) as client:
        job = client.post("/documents", json={"text": "Ilse Varga founded Quillmoor Press.", "source": "p.txt"})
        failed = wait_for_job(client, job.json()["id"])
    assert failed["status"] == "failed" and "Incorrect API key provided: ***" in failed["error"]["message"]
    assert any("Incorrect API key provided" in r.getMessage() for r in caplog.records)  # logged, masked
    assert PLAIN_KEY not in caplog.text and PLAIN_KEY not in str(failed)


def test_an_echoed_key_stays_out_of_cli_output(tmp_path: Path, llm: MockLLMServer) -> None:
    (tmp_path / "a.txt").write_text("Ilse Varga founded Quillmoor Press in Dunmere.", encoding="utf-8")
    for key in (SK_KEY, PLAIN_KEY):
        llm.inject(*[echoed(key)] * 50)
        env = {"PATH": os.environ["PATH"], "GRAPHRAG_EMBEDDING": "hash", "OPENAI_API_KEY": key,
               "OPENAI_BASE_URL": llm.base_url}
        done = subprocess.run([sys.executable, "-m", "graphrag.cli", "-v", "index", str(tmp_path / "a.txt"),
                               "--working-dir", str(tmp_path / f"wd-{key[:4]}")],
                              capture_output=True, text=True, timeout=120, env=env)
        output = done.stdout + done.stderr
        assert done.returncode != 0 and "graphrag: error:" in done.stderr, output
        assert "Incorrect API key provided: ***" in output and key not in output
        llm.reset()


def test_a_key_an_embedding_server_echoes_stays_out_of_cli_output(tmp_path: Path, llm: MockLLMServer) -> None:
    """The embedding server's key (its own variable), echoed in a 401 that the CLI does not
    map to an exit code: the traceback it prints is masked too."""
    (tmp_path / "a.txt").write_text("Ilse Varga founded Quillmoor Press in Dunmere.", encoding="utf-8")
    llm.inject_embedding(*[echoed(PLAIN_KEY)] * 50)
    env = {"PATH": os.environ["PATH"], "GRAPHRAG_EMBEDDING_BASE_URL": llm.base_url, "GRAPHRAG_EMBEDDING_MODEL": "m",
           "GRAPHRAG_EMBEDDING_DIM": str(llm.embedding_dim), "GRAPHRAG_EMBEDDING_API_KEY": PLAIN_KEY}
    done = subprocess.run([sys.executable, "-m", "graphrag.cli", "-v", "index", str(tmp_path / "a.txt"), "--offline",
                           "--working-dir", str(tmp_path / "wd")], capture_output=True, text=True, timeout=120, env=env)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Incorrect API key provided: ***" in output, output
    assert PLAIN_KEY not in output
