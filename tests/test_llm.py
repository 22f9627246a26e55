"""LLM client behaviour over real HTTP: the real openai client against the local mock server."""
from __future__ import annotations

import asyncio
import email.utils
import json
import time
import urllib.request
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from graphrag.config import GraphRAGConfig
from graphrag.errors import ContextOverflowError
from graphrag.llm import (
    LLMClient,
    LLMError,
    NoLLMConfiguredError,
    UsageCounter,
    build_llm_clients,
    openai_model_func,
)
from graphrag.llm.retry import retry_after_seconds
from mock_llm_server import Fault, MockLLMServer


class MemoryKV:
    """The two methods of the KV store interface that the client uses."""

    def __init__(self) -> None:
        self.data: dict[str, dict] = {}

    async def get_by_id(self, key: str) -> Optional[dict]:
        return self.data.get(key)

    async def upsert(self, items: dict[str, dict]) -> None:
        self.data.update(items)


def make_client(server: MockLLMServer, *, timeout: float = 10.0, max_retries: int = 4, max_async: int = 8,
                cache: Any = None, usage: Optional[UsageCounter] = None) -> LLMClient:
    func = openai_model_func("gpt-4o-mini", base_url=server.base_url, api_key="test-key", timeout=timeout)
    return LLMClient(func, model_id="gpt-4o-mini", max_async=max_async, usage=usage or UsageCounter(),
                     cache=cache, max_retries=max_retries, backoff_base=0.01, backoff_max=2.0)


def chat_count(server: MockLLMServer) -> int:
    return len(server.chat_requests)


def test_call_returns_scripted_text(llm_server: MockLLMServer) -> None:
    llm_server.inject(Fault.text("scripted answer"))
    client = make_client(llm_server)
    out = asyncio.run(client("hello", stage="query", system_prompt="be brief", temperature=0.0))
    assert out == "scripted answer"
    req = llm_server.chat_requests[0]
    assert req["model"] == "gpt-4o-mini"
    assert req["temperature"] == 0.0
    assert [m["role"] for m in req["messages"]] == ["system", "user"]


def test_429_with_retry_after_is_honoured(llm_server: MockLLMServer) -> None:
    llm_server.inject(Fault.status(429, retry_after=1), Fault.text("ok"))
    client = make_client(llm_server)
    t0 = time.perf_counter()
    assert asyncio.run(client("hi", stage="extraction")) == "ok"
    assert time.perf_counter() - t0 >= 0.9
    assert chat_count(llm_server) == 2
    assert client.usage.snapshot()["extraction"]["retries"] == 1


@pytest.mark.parametrize("fault", [Fault.status(500), Fault.status(503), Fault.reset()], ids=["500", "503", "reset"])
def test_transient_failure_then_success(llm_server: MockLLMServer, fault: Fault) -> None:
    llm_server.inject(fault, Fault.text("recovered"))
    client = make_client(llm_server)
    assert asyncio.run(client("hi", stage="summary")) == "recovered"
    assert chat_count(llm_server) == 2
    snap = client.usage.snapshot()["summary"]
    assert snap["calls"] == 2 and snap["retries"] == 1 and snap["failures"] == 0


def test_client_timeout_is_retried(llm_server: MockLLMServer) -> None:
    llm_server.inject(Fault.delay(2.0), Fault.text("late but fine"))
    client = make_client(llm_server, timeout=0.5)
    t0 = time.perf_counter()
    assert asyncio.run(client("hi", stage="report")) == "late but fine"
    assert time.perf_counter() - t0 < 1.9
    assert client.usage.snapshot()["report"]["retries"] == 1


def test_empty_completion_is_retried_then_returned_empty(llm_server: MockLLMServer) -> None:
    llm_server.inject(Fault.empty(), Fault.text("second try"))
    client = make_client(llm_server)
    assert asyncio.run(client("hi", stage="query")) == "second try"
    assert chat_count(llm_server) == 2

    llm_server.reset()
    llm_server.inject(Fault.empty(), Fault.empty(), Fault.empty(), Fault.text("never reached"))
    assert asyncio.run(client("hi again", stage="query")) == ""
    assert chat_count(llm_server) == 3  # one try plus two extra


