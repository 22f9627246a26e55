"""The models' context windows (``best_model_max_token_size``, ``cheap_model_max_token_size``)
bound every prompt, end to end: against a server that refuses longer prompts as real ones do."""
from __future__ import annotations

import pytest

from graphrag import GraphRAG, QueryParam, hash_embedding


def _harbour_chronicle(n: int) -> str:
    """A long made-up chronicle: enough entities, relations and chunks for every context
    section to run to thousands of tokens."""
    towns = ["Vessel Bay", "Gull Point", "Saltmarsh", "Cinder Cove", "Kelp Hollow", "Brine Reach"]
    lines = []
    for i in range(n):
        town, other = towns[i % len(towns)], towns[(i * 5 + 1) % len(towns)]
        lines.append(
            f"Captain Orla Venn{i} of {town} sailed the sloop Petrel{i} to {other} with Harbourmaster "
            f"Idris Cole{i % 9}. Idris Cole{i % 9} signed the charter of the Lantern Guild{i % 4} in {town}, "
            f"and Orla Venn{i} traded salt, rope and lamp oil with the Lantern Guild{i % 4} every spring.")
    return "\n".join(lines)


def test_query_prompts_fit_the_best_models_window(tmp_path):
    """``best_model_max_token_size`` bounds every query prompt (template, context, question),
    leaving ``ANSWER_TOKENS`` for the answer: a window smaller than the default budgets need
    shrinks the context rather than overflowing the model; one too small fails before a call."""
    from graphrag.windows import ANSWER_TOKENS
    from graphrag.operators.tokenizer import get_tokenizer

    tokenizer = get_tokenizer("gpt-4o")
    prompts: list[int] = []

    async def model(prompt, system_prompt=None, history_messages=None, **kwargs):
        prompts.append(tokenizer.count(prompt) + tokenizer.count(system_prompt or ""))
        return '{"points": [{"description": "Orla Venn traded with the guild.", "score": 60}]}'

    wd = str(tmp_path / "wd")
    GraphRAG(working_dir=wd, extraction="nlp", embedding_func=hash_embedding(64), enable_naive_rag=True,
             show_progress=False).insert([_harbour_chronicle(400)])
    question = "Who traded lamp oil with the Lantern Guild, and where did they sail?"
    param = dict(top_k=60, global_max_token_for_community_report=6000)

    def ask(window: int, mode: str) -> list[int]:
        prompts.clear()
        rag = GraphRAG(working_dir=wd, extraction="nlp", embedding_func=hash_embedding(64), enable_naive_rag=True,
                       best_model_func=model, best_model_max_token_size=window)
        rag.query(question, QueryParam(mode=mode, **param))
        return list(prompts)

    window = 5000
    for mode in ("local", "global", "naive"):
        roomy = ask(32768, mode)
        assert roomy and max(roomy) > window - ANSWER_TOKENS, mode  # the budgets alone would overflow
        tight = ask(window, mode)
        assert tight and max(tight) <= window - ANSWER_TOKENS, mode
        assert max(tight) > (window - ANSWER_TOKENS) * 0.8, mode  # shrunk to the room, not emptied

    with pytest.raises(ValueError, match="best_model_max_token_size=2100"):
        ask(2100, "local")
    assert prompts == []


def test_a_server_refusing_a_long_prompt_is_explained_and_the_window_option_fixes_it(tmp_path):
    """Through the real client: a server whose model window is smaller than the query's
    default budgets answers 400; the error says which options to
    set, and setting ``best_model_max_token_size`` to that window makes the query fit."""
    from graphrag.llm import CONTEXT_OVERFLOW_HINT, LLMError
    from graphrag.operators.query_context import fail_response
    from mock_llm_server import MockLLMServer

    wd = str(tmp_path / "wd")
    GraphRAG(working_dir=wd, extraction="nlp", embedding_func=hash_embedding(64), enable_naive_rag=True,
             show_progress=False).insert([_harbour_chronicle(400)])
    question = "Who traded lamp oil with the Lantern Guild?"
    with MockLLMServer(context_window=4096) as server:
        def ask(mode: str, **window: int) -> str:
            rag = GraphRAG(working_dir=wd, extraction="nlp", embedding_func=hash_embedding(64),
                           enable_naive_rag=True, llm_base_url=server.base_url, llm_api_key="k", **window)
            return rag.query(question, QueryParam(mode=mode, top_k=60))

        with pytest.raises(LLMError, match="maximum context length is 4096") as refused:
            ask("naive")
        assert CONTEXT_OVERFLOW_HINT in str(refused.value) and refused.value.stage == "query"
        assert len(server.chat_requests) == 1  # a 400 is not retried

        for mode in ("naive", "local", "global"):
            server.reset()
            answer = ask(mode, best_model_max_token_size=4096)
            assert answer.strip() and answer != fail_response(), mode
            assert server.chat_requests, mode


def test_a_whole_insert_and_every_query_fit_a_small_window(tmp_path):
    """With both window options set to the server's 4096, every prompt of an insert (long first
    extraction answers included: gleaning stops before the conversation outgrows the window)
    and of every query mode fits; with the default 32768 the same insert is refused mid-way."""
    from graphrag.llm import LLMError
    from graphrag.operators.query_context import fail_response
    from mock_llm_server import MockLLMServer

    text = _harbour_chronicle(120)

    def rag(server: MockLLMServer, name: str, **window: int) -> GraphRAG:
        return GraphRAG(working_dir=str(tmp_path / name), embedding_func=hash_embedding(64),
                        enable_naive_rag=True, llm_base_url=server.base_url, llm_api_key="k",
                        show_progress=False, **window)

    with MockLLMServer(context_window=4096) as server:
        with pytest.raises(LLMError, match="maximum context length is 4096"):
            rag(server, "default").insert([text])
    # A server of its own: calls the failed insert had sent may still be arriving at the first.
    with MockLLMServer(context_window=4096) as server:
        fitted = rag(server, "fitted", best_model_max_token_size=4096, cheap_model_max_token_size=4096)
        stats = fitted.insert([text])
        assert stats["reports_generated"] == stats["communities"] > 0
        kinds = server.stats()["calls_by_kind"]
        assert kinds["extraction"] == stats["chunks_inserted"] > kinds.get("gleaning_continue", 0)
        for mode in ("local", "global", "naive"):
            answer = fitted.query("Who traded lamp oil with the Lantern Guild?", QueryParam(mode=mode, top_k=60))
            assert answer.strip() and answer != fail_response(), mode
