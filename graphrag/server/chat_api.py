"""The index as a chat model, in the two dialects chat front-ends speak: OpenAI's
(``/v1/chat/completions``, ``/v1/models``) and Ollama's (``/api/chat``, ``/api/generate``,
``/api/tags``, ``/api/show``, ``/api/version``), so Open WebUI or any OpenAI or Ollama client can use it.

Each registered query mode is one model, ``graphrag-<mode>`` (Ollama clients may add a tag,
``:latest``). The last user message is the question, which the search reads; the user and
assistant turns before it are the conversation the answer model reads
(``QueryParam.conversation_history``). A client's system messages are not sent: the engine's
answer prompt, holding the retrieved context, is the system prompt. Every answer is the cited
one (``with_references``): it cites ``[n]`` and ends with the reference list; streamed, the
text comes as it is written and the reference list as the last piece (these protocols carry
text only).
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Optional, Union

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from graphrag import __version__
from graphrag.errors import GraphRAGError, InvalidInputError
from graphrag.operators.modes import MODES, mode_names
from graphrag.query_param import HISTORY_ROLES, QueryParam
from graphrag.server.errors import error_body
from graphrag.server.service import GraphService

if TYPE_CHECKING:
    from graphrag.schema import JSONValue

logger = logging.getLogger(__name__)

MODEL_PREFIX = "graphrag-"
OWNER = "graphrag"
DETAILS = {"format": OWNER, "family": OWNER, "families": [OWNER], "parameter_size": "", "quantization_level": ""}


def model_names() -> list[str]:
    """One model per registered query mode."""
    return [MODEL_PREFIX + mode for mode in mode_names()]


def mode_of(model: str) -> str:
    """The query mode a model name selects; 404 for a name that is not one of ours."""
    mode = model.split(":", 1)[0].removeprefix(MODEL_PREFIX) if model.startswith(MODEL_PREFIX) else None
    if mode not in MODES:
        raise HTTPException(404, f"no model {model!r}; the models are {', '.join(model_names())}")
    return mode


class Message(BaseModel):
    """A chat turn; content as text or as OpenAI's list of parts (only text parts are read)."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: Union[str, list[dict[str, Any]], None] = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    """What both dialects send to chat; the sampling options they add are accepted and unused
    (the engine's model settings decide)."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[Message]
    stream: Optional[bool] = None


class ShowRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str


class GenerateRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    prompt: str = ""
    stream: bool = True


def conversation_of(messages: list[Message]) -> tuple[str, list[dict[str, str]]]:
    """The last user message's text (the question the engine answers) and the user and
    assistant turns with text before it, oldest first."""
    for last in range(len(messages) - 1, -1, -1):
        if messages[last].role == "user" and messages[last].text().strip():
            history = [{"role": m.role, "content": m.text()} for m in messages[:last]
                       if m.role in HISTORY_ROLES and m.text().strip()]
            return messages[last].text(), history
    raise InvalidInputError("no user message with text to answer")


def cited_param(model: str, history: Optional[list[dict[str, str]]] = None) -> QueryParam:
    return QueryParam(mode=mode_of(model), with_references=True, conversation_history=history or [])


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def _sse(data: JSONValue) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _ndjson(data: JSONValue) -> str:
    return json.dumps(data, ensure_ascii=False) + "\n"


def chat_router(service: GraphService) -> APIRouter:
    """The OpenAI- and Ollama-compatible routes over ``service``'s reader."""
    router = APIRouter()

    # ------------------------------------------------------------------ OpenAI

    @router.get("/v1/models", tags=["chat"], summary="OpenAI: the models, one per query mode")
    async def openai_models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": OWNER}
                                           for name in model_names()]}

    @router.get("/v1/models/{model}", tags=["chat"], summary="OpenAI: one model")
    async def openai_model(model: str) -> dict[str, Any]:
        mode_of(model)
        return {"id": model, "object": "model", "created": 0, "owned_by": OWNER}

    @router.post("/v1/chat/completions", tags=["chat"], response_model=None,
                 summary="OpenAI: answer the last user message, cited, in the model's mode (stream=true for SSE)")
    async def openai_chat(body: ChatRequest) -> Union[dict[str, Any], StreamingResponse]:
        question, history = conversation_of(body.messages)
        param = cited_param(body.model, history)
        completion_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if not body.stream:
            text = await service.query(question, param)
            return {"id": completion_id, "object": "chat.completion", "created": created, "model": body.model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}]}

        def chunk(delta: dict[str, Any], finish: Optional[str] = None) -> str:
            return _sse({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                         "model": body.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        async def events() -> AsyncIterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            try:
                async for piece in service.query_stream(question, param):
                    yield chunk({"content": piece})
                yield chunk({}, "stop")
            except Exception as exc:  # the status line is sent: the error is the last chunk
                body = _failed_stream(exc)
                yield _sse({"error": {"message": body["message"], "type": body["error"]}})
            yield "data: [DONE]\n\n"

        return _streaming(events(), "text/event-stream")

    # ------------------------------------------------------------------ Ollama

    @router.get("/api/version", tags=["chat"], summary="Ollama: the server's version")
    async def ollama_version() -> dict[str, str]:
        return {"version": __version__}

    @router.get("/api/tags", tags=["chat"], summary="Ollama: the models, one per query mode")
    async def ollama_tags() -> dict[str, Any]:
        return {"models": [{"name": f"{name}:latest", "model": f"{name}:latest", "modified_at": _now_iso(),
                            "size": 0, "digest": hashlib.sha256(name.encode()).hexdigest(), "details": DETAILS}
                           for name in model_names()]}

    @router.post("/api/show", tags=["chat"], summary="Ollama: what a model is (its query mode)")
    async def ollama_show(body: ShowRequest) -> dict[str, Any]:
        mode = mode_of(body.model)
        return {"modelfile": "", "parameters": "", "template": "", "details": DETAILS,
                "model_info": {"graphrag.mode": mode, "graphrag.description": MODES[mode].description},
                "capabilities": ["completion"], "modified_at": _now_iso()}

    @router.post("/api/chat", tags=["chat"], response_model=None,
                 summary="Ollama: answer the last user message, cited (streamed as NDJSON unless stream=false)")
    async def ollama_chat(body: ChatRequest) -> Union[dict[str, Any], StreamingResponse]:
        question, history = conversation_of(body.messages)
        return await _ollama_answer(service, body.model, question, cited_param(body.model, history),
                                    body.stream is not False,
                                    lambda text: {"message": {"role": "assistant", "content": text}})

    @router.post("/api/generate", tags=["chat"], response_model=None,
                 summary="Ollama: answer the prompt, cited (streamed as NDJSON unless stream=false)")
    async def ollama_generate(body: GenerateRequest) -> Union[dict[str, Any], StreamingResponse]:
        param = cited_param(body.model)
        if not body.prompt.strip():  # how Ollama clients load a model before use: nothing to answer
            return {"model": body.model, "created_at": _now_iso(), "response": "", "done": True,
                    "done_reason": "load"}
        return await _ollama_answer(service, body.model, body.prompt, param, body.stream,
                                    lambda text: {"response": text})

    return router


async def _ollama_answer(service: GraphService, model: str, question: str, param: QueryParam, stream: bool,
                         shape: Callable[[str], dict[str, Any]]) -> Union[dict[str, Any], StreamingResponse]:
    """An Ollama reply: one object, or NDJSON lines of pieces then a ``done`` line."""
    started = time.monotonic_ns()

    def reply(text: str, done: bool) -> dict[str, Any]:
        timing = {"done_reason": "stop", "total_duration": time.monotonic_ns() - started} if done else {}
        return {"model": model, "created_at": _now_iso(), **shape(text), "done": done, **timing}

    if not stream:
        return reply(await service.query(question, param), True)

    async def lines() -> AsyncIterator[str]:
        try:
            async for piece in service.query_stream(question, param):
                yield _ndjson(reply(piece, False))
            yield _ndjson(reply("", True))
        except Exception as exc:  # the status line is sent: the error is the last line
            yield _ndjson({"error": _failed_stream(exc)["message"]})

    return _streaming(lines(), "application/x-ndjson")


def _failed_stream(exc: BaseException) -> dict[str, Any]:
    """What a client is told of a failure after streaming began; a bug is logged."""
    if not isinstance(exc, GraphRAGError):
        logger.error("streamed chat answer failed", exc_info=exc)
    return error_body(exc)


def _streaming(body: AsyncIterator[str], media_type: str) -> StreamingResponse:
    return StreamingResponse(body, media_type=media_type, headers={"Cache-Control": "no-store"})
