"""The sync API keeps one event loop across calls, so user functions that hold a loop-bound
client (one module-level ``openai.AsyncOpenAI``, as nano-graphrag's own ``_llm.py`` does) work
for any number of sync calls; and a ``GraphRAG`` is closed once, by ``close()`` or a ``with``."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import openai  # a dependency of the package: the client nano-graphrag's users hold
import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import EmbeddingFunc
from mock_llm_server import MockLLMServer

TEXT = ("Ada Pennick runs the Saltmarsh Lantern Works in Harrowgate. The Lantern Works sells lamps to the "
        "Harrowgate Lifeboat Station. Tobias Venn repairs the station's engines and buys wicks from Ada Pennick.")

# One client for the model and the embeddings, made once and kept at module level.
CLIENT: Optional[Any] = None


def _client() -> Any:
    assert CLIENT is not None
    return CLIENT


async def model(prompt: str, system_prompt: Optional[str] = None, history_messages: Optional[list] = None,
                **kwargs: Any) -> str:
    kwargs.pop("hashing_kv", None)
    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + list(
        history_messages or []) + [{"role": "user", "content": prompt}]
    response = await _client().chat.completions.create(model="mock", messages=messages, **kwargs)
    return response.choices[0].message.content or ""


async def embed(texts: list[str]) -> np.ndarray:
    response = await _client().embeddings.create(model="mock-embed", input=texts)
    return np.array([d.embedding for d in response.data], dtype=np.float32)


def test_fifty_sync_calls_share_one_loop_bound_client(tmp_path: Path) -> None:
    global CLIENT
    with MockLLMServer(embedding_dim=32) as server:
        CLIENT = openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        try:
            rag = GraphRAG(working_dir=str(tmp_path / "wd"), best_model_func=model, cheap_model_func=model,
                           embedding_func=EmbeddingFunc(embedding_dim=32, max_token_size=8192, func=embed))
            stats = rag.insert(TEXT)
            assert stats["documents_inserted"] == 1 and stats["chunks_failed"] == 0
            before = len(server.requests)
            # Each question differs, so no answer comes from the LLM cache.
            answers = [rag.query(f"Who runs the Lantern Works, question {i}?",
                                 QueryParam(mode="local" if i % 2 else "naive")) for i in range(50)]
            assert all(a.strip() for a in answers)
            assert not [a for a in answers if "Sorry" in a]
            # Each query embedded its question and asked the model, through the one client.
            assert len(server.requests) - before >= 100
            rag.close()
        finally:
            CLIENT = None


def test_sync_call_inside_a_running_loop_is_refused(tmp_path: Path) -> None:
    from graphrag import hash_embedding

    rag = GraphRAG(working_dir=str(tmp_path / "wd"), extraction="nlp", embedding_func=hash_embedding(32))

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="await the async version"):
            rag.query("anything")

    asyncio.run(inside())
    rag.close()


def _wait_for(condition: Any, timeout: float = 5.0) -> bool:
    """The server notices a closed connection on its own thread, shortly after the client."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(condition())


def _indexed(path: Path) -> GraphRAG:
    from graphrag import hash_embedding

    rag = GraphRAG(working_dir=str(path), extraction="nlp", embedding_func=hash_embedding(32))
    rag.insert(TEXT)
    return rag


def test_async_with_releases_the_llm_connections(tmp_path: Path, openai_env: MockLLMServer) -> None:
    rag = _indexed(tmp_path / "wd")

    async def ask_twice() -> None:
        async with rag as same:
            assert same is rag
            await rag.aquery("Who runs the Lantern Works?")
            await rag.aquery("Who repairs the engines?")
            assert openai_env.open_connections >= 1  # kept alive between the two questions

    asyncio.run(ask_twice())
    assert _wait_for(lambda: openai_env.open_connections == 0)
    asyncio.run(rag.aclose())  # closing again is harmless


def test_with_closes_once_and_sync_calls_go_on(tmp_path: Path, openai_env: MockLLMServer) -> None:
    with _indexed(tmp_path / "wd") as rag:
        answer = rag.query("Who runs the Lantern Works?")
        assert answer.strip() and openai_env.calls_by_kind
    assert _wait_for(lambda: openai_env.open_connections == 0)
    rag.close()
    rag.close()
    assert rag.list_documents()[0]["chunks"] >= 1  # a closed GraphRAG opens what it needs again


def test_a_thread_s_loop_is_closed_when_the_thread_ends(tmp_path: Path, openai_env: MockLLMServer) -> None:
    """Sync calls on a thread of the user's run on that thread's loop; the thread's end closes
    it and lets its executor's threads go, rather than leaving an unclosed loop (its selector
    and socket pair) for the collector, which warns whichever test or call it runs during."""
    import gc
    import threading
    import warnings

    from graphrag.aio import thread_loop

    before = set(threading.enumerate())
    used: list[asyncio.AbstractEventLoop] = []

    def work() -> None:
        with _indexed(tmp_path / "wd") as rag:
            assert rag.query("Who runs the Lantern Works?").strip()
            used.append(thread_loop())

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert len(used) == 1 and used[0] is not thread_loop() and used[0].is_closed()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        used.clear()
        gc.collect()
    assert not [w for w in caught if "unclosed event loop" in str(w.message)]
    assert _wait_for(lambda: set(threading.enumerate()) <= before)