def test_permanent_500_raises_llm_error_naming_stage(llm_server: MockLLMServer) -> None:
    import openai

    llm_server.inject(*[Fault.status(500)] * 10)
    client = make_client(llm_server, max_retries=2)
    with pytest.raises(LLMError) as info:
        asyncio.run(client("hi", stage="extraction"))
    err = info.value
    assert err.stage == "extraction"
    assert "during extraction after 3 attempts" in str(err)
    assert isinstance(err.cause, openai.InternalServerError)
    assert err.__cause__ is err.cause
    assert chat_count(llm_server) == 3
    assert client.usage.snapshot()["extraction"]["failures"] == 1


@pytest.mark.parametrize("status, message", [
    (400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens."),
    (400, "the request exceeds the available context size. try increasing the context size or enable context shift"),
    (500, "Context size has been exceeded."),
], ids=["openai-vllm", "llama.cpp", "llama.cpp-500"])
def test_a_prompt_too_long_for_the_model_is_not_retried_and_names_the_window_options(
        llm_server: MockLLMServer, status: int, message: str) -> None:
    """Servers word it differently, and llama.cpp sometimes answers 500: a retry would fail the
    same way, so none is made, and the error says what to set."""
    from graphrag.llm import CONTEXT_OVERFLOW_HINT

    llm_server.inject(Fault.status(status, message=message), Fault.text("should not be used"))
    client = make_client(llm_server)
    with pytest.raises(ContextOverflowError) as info:
        asyncio.run(client("hi", stage="report"))
    assert message in str(info.value) and CONTEXT_OVERFLOW_HINT in str(info.value)
    assert chat_count(llm_server) == 1


def test_a_prompt_longer_than_the_servers_window_raises_context_overflow_error() -> None:
    """The server counts the prompt and refuses it: the client's error is a
    ContextOverflowError (an LLMError) naming the stage and the options to set."""
    from graphrag.llm import CONTEXT_OVERFLOW_HINT

    with MockLLMServer(context_window=200) as server:
        client = make_client(server)
        assert asyncio.run(client("a short question", stage="query"))
        with pytest.raises(ContextOverflowError) as info:
            asyncio.run(client("word " * 1000, stage="query"))
        assert len(server.chat_requests) == 2  # the refused prompt was not retried
    err = info.value
    assert isinstance(err, LLMError) and err.stage == "query" and err.attempts == 1
    assert "maximum context length is 200" in str(err) and CONTEXT_OVERFLOW_HINT in str(err)
    assert client.usage.snapshot()["query"]["failures"] == 1


def test_401_is_not_retried(llm_server: MockLLMServer) -> None:
    import openai

    llm_server.inject(Fault.status(401), Fault.text("should not be used"))
    client = make_client(llm_server)
    with pytest.raises(LLMError) as info:
        asyncio.run(client("hi", stage="gleaning"))
    assert isinstance(info.value.cause, openai.AuthenticationError)
    assert not isinstance(info.value, ContextOverflowError)
    assert "gleaning" in str(info.value)
    assert chat_count(llm_server) == 1


def test_in_flight_requests_bounded_by_max_async(llm_server: MockLLMServer) -> None:
    llm_server.latency = 0.05
    client = make_client(llm_server, max_async=4)

    async def run() -> list[str]:
        return await asyncio.gather(*(client(f"question {i}", stage="query") for i in range(40)))

    answers = asyncio.run(run())
    assert len(answers) == 40 and all(answers)
    assert 2 <= llm_server.peak_concurrency <= 4
    assert client.usage.snapshot()["query"]["calls"] == 40


def test_both_models_share_llm_max_async_total(llm_server: MockLLMServer) -> None:
    """One server for both models: their calls together stay within the total, and a waiting
    call with a lower priority number gets the next shared slot whichever model it is for."""
    llm_server.latency = 0.05
    cfg = GraphRAGConfig(working_dir="unused", llm_base_url=llm_server.base_url, llm_api_key="k",
                         best_model_max_async=8, cheap_model_max_async=4, llm_max_async_total=4)
    best, cheap = build_llm_clients(cfg, UsageCounter())
    order: list[str] = []

    async def ask(client: LLMClient, name: str, priority: int) -> None:
        await client(f"question {name}", stage="query", priority=priority)
        order.append(name)

    async def run() -> None:
        first = [asyncio.create_task(ask(best, f"best-{i}", 0)) for i in range(4)]
        await asyncio.sleep(0.01)  # the four shared slots are taken
        later = [asyncio.create_task(ask(best, f"late-best-{i}", 0)) for i in range(3)]
        later += [asyncio.create_task(ask(cheap, f"cheap-{i}", -10)) for i in range(4)]
        await asyncio.gather(*first, *later)

    asyncio.run(run())
    assert llm_server.peak_concurrency == 4
    # The waiting best calls were there first, but the cheap ones (priority -10) went next.
    assert set(order[4:8]) == {f"cheap-{i}" for i in range(4)}
    # Without the total each model has only its own limit.
    llm_server.reset()
    cfg.llm_max_async_total = None
    best, cheap = build_llm_clients(cfg, UsageCounter())
    asyncio.run(run())
    assert llm_server.peak_concurrency == 11
    with pytest.raises(ValueError, match="llm_max_async_total"):
        GraphRAGConfig(working_dir="unused", llm_max_async_total=0)


def test_client_works_across_event_loops(llm_server: MockLLMServer) -> None:
    client = make_client(llm_server, max_async=2)
    for _ in range(3):
        assert asyncio.run(client("hi", stage="query"))
    assert chat_count(llm_server) == 3


def test_cache_hit_makes_no_request(llm_server: MockLLMServer) -> None:
    cache = MemoryKV()
    client = make_client(llm_server, cache=cache)
    first = asyncio.run(client("Describe Paris.", stage="summary", system_prompt="sys"))
    second = asyncio.run(client("Describe Paris.", stage="summary", system_prompt="sys"))
    assert first == second and first
    assert chat_count(llm_server) == 1
    snap = client.usage.snapshot()["summary"]
    assert snap["calls"] == 1 and snap["cached"] == 1
    (record,) = cache.data.values()
    assert record == {"return": first, "model": "gpt-4o-mini"}

    # Anything that changes the output changes the key.
    asyncio.run(client("Describe Paris.", stage="summary", system_prompt="sys", temperature=0.5))
    asyncio.run(client("Describe Paris.", stage="summary", system_prompt="other"))
    assert chat_count(llm_server) == 3
    assert len(cache.data) == 3
    # use_cache=False bypasses it.
    asyncio.run(client("Describe Paris.", stage="summary", system_prompt="sys", use_cache=False))
    assert chat_count(llm_server) == 4


def test_cache_key_is_canonical() -> None:
    client = LLMClient(lambda *a, **k: None, model_id="m", max_async=1, usage=UsageCounter())  # type: ignore[arg-type]
    a = client.cache_key("p", None, [], temperature=0, max_tokens=5)
    b = client.cache_key("p", None, None, max_tokens=5, temperature=0, hashing_kv=object())
    assert a == b
    assert a != client.cache_key("p", None, [], temperature=0, max_tokens=6)
    assert a != client.cache_key("p", "sys", [], temperature=0, max_tokens=5)
    other = LLMClient(lambda *a, **k: None, model_id="m2", max_async=1, usage=UsageCounter())  # type: ignore[arg-type]
    assert a != other.cache_key("p", None, [], temperature=0, max_tokens=5)


def test_empty_answers_are_not_cached(llm_server: MockLLMServer) -> None:
    cache = MemoryKV()
    llm_server.inject(Fault.empty(), Fault.empty(), Fault.empty())
    client = make_client(llm_server, cache=cache)
    assert asyncio.run(client("hi", stage="query")) == ""
    assert cache.data == {}


def test_usage_counts_per_stage(llm_server: MockLLMServer) -> None:
    usage = UsageCounter()
    client = make_client(llm_server, usage=usage)

    async def run() -> None:
        await client("a" * 400, stage="extraction")
        await client("b" * 40, stage="extraction", system_prompt="c" * 40)
        await client("question", stage="query")

    asyncio.run(run())
    snap = usage.snapshot()
    assert set(snap) == {"extraction", "query"}
    assert snap["extraction"]["calls"] == 2
    assert snap["extraction"]["prompt_tokens"] == 100 + 10 + 10
    assert snap["extraction"]["completion_tokens"] > 0
    assert snap["query"]["calls"] == 1
    assert usage.total()["calls"] == 3
    usage.reset()
    assert usage.snapshot() == {}


def test_no_llm_configured_error() -> None:
    func = openai_model_func("gpt-4o")  # env vars are cleared by the autouse fixture
    usage = UsageCounter()
    client = LLMClient(func, model_id="gpt-4o", max_async=2, usage=usage, backoff_base=0.01)
    with pytest.raises(NoLLMConfiguredError) as info:
        asyncio.run(client("hi", stage="extraction"))
    msg = str(info.value)
    assert "OPENAI_API_KEY" in msg and "OPENAI_BASE_URL" in msg
    assert "best_model_func" in msg and 'extraction="nlp"' in msg
    assert isinstance(info.value, LLMError)
    assert usage.snapshot()["extraction"]["retries"] == 0


def test_env_vars_configure_the_default_func(openai_env: MockLLMServer) -> None:
    openai_env.inject(Fault.text("from env"))
    client = LLMClient(openai_model_func("gpt-4o"), model_id="gpt-4o", max_async=2, usage=UsageCounter())
    assert asyncio.run(client("hi", stage="query")) == "from env"


def test_base_url_without_key_uses_dummy_key(llm_server: MockLLMServer) -> None:
    client = LLMClient(openai_model_func("local", base_url=llm_server.base_url), model_id="local",
                       max_async=2, usage=UsageCounter())
    assert asyncio.run(client("hi", stage="query"))


def test_user_coroutine_as_model_func() -> None:
    seen: list[dict] = []

    async def my_model(prompt: str, system_prompt: Optional[str] = None,
                       history_messages: list[dict] = [], **kwargs: Any) -> str:
        seen.append({"prompt": prompt, "system": system_prompt, "history": history_messages, **kwargs})
        return f"echo: {prompt}"

    cache = MemoryKV()
    client = LLMClient(my_model, model_id="my_model", max_async=2, usage=UsageCounter(), cache=cache)
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}]
    out = asyncio.run(client("now", stage="gleaning", history_messages=history, hashing_kv=cache, max_tokens=9))
    assert out == "echo: now"
    assert seen == [{"prompt": "now", "system": None, "history": history, "max_tokens": 9}]


