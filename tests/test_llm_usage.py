"""Token usage comes from the server when it reports it; request options stay out of the body."""
from __future__ import annotations

import asyncio

from graphrag.llm import Completion, LLMClient, UsageCounter, openai_model_func


def test_server_reported_usage_is_recorded():
    async def model(prompt, system_prompt=None, history_messages=[], **kwargs):
        return Completion("an answer", 123, 7)

    usage = UsageCounter()
    client = LLMClient(model, model_id="m", max_async=2, usage=usage, count_tokens=lambda t: 10**6)
    answer = asyncio.run(client("question", stage="query"))
    assert answer == "an answer" and type(answer) is str
    assert usage.snapshot()["query"]["prompt_tokens"] == 123
    assert usage.snapshot()["query"]["completion_tokens"] == 7


def test_counts_with_tokenizer_when_server_is_silent():
    async def model(prompt, system_prompt=None, history_messages=[], **kwargs):
        return "four words right here"

    usage = UsageCounter()
    client = LLMClient(model, model_id="m", max_async=2, usage=usage, count_tokens=lambda t: len(t.split()))
    asyncio.run(client("two words", stage="query", system_prompt="three more words"))
    assert usage.snapshot()["query"]["prompt_tokens"] == 5
    assert usage.snapshot()["query"]["completion_tokens"] == 4


def test_openai_func_sends_options_outside_the_body(llm_server):
    func = openai_model_func("gpt-test", base_url=llm_server.base_url, api_key="k")
    answer = asyncio.run(func("Say hi", system_prompt="Be brief", temperature=0.0, timeout=30,
                              extra_headers={"X-Trace": "1"}, extra_body={"seed": 7}))
    assert isinstance(answer, Completion) and answer
    body = llm_server.chat_requests[-1]
    assert body["model"] == "gpt-test" and body["temperature"] == 0.0 and body["seed"] == 7
    assert body["messages"][0] == {"role": "system", "content": "Be brief"}
    assert "timeout" not in body and "extra_headers" not in body and "extra_body" not in body
    assert answer.prompt_tokens is not None


def test_waiting_calls_get_slots_lowest_priority_first():
    order: list[str] = []
    gate = asyncio.Event()

    async def model(prompt, system_prompt=None, history_messages=[], **kwargs):
        if prompt == "first":
            await gate.wait()
        order.append(prompt)
        return "ok"

    async def main():
        client = LLMClient(model, model_id="m", max_async=1, usage=UsageCounter(), count_tokens=len)
        first = asyncio.create_task(client("first", stage="x"))
        await asyncio.sleep(0.01)  # "first" holds the only slot
        waiting = [asyncio.create_task(client(p, stage="x", priority=prio))
                   for p, prio in (("leaf-a", 0), ("parent", -2), ("leaf-b", 0), ("middle", -1))]
        await asyncio.sleep(0.01)
        waiting[1].cancel()  # a cancelled waiter must not swallow a slot
        gate.set()
        await first
        await asyncio.gather(*waiting, return_exceptions=True)

    asyncio.run(main())
    assert order == ["first", "middle", "leaf-a", "leaf-b"]
