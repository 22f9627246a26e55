"""Options the engine cannot use raise the engine's own errors, which are still the built-in
exceptions they were before, so existing ``except ValueError`` / ``except TypeError`` keep working."""
from __future__ import annotations

from typing import Any

import pytest

from graphrag.config import GraphRAGConfig
from graphrag.embedding import hash_embedding, limited
from graphrag.errors import ConfigurationError, EmbeddingFuncError, GraphRAGError, InvalidInputError
from graphrag.llm import LLMClient, UsageCounter
from graphrag.query_param import QueryParam


@pytest.mark.parametrize("options, named", [
    ({"extraction": "regex"}, "extraction"),
    ({"chunk_token_size": 0}, "chunk_token_size"),
    ({"best_model_max_async": -1}, "best_model_max_async"),
    ({"llm_max_async_total": 0}, "llm_max_async_total"),
    ({"chunk_token_size": 100, "chunk_overlap_token_size": 100}, "chunk_overlap_token_size"),
    ({"entity_extract_max_gleaning": -1}, "entity_extract_max_gleaning"),
    ({"small_component_max_entities": -1}, "small_component_max_entities"),
])
def test_config_errors_are_configuration_errors_and_still_value_errors(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named) as info:
        GraphRAGConfig(working_dir="unused", **options)
    assert isinstance(info.value, ValueError) and isinstance(info.value, GraphRAGError)


@pytest.mark.parametrize("options, named", [
    ({"mode": "mixed"}, "mode"),
    ({"top_k": -1}, "top_k"),
    ({"level": "2"}, "level"),
    ({"global_min_community_rating": "high"}, "global_min_community_rating"),
    ({"response_type": " "}, "response_type"),
    ({"global_special_community_map_llm_kwargs": []}, "global_special_community_map_llm_kwargs"),
])
def test_query_param_errors_are_invalid_input_and_still_value_errors(options: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidInputError, match=named) as info:
        QueryParam(**options)
    assert isinstance(info.value, ValueError)


def test_a_bad_embedding_func_is_a_configuration_error_and_still_a_type_error() -> None:
    with pytest.raises(EmbeddingFuncError, match="embedding_dim") as info:
        limited(lambda texts: texts, max_async=4)
    assert isinstance(info.value, ConfigurationError) and isinstance(info.value, TypeError)
    assert limited(hash_embedding(8), max_async=4).max_async == 4


def test_an_llm_client_without_slots_is_a_configuration_error() -> None:
    async def model(prompt: str, **kwargs: Any) -> str:
        return "answer"

    with pytest.raises(ConfigurationError, match="max_async"):
        LLMClient(model, model_id="m", max_async=0, usage=UsageCounter())
