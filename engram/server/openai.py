"""The OpenAI-compatible memory proxy: `POST /v1/chat/completions`, `GET /v1/models`.

Point any OpenAI client or chat front-end (Open WebUI, SillyTavern, the `openai` SDK) at
`http://<engram>/v1` and put `[DiscussionId]my-chat[/DiscussionId]` in a message: that discussion gets
memory (`engram.api.completions` has the rules). The wire format is OpenAI's: a `chat.completion`
object, or with `"stream": true` server-sent events of `chat.completion.chunk` objects ending with
`data: [DONE]`. The reply exists before the stream starts (the respond task is not streamed from the
model), so an LLM outage is still a plain JSON error with status 502/503 and no half-written stream.

Which agent: the `X-Engram-Agent` header, else a `model` of the form `engram/<agent>` (GET /v1/models
lists one per agent the key may touch), else the key's only agent, else `proxy.defaultAgent`
("default"). Any other model name is accepted and answered by the configured LLM (front-ends send the
model they were set up with). The key's agents bound all of it.

Each response carries engram's timings: `X-Engram-Memory-Ms` (engram's own work in the request) and
`X-Engram-Llm-Ms` (the model's), and `X-Engram-Discussion` when memory was on.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from engram.api import types as t
from engram.api.errors import error, translate
from engram.server.auth import authenticate
from engram.server.endpoint import error_responses, json_response

router = APIRouter(tags=["openai"])
MODEL_PREFIX = "engram/"
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
         "function": "tool"}
STREAM_PIECE_CHARS = 24  # a chunk's delta: a few words


class OaiMessage(msgspec.Struct, kw_only=True):
    """An OpenAI message; fields engram does not use (tool_calls, refusal, audio…) are accepted and ignored."""

    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


class OaiRequest(msgspec.Struct, kw_only=True):
    """OpenAI's chat completion request; sampling fields (temperature, top_p…) are accepted and ignored: the
    configured LLM's presets decide them."""

    model: str
    messages: list[OaiMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int = 1


_DECODER = msgspec.json.Decoder(OaiRequest)


def text_of(message: OaiMessage, index: int) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    parts = []
    for part in message.content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise error("malformed_messages", f"messages[{index}]: content part of type {part.get('type')!r}; engram's "
                        "proxy takes text parts only")
        parts.append(part["text"])
    return "\n".join(parts)


def parse_request(raw: bytes) -> OaiRequest:
    if not raw.strip():
        raise error("invalid_request", "the request body is empty; expected an OpenAI chat completion request")
    try:
        req = _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"chat completion request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise error("invalid_request", f"the request body is not valid JSON: {exc}") from None
    if not req.messages:
        raise error("malformed_messages", "messages is empty: send the conversation (at least one user message)")
    if req.n != 1:
        raise error("invalid_request", "n must be 1: engram's proxy answers with one choice")
    return req


def completion_request(req: OaiRequest) -> t.CompletionRequest:
    turns = []
    for i, m in enumerate(req.messages):
        role = ROLES.get(m.role)
        if role is None:
            raise error("malformed_messages", f"messages[{i}].role {m.role!r} is not one of {', '.join(sorted(ROLES))}")
        turns.append(t.ChatTurn(role=role, content=text_of(m, i), name=m.name))
    return t.CompletionRequest(messages=turns, max_tokens=req.max_completion_tokens or req.max_tokens)


def choose_agent(request: Request, model: str, principal, default_agent: str) -> str:
    from engram.ids import validate_agent

    named = request.headers.get("x-engram-agent")
    if not named and model.startswith(MODEL_PREFIX) and len(model) > len(MODEL_PREFIX):
        named = model[len(MODEL_PREFIX):]
    if not named and principal.agents is not None and len(principal.agents) == 1:
        named = next(iter(principal.agents))
    agent = validate_agent(named or default_agent)
    principal.require(agent)
    return agent


def _headers(result: t.CompletionResponse) -> dict[str, str]:
    out = {"X-Engram-Memory-Ms": f"{result.memory_ms:.2f}", "X-Engram-Llm-Ms": f"{result.llm_ms:.2f}",
           "X-Engram-Agent": result.agent, "X-Engram-Responder": result.responder}
    if result.discussion:
        out["X-Engram-Discussion"] = result.discussion
    return out


def _usage(result: t.CompletionResponse) -> dict:
    return {"prompt_tokens": result.input_tokens, "completion_tokens": result.output_tokens,
            "total_tokens": result.input_tokens + result.output_tokens}


def pieces(text: str, size: int = STREAM_PIECE_CHARS) -> list[str]:
    """`text` as stream deltas of about `size` characters, cut after whitespace (joined they give `text`)."""
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end + 1)
            end = space + 1 if space > start else end
        out.append(text[start:end])
        start = end
    return out


