"""The chat dialects, driven by the official `openai` and `ollama` clients against uvicorn, behind
the API key: one model per registered mode, answers with their citations, streamed and not."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import httpx
import ollama
import openai
import pytest

from graphrag import __version__
from graphrag.operators.modes import mode_names
from graphrag.server.app import build_app
from graphrag.server.service import GraphService
from helpers_server import DOCS, build_index, index_config, running
from mock_llm_server import MockLLMServer

KEY = "chat-key-0123456789abcdef"
QUESTION = "Where is Brightwater Instruments based?"
MODELS = [f"graphrag-{mode}" for mode in mode_names()]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wd = tmp_path_factory.mktemp("chat") / "wd"
    build_index(wd)
    with MockLLMServer(stream_chunk_delay=0.01) as llm:
        service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="test-key"))
        with running(build_app(service, api_key=KEY)) as base:
            yield base


def cited(text: str) -> bool:
    """An answer citing [n] and ending with its reference list, naming an indexed document."""
    return "References:" in text and "[1]" in text and any(source in text.split("References:")[1] for source in DOCS)


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)


def test_openai_models_are_the_registered_modes(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == MODELS
    assert client.models.retrieve("graphrag-hybrid").id == "graphrag-hybrid"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_openai_chat_answers_with_citations_in_every_mode(client: openai.OpenAI) -> None:
    for model in MODELS:
        reply = client.chat.completions.create(model=model, messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Who founded Ashcombe Mills?"},
            {"role": "assistant", "content": "Tobias Wren."},
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]}])
        assert reply.object == "chat.completion" and reply.model == model
        assert reply.choices[0].message.role == "assistant" and reply.choices[0].finish_reason == "stop"
        assert cited(reply.choices[0].message.content), (model, reply.choices[0].message.content)


def test_openai_chat_streams_chunks_ending_with_done(client: openai.OpenAI, url: str) -> None:
    stream = client.chat.completions.create(model="graphrag-local", stream=True,
                                            messages=[{"role": "user", "content": QUESTION}])
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert cited(text)
    # On the wire: OpenAI's chunk objects, then the closing sentinel.
    with httpx.stream("POST", f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": "graphrag-naive", "stream": True,
                            "messages": [{"role": "user", "content": QUESTION}]}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert all(json.loads(d)["object"] == "chat.completion.chunk" for d in data[:-1])


def test_cited_answers_stream_in_pieces_with_the_reference_list_last(client: openai.OpenAI,
                                                                     ollama_client: "ollama.Client") -> None:
    # Questions no other test asks: not in the LLM cache, so the model writes them as they stream.
    asked = [{"role": "user", "content": "Who founded Brightwater Instruments, in pieces?"}]
    openai_pieces = [c.choices[0].delta.content for c in client.chat.completions.create(
        model="graphrag-naive", stream=True, messages=asked) if c.choices[0].delta.content]
    asked_again = [{"role": "user", "content": "Where is Kestrel Harbor, in pieces?"}]
    ollama_pieces = [p.message.content for p in ollama_client.chat(
        model="graphrag-local", stream=True, messages=asked_again) if p.message.content]
    for pieces, model, messages in ((openai_pieces, "graphrag-naive", asked),
                                    (ollama_pieces, "graphrag-local", asked_again)):
        answer = "".join(pieces[:-1])
        assert len(pieces) > 3 and "[1]" in answer and "References:" not in answer, pieces
        assert pieces[-1].startswith("\n\nReferences:\n") and cited("".join(pieces))
        # The same text as the answer not streamed (cached by the stream).
        whole = client.chat.completions.create(model=model, messages=messages)
        assert whole.choices[0].message.content == "".join(pieces)


def test_openai_errors(client: openai.OpenAI, url: str) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="graphrag-local", messages=[{"role": "system", "content": "Hello"}])
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{url}/v1", api_key="wrong-key", max_retries=0).models.list()


@pytest.fixture(scope="module")
def ollama_client(url: str) -> ollama.Client:
    return ollama.Client(host=url, headers={"Authorization": f"Bearer {KEY}"})


def test_ollama_tags_and_version(ollama_client: ollama.Client, url: str) -> None:
    assert [m.model for m in ollama_client.list().models] == [f"{m}:latest" for m in MODELS]
    shown = ollama_client.show("graphrag-naive:latest")
    assert shown.modelinfo["graphrag.mode"] == "naive" and "completion" in shown.capabilities
    version = httpx.get(f"{url}/api/version", headers={"Authorization": f"Bearer {KEY}"})
    assert version.json() == {"version": __version__}
    assert httpx.get(f"{url}/api/tags").status_code == 401  # the key, as on every other path


def test_ollama_chat_streamed_and_not(ollama_client: ollama.Client) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    whole = ollama_client.chat(model="graphrag-hybrid:latest", messages=messages)
    assert whole.done and whole.message.role == "assistant" and cited(whole.message.content)
    parts = list(ollama_client.chat(model="graphrag-local", messages=messages, stream=True))
    assert parts[-1].done and parts[-1].done_reason == "stop" and not any(p.done for p in parts[:-1])
    assert cited("".join(p.message.content for p in parts))


def test_ollama_generate_streamed_and_not(ollama_client: ollama.Client) -> None:
    whole = ollama_client.generate(model="graphrag-naive", prompt=QUESTION)
    assert whole.done and cited(whole.response)
    parts = list(ollama_client.generate(model="graphrag-global", prompt=QUESTION, stream=True))
    assert parts[-1].done and cited("".join(p.response for p in parts))
    loaded = ollama_client.generate(model="graphrag-local", prompt="")  # how clients load a model
    assert loaded.done and loaded.response == ""
    with pytest.raises(ollama.ResponseError) as refused:
        ollama_client.chat(model="llama3", messages=[{"role": "user", "content": QUESTION}])
    assert refused.value.status_code == 404


def test_a_failure_after_streaming_began_ends_each_stream_with_an_error(tmp_path: Path) -> None:
    """No LLM server answering: the failure reaches each client as its dialect's error."""
    wd = tmp_path / "wd"
    build_index(wd)
    service = GraphService(index_config(wd, llm_base_url="http://127.0.0.1:9/v1", llm_api_key="k",
                                        llm_max_retries=0))
    with running(build_app(service)) as base:
        stream = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0).chat.completions.create(
            model="graphrag-naive", stream=True, messages=[{"role": "user", "content": QUESTION}])
        with pytest.raises(openai.APIError):
            list(stream)
        with pytest.raises(ollama.ResponseError):
            list(ollama.Client(host=base).chat(model="graphrag-naive", stream=True,
                                               messages=[{"role": "user", "content": QUESTION}]))


