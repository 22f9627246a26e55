"""Embedding functions: the bundled all-MiniLM-L6-v2 model (offline, 384-d, loaded on first use,
warns on long input) and the deterministic hash embedding."""
from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import numpy as np

from graphrag.embedding import local_embedding


def test_import_does_not_load_torch():
    code = "import sys, graphrag; from graphrag import GraphRAG; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_local_model_embeds_offline_and_truncated_warns_once_on_long_text(caplog, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("graphrag.embedding._local", {})  # a model that has not warned yet
    embed = local_embedding("truncated")
    assert (embed.embedding_dim, embed.max_token_size) == (384, 256)
    texts = ["Scrooge is a miserly old man.", "Ebenezer Scrooge hoards his money.", "The tide came in at dawn."]
    with caplog.at_level(logging.WARNING, logger="graphrag.embedding"):
        vectors = asyncio.run(embed(texts))
        assert vectors.shape == (3, 384)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
        assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # meaning, not just words
        assert not [r for r in caplog.records if "window" in r.getMessage()]
        asyncio.run(embed(["word " * 600]))
        asyncio.run(embed(["word " * 600]))
    warnings = [r for r in caplog.records if "window" in r.getMessage()]
    assert len(warnings) == 1


def test_hash_embedding_is_a_normalised_signed_bag_of_words():
    import re

    from xxhash import xxh64_intdigest

    from graphrag import hash_embedding

    dim = 16

    def reference(text: str) -> np.ndarray:
        v = np.zeros(dim)
        for token in re.findall(r"\w+", text.lower()):
            h = xxh64_intdigest(token.encode("utf-8", "surrogatepass"))
            v[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    texts = ["Scrooge met Marley; MARLEY met scrooge.", "", "  ,; ", "Ünïcödé façade \ud800 x", "a " * 500]
    func = hash_embedding(dim)
    got = asyncio.run(func(texts))
    assert got.shape == (len(texts), dim) and got.dtype == np.float32
    for row, text in zip(got, texts):
        np.testing.assert_allclose(row, reference(text), atol=1e-6)
    # Deterministic across calls (the token table is filled, not reset).
    np.testing.assert_array_equal(asyncio.run(func(texts[::-1]))[::-1], got)


def test_a_question_asked_of_several_vector_stores_is_embedded_once() -> None:
    from graphrag.embedding import EmbeddingFunc

    calls: list[list[str]] = []

    async def embed(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.array([[float(len(t)), 1.0] for t in texts])

    func = EmbeddingFunc(embedding_dim=2, max_token_size=64, func=embed)

    async def run() -> list[np.ndarray]:
        first = await func(["where is it?"])
        first[0, 0] = -1.0  # a caller changing its copy changes no later answer
        return [await func(["where is it?"]), await func(["something else"]), await func(["a", "b"]),
                await func(["something else"])]

    again, other, pair, other_again = asyncio.run(run())
    assert again.tolist() == [[12.0, 1.0]] and other_again.tolist() == other.tolist()
    assert calls == [["where is it?"], ["something else"], ["a", "b"]]