def test_user_func_errors_follow_retry_policy() -> None:
    calls = 0

    async def flaky(prompt: str, system_prompt: Optional[str] = None, history_messages: list[dict] = [],
                    **kwargs: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("boom")
        if calls == 2:
            raise asyncio.TimeoutError()
        if prompt == "bad":
            raise ValueError("not retryable")
        return "fine"

    client = LLMClient(flaky, model_id="flaky", max_async=1, usage=UsageCounter(), backoff_base=0.01)
    assert asyncio.run(client("x", stage="query")) == "fine"
    assert calls == 3
    with pytest.raises(LLMError) as info:
        asyncio.run(client("bad", stage="query"))
    assert isinstance(info.value.cause, ValueError) and calls == 4


def test_retry_after_parsing() -> None:
    def exc(headers: dict[str, str]) -> Any:
        return SimpleNamespace(response=SimpleNamespace(headers=headers))

    assert retry_after_seconds(exc({"retry-after": "2"})) == 2.0
    assert retry_after_seconds(exc({"retry-after-ms": "250"})) == 0.25
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_seconds(exc({"retry-after": future})) or 0) <= 31
    assert retry_after_seconds(exc({"retry-after": "soon"})) is None
    assert retry_after_seconds(ValueError("no response")) is None


def test_build_llm_clients_from_config() -> None:
    async def custom_best(prompt: str, system_prompt: Optional[str] = None,
                          history_messages: list[dict] = [], **kwargs: Any) -> str:
        return "best"

    usage, cache = UsageCounter(), MemoryKV()
    cfg = GraphRAGConfig(working_dir="unused", best_model_func=custom_best, cheap_model_name="tiny",
                         cheap_model_max_async=3, llm_max_retries=2)
    best, cheap = build_llm_clients(cfg, usage, cache, len)
    assert best.model_id == "custom_best" and cheap.model_id == "tiny"
    assert cheap.max_async == 3 and cheap.max_retries == 2
    assert best.cache is cache and best.usage is usage and best.count_tokens is len
    assert asyncio.run(best("hi", stage="query")) == "best"

    cfg.enable_llm_cache = False
    best, cheap = build_llm_clients(cfg, usage, cache, len)
    assert best.cache is None and cheap.cache is None