def _sse(chunks):
    for chunk in chunks:
        yield b"data: " + msgspec.json.encode(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"


@router.post("/v1/chat/completions", summary="OpenAI-compatible chat completion with memory",
             responses={**error_responses("invalid_id", "malformed_messages", "conflict", "unknown_agent", "bad_workflow",
                                          "llm_error", "llm_unavailable"),
                        200: {"description": "a chat.completion object, or (stream) text/event-stream of "
                                             "chat.completion.chunk objects ending with `data: [DONE]`"}},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["model", "messages"],
                 "properties": {"model": {"type": "string"}, "stream": {"type": "boolean"},
                                "max_tokens": {"type": "integer", "minimum": 1},
                                "messages": {"type": "array", "minItems": 1, "items": {
                                    "type": "object", "required": ["role"],
                                    "properties": {"role": {"type": "string", "enum": sorted(ROLES)},
                                                   "content": {"type": "string"}, "name": {"type": "string"}}}}}}}}}})
async def chat_completions(request: Request):
    """OpenAI's chat completion. A `[DiscussionId]…[/DiscussionId]` tag in any message switches memory on: new
    messages are appended once, the memory workflow injects summary, memories and recall into the system prompt,
    the reply is appended, memory creation runs after the response. Without a tag: no memory, nothing appended."""
    state = request.app.state
    if state.api is None:
        from engram.server.app import ensure_state

        await run_in_threadpool(ensure_state, state)
    principal = authenticate(request)
    req = parse_request(await request.body())
    agent = choose_agent(request, req.model, principal, state.api.config.proxy.default_agent)
    body = completion_request(req)
    try:
        result: t.CompletionResponse = await run_in_threadpool(state.api.complete, agent, body)
    except Exception as exc:
        refused = translate(exc)
        if refused is None:
            raise
        raise refused from None
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    if not req.stream:
        return Response(msgspec.json.encode({
            "id": ident, "object": "chat.completion", "created": created, "model": req.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(result),
        }), media_type="application/json", headers=_headers(result))

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None, choices: bool = True) -> dict:
        out = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": req.model,
               "system_fingerprint": None,
               "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else []}
        if usage is not None:
            out["usage"] = usage
        return out

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": p}) for p in pieces(result.reply)]
    chunks.append(chunk({}, "stop"))
    if req.stream_options is not None and req.stream_options.include_usage:
        chunks.append(chunk({}, usage=_usage(result), choices=False))
    return StreamingResponse(_sse(chunks), media_type="text/event-stream",
                             headers={**_headers(result), "Cache-Control": "no-cache"})


@router.get("/v1/models", summary="The models engram answers as (OpenAI's list)",
            responses=error_responses())
async def models(request: Request):
    """`engram` (the default agent, or the key's only agent) and `engram/<agent>` for every agent the key may touch:
    a front-end picks the agent by picking the model."""
    state = request.app.state
    if state.api is None:
        from engram.server.app import ensure_state

        await run_in_threadpool(ensure_state, state)
    principal = authenticate(request)
    agents = await run_in_threadpool(state.api.known_agents)
    visible = sorted(a for a in agents if principal.may(a))
    if principal.agents is not None:
        visible = sorted(set(visible) | set(principal.agents))
    created = 0
    data = [{"id": "engram", "object": "model", "created": created, "owned_by": "engram"}]
    data += [{"id": f"{MODEL_PREFIX}{a}", "object": "model", "created": created, "owned_by": "engram"} for a in visible]
    return json_response({"object": "list", "data": data})