def test_earlier_turns_reach_the_answer_model_and_a_clients_system_message_does_not(tmp_path: Path) -> None:
    """A follow-up in a chat: the model answering it reads the user and assistant turns before
    the question (after the engine's own system prompt), in both dialects, over /query too."""
    wd = tmp_path / "wd"
    build_index(wd)
    turns = [{"role": "user", "content": "Who founded Ashcombe Mills?"},
             {"role": "assistant", "content": "Tobias Wren founded it [1]."}]
    with MockLLMServer() as llm:
        service = GraphService(index_config(wd, llm_base_url=llm.base_url, llm_api_key="test-key"))
        with running(build_app(service)) as base:
            def last_answer_messages() -> list[dict]:
                messages = llm.chat_requests[-1]["messages"]
                llm.reset()
                return messages

            openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0).chat.completions.create(
                model="graphrag-hybrid", messages=[{"role": "system", "content": "Answer like a pirate."},
                                                   *turns, {"role": "user", "content": QUESTION}])
            sent = last_answer_messages()
            assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
            assert sent[1:3] == turns and sent[3]["content"] == QUESTION
            assert "pirate" not in json.dumps(sent) and "Brightwater" in sent[0]["content"]

            ollama.Client(host=base).chat(model="graphrag-local", stream=False,
                                          messages=[*turns, {"role": "user", "content": QUESTION}])
            assert last_answer_messages()[1:3] == turns

            answered = httpx.post(f"{base}/query", json={"question": QUESTION, "mode": "naive",
                                                         "conversation_history": turns})
            assert answered.status_code == 200 and last_answer_messages()[1:3] == turns
            refused = httpx.post(f"{base}/query", json={"question": QUESTION, "mode": "naive",
                                                        "conversation_history": [{"role": "tool", "content": "x"}]})
            assert refused.status_code == 400 and "conversation_history[0]" in refused.json()["message"]
            # A lone surrogate in an earlier turn (JSON escapes carry one) is the client's error.
            not_unicode = '{"role": "user", "content": "a\\ud800"}'
            for path, body in [("/query", '{"question": "%s", "conversation_history": [%s]}'),
                               ("/v1/chat/completions", '{"model": "graphrag-naive", "messages": [%s, {"role": "user", "content": "%s"}]}'),
                               ("/api/chat", '{"model": "graphrag-naive", "stream": false, "messages": [%s, {"role": "user", "content": "%s"}]}')]:
                parts = (QUESTION, not_unicode) if path == "/query" else (not_unicode, QUESTION)
                refused = httpx.post(f"{base}{path}", content=(body % parts).encode(),
                                     headers={"content-type": "application/json"})
                assert refused.status_code == 400 and "Unicode" in refused.json()["message"], path