def test_both_models_share_one_connection_pool(llm_server: MockLLMServer) -> None:
    cfg = GraphRAGConfig(working_dir="unused", llm_base_url=llm_server.base_url, llm_api_key="k")
    best, cheap = build_llm_clients(cfg, UsageCounter())

    async def run() -> None:
        await best("one", stage="query")
        await cheap("two", stage="summary")
        await best.aclose()
        await cheap.aclose()

    asyncio.run(run())
    assert [r["model"] for r in llm_server.chat_requests] == ["gpt-4o", "gpt-4o-mini"]
    assert llm_server.connections == 1  # the cheap model's call reused the best model's connection


def test_openai_embedding_func(llm_server: MockLLMServer) -> None:
    pytest.importorskip("graphrag.embedding")
    from graphrag.llm import openai_embedding_func

    emb = openai_embedding_func(embedding_dim=64, base_url=llm_server.base_url, api_key="k")
    vecs = asyncio.run(emb(["alpha beta", "alpha beta", "gamma"]))
    assert vecs.shape == (3, 64)
    assert abs(float((vecs[0] ** 2).sum()) - 1.0) < 1e-5
    assert (vecs[0] == vecs[1]).all() and not (vecs[0] == vecs[2]).all()


# --------------------------------------------------------------------------- the mock server itself

