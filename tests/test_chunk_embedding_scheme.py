"""Pooled-window embeddings of long texts, and the index's record of the scheme it was built
with (one index never mixes pooled and truncated chunk vectors)."""
from __future__ import annotations

import asyncio
import json
import os

import numpy as np
import pytest

from graphrag import GraphRAG, hash_embedding
from graphrag.embedding import EmbeddingFunc, local_embedding
from graphrag.embedding_scheme import RECORD
from graphrag.errors import ConfigurationError, EmbeddingSchemeError

SHORT = ["Scrooge is a miserly old man.", "The ghost of Christmas Yet to Come points at a grave. " * 8]
# Its beginning says nothing of the ending, which only the pooled vector sees.
LONG = "Marley was dead to begin with, there is no doubt whatever about that. " * 30 + \
       "Tiny Tim did not die, and Scrooge became as good a friend as the city knew. " * 15


def test_pooled_differs_from_truncated_only_beyond_the_window():
    pooled, truncated = local_embedding("pooled"), local_embedding("truncated")
    assert pooled is not truncated and pooled.long_texts == "pooled"
    pooled.func._load()
    tokens = pooled.func._token_ids(SHORT + [LONG])  # word pieces, [CLS] and [SEP] aside
    assert [len(t) + 2 <= 256 for t in tokens] == [True, True, False]
    a, b = asyncio.run(pooled(SHORT + [LONG])), asyncio.run(truncated(SHORT + [LONG]))
    np.testing.assert_array_equal(asyncio.run(pooled(SHORT)), asyncio.run(truncated(SHORT)))
    np.testing.assert_allclose(a[:2], b[:2], atol=1e-4)  # up to the batch's padding (float noise)
    assert a[2] @ b[2] < 0.99
    assert np.isclose(np.linalg.norm(a[2]), 1.0, atol=1e-5)
    ending = asyncio.run(pooled(["Tiny Tim did not die; Scrooge became a good friend."]))[0]
    assert a[2] @ ending > b[2] @ ending  # the pooled vector saw the end of the text


def test_pooled_is_deterministic_and_independent_of_its_batch():
    embed = local_embedding("pooled")
    alone = asyncio.run(embed([LONG]))
    again = asyncio.run(embed(SHORT + [LONG]))
    np.testing.assert_allclose(alone[0], again[2], atol=1e-5)
    np.testing.assert_array_equal(alone, asyncio.run(embed([LONG])))


def test_unknown_scheme_is_refused():
    with pytest.raises(ConfigurationError, match="long_texts"):
        local_embedding("middle")


def _explicit(scheme: str) -> EmbeddingFunc:
    """An explicitly chosen scheme, with cheap vectors (the scheme record is what is tested)."""
    func = hash_embedding(32)
    return EmbeddingFunc(embedding_dim=32, max_token_size=256, func=func.func, long_texts=scheme)


def _meta(wd) -> dict:
    with open(os.path.join(wd, "kv_store_index_meta.json"), encoding="utf-8") as f:
        return json.load(f).get(RECORD)


def test_the_scheme_is_recorded_and_the_other_one_refused(tmp_path):
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=_explicit("truncated"))
    rag.insert("Scrooge met Marley's ghost in London.")
    assert _meta(tmp_path) == {"long_texts": "truncated"}
    other = GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=_explicit("pooled"))
    with pytest.raises(EmbeddingSchemeError, match=r"long_texts='truncated'.*long_texts='pooled'"):
        other.insert("Bob Cratchit works for Scrooge.")
    assert _meta(tmp_path) == {"long_texts": "truncated"}
    assert other.query("Who met Marley?", param=_context("naive"))  # queries embed short texts: allowed


def test_an_index_without_a_record_is_truncated(tmp_path):
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=hash_embedding(32))
    rag.insert("Scrooge met Marley's ghost in London.")  # a user's function: nothing recorded
    assert _meta(tmp_path) is None
    with pytest.raises(EmbeddingSchemeError, match="long_texts='truncated'"):
        GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=_explicit("pooled")).insert("Bob.")
    GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=_explicit("truncated")).insert("Bob.")
    assert _meta(tmp_path) == {"long_texts": "truncated"}


def test_the_default_keeps_the_scheme_the_index_was_built_with(tmp_path):
    rag = GraphRAG(working_dir=str(tmp_path), extraction="nlp", embedding_func=local_embedding("truncated"))
    rag.insert("Scrooge met Marley's ghost in London.")
    default = GraphRAG(working_dir=str(tmp_path), extraction="nlp")  # default: local_embedding()
    default.insert("Bob Cratchit works for Scrooge.")
    assert default.embedding_func.long_texts == "truncated"
    assert _meta(tmp_path) == {"long_texts": "truncated"}
    fresh = GraphRAG(working_dir=str(tmp_path / "new"), extraction="nlp", embedding_func=local_embedding())
    fresh.insert("Bob Cratchit works for Scrooge.")
    assert _meta(tmp_path / "new") == {"long_texts": "pooled"}


def _context(mode: str):
    from graphrag import QueryParam

    return QueryParam(mode=mode, only_need_context=True)
