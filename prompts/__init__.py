"""Prompt templates for the LLM stages, stored as ``*.txt`` package data.

Templates use ``str.format`` placeholders so they can be edited without touching code;
literal braces in them are doubled.
"""
from __future__ import annotations

import logging
import string
from functools import lru_cache
from importlib import resources
from typing import Any, Optional

logger = logging.getLogger(__name__)

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"
DEFAULT_ENTITY_TYPES: list[str] = ["organization", "person", "geo", "event"]

# Dict view for callers ported from nano-graphrag-style code (``PROMPTS["..."]``).
PROMPTS: dict[str, Any] = {
    "DEFAULT_TUPLE_DELIMITER": TUPLE_DELIMITER,
    "DEFAULT_RECORD_DELIMITER": RECORD_DELIMITER,
    "DEFAULT_COMPLETION_DELIMITER": COMPLETION_DELIMITER,
    "DEFAULT_ENTITY_TYPES": DEFAULT_ENTITY_TYPES,
    "TUPLE_DELIMITER": TUPLE_DELIMITER,
    "RECORD_DELIMITER": RECORD_DELIMITER,
    "COMPLETION_DELIMITER": COMPLETION_DELIMITER,
}

TEMPLATE_NAMES: tuple[str, ...] = (
    "entity_extraction",
    "entity_continue_extraction",
    "entity_if_loop_extraction",
    "summarize_entity_descriptions",
    "entity_resolution",
    "community_report",
    "local_rag_response",
    "global_map_rag_points",
    "global_reduce_rag_response",
    "naive_rag_response",
    "fail_response",
    # Answers with citations (QueryParam.with_references)
    "local_rag_response_cited",
    "naive_rag_response_cited",
    "global_map_rag_points_cited",
    "global_reduce_rag_response_cited",
    # Follow-up turns when an answer ignored the format (one each, see extraction.py).
    "entity_extraction_repair",
    "community_report_repair",
    "global_map_repair",
    # Listwise reranking by the cheap model (GraphRAGConfig.rerank = "llm").
    "rerank_listwise",
)

# The kind of answer each prompt asks a model for, as a stand-in model (the tests' mock
# server) names it. A prompt's template is recognised by the template's own fixed text
# (``fixed_text``), so rewording a template needs no change here. ``fail_response`` has no
# kind: it is the canned reply itself, never sent to a model.
PROMPT_KINDS: dict[str, str] = {
    "entity_extraction": "extraction",
    "entity_continue_extraction": "gleaning_continue",
    "entity_if_loop_extraction": "gleaning_check",
    "summarize_entity_descriptions": "summary",
    "entity_resolution": "resolution",
    "community_report": "report",
    "global_map_rag_points": "global_map",
    "local_rag_response": "answer",
    "global_reduce_rag_response": "answer",
    "naive_rag_response": "answer",
    "local_rag_response_cited": "cited_answer",
    "naive_rag_response_cited": "cited_answer",
    "global_map_rag_points_cited": "cited_global_map",
    "global_reduce_rag_response_cited": "cited_answer",
    "entity_extraction_repair": "extraction_repair",
    "community_report_repair": "report_repair",
    "global_map_repair": "global_map_repair",
    "rerank_listwise": "rerank",
}

_DELIMITERS: dict[str, str] = {
    "tuple_delimiter": TUPLE_DELIMITER,
    "record_delimiter": RECORD_DELIMITER,
    "completion_delimiter": COMPLETION_DELIMITER,
}


@lru_cache(maxsize=None)
def load(name: str) -> str:
    """Return the raw template ``<name>.txt``; cached because prompts are read per chunk."""
    path = resources.files(__name__).joinpath(f"{name}.txt")
    if not path.is_file():
        raise KeyError(f"unknown prompt template {name!r}")
    return path.read_text(encoding="utf-8")


SEAM_TOKENS = 8


def room_for_data(tokenizer: Any, name: str, window: int, answer_tokens: int, **empty: Any) -> int:
    """Tokens left for the data of prompt ``name`` in a model window of ``window`` tokens,
    after the template's own text and ``answer_tokens`` kept for the answer (``empty``: the
    data placeholders, filled with nothing). ``SEAM_TOKENS`` are kept too: where data meets
    the template's text, the tokenizer may split the joined text into a token more."""
    return window - tokenizer.count(render(name, **empty)) - answer_tokens - SEAM_TOKENS


def render(name: str, **values: Any) -> str:
    """Fill template ``name``; the delimiter placeholders default to the standard ones."""
    return load(name).format(**{**_DELIMITERS, **values})


def fixed_text(name: str) -> tuple[tuple[str, Optional[str]], ...]:
    """Template ``name`` cut at its data placeholders: (fixed text, the placeholder after it,
    None after the last) pairs, delimiters filled in. Every prompt rendered from the template
    holds these texts in this order whatever the data, so a prompt's template (and its data)
    can be read back from the template itself rather than from phrases copied out of it."""
    return _cut_at_placeholders(load(name))


@lru_cache(maxsize=None)
def _cut_at_placeholders(template: str) -> tuple[tuple[str, Optional[str]], ...]:
    parts: list[tuple[str, Optional[str]]] = []
    text = ""
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        text += literal
        if field in _DELIMITERS:
            text += _DELIMITERS[field]
        elif field is not None:
            parts.append((text, field))
            text = ""
    parts.append((text, None))
    return tuple(parts)
