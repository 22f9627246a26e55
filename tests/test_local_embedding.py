"""The bundled all-MiniLM-L6-v2 model: offline, 384-d, loaded on first use, warns on long input."""
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


def test_local_model_embeds_offline_and_warns_once_on_long_text(caplog, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embed = local_embedding()
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