STORY = (
    "Marta Lindqvist opened a workshop in Norrvik. The Harbour Weaving Guild was unhappy with "
    "Marta Lindqvist. In spring, the Coastal Rail Authority delayed the Eastern Line because of "
    "extraordinary flooding near Norrvik."
)


def test_mock_server_endpoints(llm_server: MockLLMServer) -> None:
    import openai

    async def run() -> tuple[Any, Any]:
        client = openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="k", max_retries=0)
        models = await client.models.list()
        emb = await client.embeddings.create(model="any-model", input=["weaving in Norrvik", "weaving in Norrvik"])
        return models, emb

    models, emb = asyncio.run(run())
    assert any(m.id == "gpt-4o" for m in models.data)
    assert len(emb.data) == 2 and len(emb.data[0].embedding) == 64
    assert emb.data[0].embedding == emb.data[1].embedding
    stats = json.loads(urllib.request.urlopen(llm_server.base_url.rstrip("/") + "/mock/stats", timeout=5).read())
    assert stats.pop("connections") >= 2  # the SDK's keep-alive connection and this one
    assert stats == {"peak_concurrency": 0, "in_flight": 0, "calls_by_kind": {}}


def test_realistic_responder_kinds() -> None:
    prompts = pytest.importorskip("graphrag.prompts")
    from mock_llm_server import detect_kind, realistic_responder

    def ask(content: str, history: Optional[list[dict]] = None, system: Optional[str] = None) -> tuple[str, str]:
        msgs = ([{"role": "system", "content": system}] if system else []) + (history or [])
        req = {"model": "x", "messages": msgs + [{"role": "user", "content": content}]}
        return detect_kind(req), realistic_responder(req)

    extract = prompts.render("entity_extraction", entity_types="person, geo", input_text=STORY)
    kind, out = ask(extract)
    assert kind == "extraction" and "<|COMPLETE|>" in out
    assert "HARBOUR WEAVING GUILD" in out and "MARTA LINDQVIST" in out and '("relationship"' in out
    history = [{"role": "user", "content": extract}, {"role": "assistant", "content": out}]
    assert ask(prompts.render("entity_continue_extraction"), history)[0] == "gleaning_continue"
    assert ask(prompts.render("entity_if_loop_extraction"), history) == ("gleaning_check", "NO")

    kind, out = ask(prompts.render("summarize_entity_descriptions", entity_name="NORRVIK",
                                   description_list="Norrvik is a town. It is cold.<SEP>Norrvik has a workshop."))
    assert kind == "summary" and "Norrvik is a town." in out and "workshop" in out

    table = "-----Entities-----\nid,entity,type,description,degree\n0,NORRVIK,geo,A town,3\n1,MARTA,person,A weaver,2\n"
    kind, out = ask(prompts.render("community_report", input_text=table))
    assert kind == "report"
    body = out[out.index("{"): out.rindex("}") + 1]
    report = __import__("json").loads(body)
    assert "Norrvik" in report["title"] and report["findings"] and isinstance(report["rating"], float)

    kind, out = ask("Who weaves?", system=prompts.render("global_map_rag_points",
                                                         context_data="id,content\n0,Marta weaves cloth in Norrvik\n"))
    assert kind == "global_map" and '"points"' in out and "Norrvik" in out


