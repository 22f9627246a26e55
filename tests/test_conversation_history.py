"""A chat's earlier turns (``QueryParam.conversation_history``): checked, trimmed to the model's
window oldest first, and sent to the answer model only."""
from __future__ import annotations

from pathlib import Path

import pytest

from graphrag import GraphRAG, QueryParam
from graphrag.errors import InvalidInputError
from graphrag.operators.tokenizer import get_tokenizer
from graphrag.windows import HISTORY_SHARE, ModelWindows
from helpers_server import build_index, index_config
from mock_llm_server import MockLLMServer

QUESTION = "Where is Brightwater Instruments based?"


@pytest.mark.parametrize("history", ["hello", [{"role": "system", "content": "x"}], [{"role": "user"}],
                                     [{"role": "user", "content": 3}], ["user: hi"]])
def test_malformed_turns_are_refused(history: object) -> None:
    with pytest.raises(InvalidInputError, match="conversation_history"):
        QueryParam(conversation_history=history)  # type: ignore[arg-type]


def test_a_turn_that_is_not_unicode_is_refused() -> None:
    """A lone surrogate (JSON's \\uXXXX escapes carry one) cannot be sent to the model: the
    caller is told, rather than the model call failing inside the query."""
    with pytest.raises(InvalidInputError, match=r"conversation_history\[1\].*Unicode"):
        QueryParam(conversation_history=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a\ud800"}])


def test_only_role_and_content_are_kept() -> None:
    param = QueryParam(conversation_history=[{"role": "user", "content": "hi", "name": "x", "tool_calls": []}])
    assert param.conversation_history == [{"role": "user", "content": "hi"}]


def test_the_newest_turns_that_fit_half_the_room_are_kept(tmp_path: Path) -> None:
    config = index_config(tmp_path, best_model_max_token_size=6000)
    tokenizer = get_tokenizer(config.tiktoken_model_name)
    windows = ModelWindows(config, tokenizer)
    alone = windows.fit_query(QUESTION, QueryParam(mode="naive"))
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 300}
             for i in range(12)]
    fitted = windows.fit_query(QUESTION, QueryParam(mode="naive", conversation_history=turns))
    kept = fitted.conversation_history
    assert 0 < len(kept) < len(turns) and kept == turns[-len(kept):]  # the oldest went first
    history_tokens = sum(tokenizer.count(t["content"]) for t in kept)
    assert history_tokens <= alone.naive_max_token_for_text_unit * HISTORY_SHARE
    # The context gives up what the turns take, so the prompt still fits the window.
    assert fitted.naive_max_token_for_text_unit <= alone.naive_max_token_for_text_unit - history_tokens
    assert windows.fit_query(QUESTION, fitted) == fitted  # fitting again changes nothing


def test_the_python_api_sends_the_turns_before_the_question_in_every_mode(tmp_path: Path) -> None:
    build_index(tmp_path / "wd")
    turns = [{"role": "user", "content": "Who founded Ashcombe Mills?"},
             {"role": "assistant", "content": "Tobias Wren."}]
    with MockLLMServer() as llm:
        rag = GraphRAG(config=index_config(tmp_path / "wd", llm_base_url=llm.base_url, llm_api_key="k"))
        with rag:
            for mode in ("local", "global", "naive", "hybrid"):
                for cited in (False, True):
                    llm.reset()
                    rag.query(QUESTION, QueryParam(mode=mode, with_references=cited, conversation_history=turns))
                    answer = llm.chat_requests[-1]["messages"]
                    assert answer[1:] == [*turns, {"role": "user", "content": QUESTION}], (mode, cited)
                    # A global query's map calls read the reports alone; the reduce reads the chat.
                    assert all(len(r["messages"]) == 2 for r in llm.chat_requests[:-1]), (mode, cited)
            llm.reset()
            rag.query(QUESTION, QueryParam(mode="naive"))  # without turns, the call is as before
            assert [m["role"] for m in llm.chat_requests[-1]["messages"]] == ["system", "user"]


def test_a_question_that_is_not_unicode_is_refused_before_the_model_call(tmp_path: Path) -> None:
    """The Python API and MCP take a question as is (HTTP's JSON parsing refuses one already):
    a lone surrogate is the caller's error, not a failure inside the model call."""
    build_index(tmp_path / "wd")
    with MockLLMServer() as llm:
        with GraphRAG(config=index_config(tmp_path / "wd", llm_base_url=llm.base_url, llm_api_key="k")) as rag:
            with pytest.raises(InvalidInputError, match="query.*Unicode"):
                rag.query("Where is \ud800 based?", QueryParam(mode="naive"))
            assert not llm.chat_requests


@pytest.mark.parametrize("history", [None, "hello", [{"role": "user", "content": 3}]])
def test_turns_set_after_the_param_was_made_are_checked_too(tmp_path: Path, history: object) -> None:
    """A dataclass field can be set after ``__post_init__`` checked it (``param.conversation_history
    = ...``): the query refuses malformed turns then too, as a caller's error."""
    config = index_config(tmp_path, best_model_max_token_size=6000)
    param = QueryParam(mode="naive")
    param.conversation_history = history  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="conversation_history"):
        ModelWindows(config, get_tokenizer(config.tiktoken_model_name)).fit_query(QUESTION, param)