def test_extraction_pipeline_parses_mock_output(llm_server: MockLLMServer) -> None:
    extraction = pytest.importorskip("graphrag.operators.extraction")
    client = make_client(llm_server)
    result = asyncio.run(extraction.extract_chunk(STORY, llm=client, entity_types=["person", "geo"], max_gleaning=1))
    names = {e["name"] for e in result["entities"]}
    assert {"MARTA LINDQVIST", "NORRVIK"} <= names
    assert result["relations"]
    assert llm_server.calls_by_kind["extraction"] == 1 and llm_server.calls_by_kind["gleaning_continue"] == 1
    assert set(client.usage.snapshot()) == {"extraction", "gleaning"}


def test_a_freed_slot_is_used_before_the_previous_answer_is_processed():
    """The next waiting call sends its request before the caller of the finished one resumes
    (parsing, the next prompt...), so the slot does not sit idle meanwhile."""
    events: list[str] = []

    async def func(prompt: str, **kwargs: Any) -> str:
        events.append(f"start {prompt}")
        await asyncio.sleep(0.01)
        return f"answer {prompt}"

    client = LLMClient(func, model_id="m", max_async=1, usage=UsageCounter())

    async def caller(prompt: str) -> None:
        await client(prompt, stage="extraction")
        events.append(f"done {prompt}")

    async def main() -> None:
        await asyncio.gather(caller("a"), caller("b"))

    asyncio.run(main())
    assert events.index("start b") < events.index("done a")


def test_mock_latency_is_the_whole_request_time_its_own_work_included():
    """Benchmarks set the mock's latency to stand for the model's: the mock's own work to
    compose an answer falls inside it rather than being added on top."""
    import json as _json
    import urllib.request

    def slow_responder(req: dict) -> str:
        time.sleep(0.15)
        return "done"

    with MockLLMServer(responder=slow_responder, latency=0.3) as server:
        body = _json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=5) as response:
            answer = _json.loads(response.read())
        elapsed = time.perf_counter() - started
    assert answer["choices"][0]["message"]["content"] == "done"
    assert 0.3 <= elapsed < 0.42  # not 0.45: the 0.15 s of work is inside the 0.3 s


# --------------------------------------------------------------------------- background client build


def test_clients_are_built_once_in_a_worker_thread_and_shared_by_concurrent_callers() -> None:
    import threading

    from graphrag.aio import PerLoopBuiltInThread

    built_on: list[int] = []
    release = threading.Event()

    def factory() -> object:
        built_on.append(threading.get_ident())
        release.wait(5)  # slow, like imports and a TLS context
        return object()

    pool = PerLoopBuiltInThread(factory)

    async def run() -> list[object]:
        pool.warm_up()
        pool.warm_up()  # already building: no second build
        getters = [asyncio.ensure_future(pool.aget()) for _ in range(5)]
        await asyncio.sleep(0.05)
        assert not any(g.done() for g in getters)  # they wait for the build, the loop keeps running
        release.set()
        return list(await asyncio.gather(*getters)) + [await pool.aget()]

    loop_thread = threading.get_ident()
    items = asyncio.run(run())
    assert len(built_on) == 1 and built_on[0] != loop_thread
    assert all(item is items[0] for item in items)


def test_a_failed_client_build_is_raised_to_callers_and_not_kept(recwarn: Any) -> None:
    from graphrag.aio import PerLoopBuiltInThread

    attempts: list[int] = []

    def factory() -> object:
        attempts.append(1)
        if len(attempts) < 3:
            raise NoLLMConfiguredError("no LLM")
        return "client"

    pool = PerLoopBuiltInThread(factory)

    async def run() -> object:
        pool.warm_up()  # fails in the background: nothing raised or logged here
        await asyncio.sleep(0.1)
        with pytest.raises(NoLLMConfiguredError):
            await pool.aget()  # a fresh build, failing again, reaches the caller
        return await pool.aget()

    assert asyncio.run(run()) == "client"
    assert len(attempts) == 3
    assert not [w for w in recwarn if "never retrieved" in str(w.message)]


def test_closing_waits_for_a_build_under_way(llm_server: MockLLMServer) -> None:
    from graphrag.llm import openai_clients

    pool = openai_clients(llm_server.base_url, "k")  # the SDK clients streamed calls go through
    func = openai_model_func("gpt-4o-mini", clients=pool)

    async def run() -> Any:
        pool.warm_up()
        building = pool._building[asyncio.get_running_loop()]
        await func.aclose()  # the client built meanwhile is closed, not left open
        assert not pool._items
        return building.result()

    client = asyncio.run(run())
    assert client.is_closed()
    assert chat_count(llm_server) == 0


def test_warm_up_then_call_uses_the_warmed_client(llm_server: MockLLMServer) -> None:
    client = make_client(llm_server)

    async def run() -> str:
        client.warm_up()
        answer = await client("hello", stage="query")
        await client.aclose()
        return answer

    assert asyncio.run(run())
    assert llm_server.connections == 1


def test_a_caller_waiting_for_a_build_gets_it_even_if_it_is_closed_meanwhile() -> None:
    """A caller gets the build's result even when the loop's entry is gone as it resumes: popped
    by a close, or (a caller that finds the build just done) not stored yet."""
    import threading

    from graphrag.aio import PerLoopBuiltInThread

    release = threading.Event()

    def factory() -> object:
        release.wait(5)
        return object()

    pool = PerLoopBuiltInThread(factory)

    async def run() -> tuple[object, object]:
        pool.warm_up()
        getting = asyncio.ensure_future(pool.aget())
        await asyncio.sleep(0.02)
        closed: list[object] = []
        # A close that gets in first: right after the build is stored, before the caller resumes.
        pool._building[asyncio.get_running_loop()].add_done_callback(lambda _: closed.append(pool.pop()))
        release.set()
        return await getting, closed[0]

    got, closed = asyncio.run(run())
    assert got is closed is not None


# --------------------------------------------------------------------------- shared TLS context


def _record_http_clients(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Swap openai's default HTTP client class for one that notes the ``verify`` it was given."""
    import openai

    given: list[Any] = []

    class Recording(openai.DefaultAsyncHttpxClient):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            given.append(kwargs.get("verify"))
            super().__init__(**kwargs)

    monkeypatch.setattr(openai, "DefaultAsyncHttpxClient", Recording)
    return given


def test_every_openai_client_of_the_process_shares_one_tls_context(
        llm_server: MockLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    from graphrag.llm import openai_transport

    monkeypatch.setattr(openai_transport, "_TLS_CONTEXTS", {})
    given = _record_http_clients(monkeypatch)

    async def ask(func: Any) -> str:
        try:  # a streamed call: the SDK's client (the others go over the func's own connections)
            return "".join([piece async for piece in func.stream("hello")])
        finally:
            await func.aclose()

    # Two sync calls' worth of clients (each event loop builds its own), and an embedding client.
    for _ in range(2):
        func = openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k")
        assert asyncio.run(ask(func))
    openai_transport.openai_embedding_func(base_url=llm_server.base_url, api_key="k", embedding_dim=8)
    assert len(given) == 2
    assert isinstance(given[0], ssl.SSLContext) and given[1] is given[0]
    assert openai_transport.shared_tls_context().result() is given[0]


def test_a_failed_tls_context_build_falls_back_to_the_clients_own_and_is_not_kept(
        llm_server: MockLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphrag.llm import openai_transport

    monkeypatch.setattr(openai_transport, "_TLS_CONTEXTS", {})
    real_build = openai_transport._build_tls_context
    monkeypatch.setattr(openai_transport, "_build_tls_context", lambda future: future.set_exception(OSError("no CA bundle")))
    given = _record_http_clients(monkeypatch)

    async def ask() -> str:
        func = openai_model_func("gpt-4o-mini", base_url=llm_server.base_url, api_key="k")
        try:
            return "".join([piece async for piece in func.stream("hello")])
        finally:
            await func.aclose()

    assert asyncio.run(ask())  # openai built its own TLS context; the call still works
    assert given == []
    monkeypatch.setattr(openai_transport, "_build_tls_context", real_build)
    assert openai_transport.shared_tls_context().result() is not None  # the failure was not kept


def test_the_shared_tls_context_follows_the_ca_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import ssl

    from graphrag.llm import openai_transport

    cafile = ssl.get_default_verify_paths().openssl_cafile
    if not os.path.isfile(cafile):
        pytest.skip("no system CA file to point SSL_CERT_FILE at")
    monkeypatch.setattr(openai_transport, "_TLS_CONTEXTS", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    default = openai_transport.shared_tls_context().result()
    monkeypatch.setenv("SSL_CERT_FILE", cafile)
    assert openai_transport.shared_tls_context().result() is not default
    monkeypatch.delenv("SSL_CERT_FILE")
    assert openai_transport.shared_tls_context().result() is default
