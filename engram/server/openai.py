"""The OpenAI-compatible memory proxy: `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`.

Point any OpenAI client or chat front-end (Open WebUI, SillyTavern, the `openai` SDK) at
`http://<engram>/v1` and put `[DiscussionId]my-chat[/DiscussionId]` in a message: that discussion gets
memory (`engram.api.completions` has the rules). The wire format is OpenAI's: a `chat.completion`
object, or with `"stream": true` server-sent events of `chat.completion.chunk` objects ending with
`data: [DONE]`, sent as the model produces its tokens (the endpoint `llm.tasks.respond` routes to streams them,
whatever its apiType; the labelled offline responder's answer exists at once and is sent a few words per chunk).
The front end's samplers (temperature, top_p, max_tokens, stop, seed) go with the reply's call unless its preset
says `frontEndSamplers: "override"`. `/v1/completions` is OpenAI's text completion, with the same memory rules
(`text_request` says how a prompt becomes messages) and `text_completion` objects on the wire.
Tool definitions (`tools`, `functions`, a `tool_choice`/`function_call` that demands a call) are refused with a 400
in OpenAI's error shape whose `param` names the field, as the Ollama door refuses `tools` (`refuse_tools`): engram's
replies are text, and a field answered as if it were not there would be a silent drop.
The stream starts with the reply's first text: a request refused before it (bad body, unknown agent, an
LLM outage before the first token) is a plain JSON error with its status. A model error after it ends the
stream with an OpenAI error event, `data: {"error": {"message", "type", "code"}}` (the `openai` SDK raises
it as an `APIError`), and no `[DONE]`; the user's message is in the log, the cut reply is not. A client
that disconnects mid-stream stops the model's call; its reply is not appended (see `engram.api.completions`).

Which agent: the `X-Engram-Agent` header, else a `model` of the form `engram/<agent>` (GET /v1/models
lists one per agent the key may touch), else the key's only agent, else `proxy.defaultAgent`
("default"). Any other model name is accepted and answered by the configured LLM (front-ends send the
model they were set up with). The key's agents bound all of it.

Every response carries engram's timings: `X-Engram-Memory-Ms` (engram's own work in the request) and
`X-Engram-Llm-Ms` (the model's), `X-Engram-Agent`, and `X-Engram-Discussion` when memory was on; with memory on,
`X-Engram-Position` is the position token of what the request recorded (its new messages and the reply), the one
REST's writes answer as `position`: pass it as `after` to a read that must see them (read your writes). A stream's
headers leave with the reply's first text, so there they cover the time until that first byte
(`X-Engram-Timing: first-byte`): the memory work that preceded it, and the model's time to its first text. The
whole request's timings follow at the end of the stream, before `data: [DONE]`, as an SSE comment (which SSE
clients, the `openai` SDK among them, skip): `: engram-timings {"memory_ms": …, "llm_ms": …, "responder": …,
"position": …}` (a stream's position: the reply is recorded after its headers left).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from engram.api import types as t
from engram.api.errors import ApiError, error
from engram.server.auth import authenticate
from engram.server.endpoint import ensure_state, error_body, error_responses, json_response
from engram.server.streaming import ReplyStream, refusal

log = logging.getLogger("engram.proxy")
router = APIRouter(tags=["openai"])
MODEL_PREFIX = "engram/"
ROLES: dict[str, t.Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
         "function": "tool"}
STREAM_PIECE_CHARS = 24  # a chunk's delta: a few words


class OaiMessage(msgspec.Struct, kw_only=True):
    """An OpenAI message. An assistant's `tool_calls` (or older `function_call`) are refused as tool definitions are
    (`refuse_tools`: engram's proxy never asks for a call, so one in the history cannot be given to the model); other
    fields engram does not use (refusal, audio…) are accepted and ignored."""

    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[Any] | None = None
    function_call: Any = None


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


class OaiRequest(msgspec.Struct, kw_only=True):
    """OpenAI's chat completion request. Its samplers (temperature, top_p, max_tokens, stop, seed; top_k as
    llama.cpp and vLLM take it) go to the model unless the route's preset says `frontEndSamplers: "override"`.
    Tool definitions (`tools`, `tool_choice`, the older `functions`, `function_call`) are refused with a 400 naming
    the field, as the Ollama door refuses `tools` (`refuse_tools`). `response_format` asks for a JSON reply as the
    Ollama door's `format` does (`json_object`: JSON; `json_schema`: its schema), the strongest way the reply's
    upstream takes, and refused naming the field where it takes none. Other fields (logprobs, presence_penalty…)
    are accepted and ignored."""

    model: str
    messages: list[OaiMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = 1
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    response_format: dict[str, Any] | None = None


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


def decode_body(decoder: msgspec.json.Decoder, raw: bytes, kind: str):
    """The body of an OpenAI `kind` request ("chat completion", "text completion"), each way it can be wrong
    answered as `invalid_request` saying what was expected."""
    if not raw.strip():
        raise error("invalid_request", f"the request body is empty; expected an OpenAI {kind} request")
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"{kind} request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise error("invalid_request", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise error("invalid_request", "the request body is nested too deeply") from None


def parse_request(raw: bytes) -> OaiRequest:
    req: OaiRequest = decode_body(_DECODER, raw, "chat completion")
    if not req.messages:
        raise error("malformed_messages", "messages is empty: send the conversation (at least one user message)")
    if req.n != 1:
        raise error("invalid_request", "n must be 1: engram's proxy answers with one choice")
    refuse_tools(tools=req.tools, functions=req.functions, tool_choice=req.tool_choice,
                 function_call=req.function_call)
    for i, m in enumerate(req.messages):
        refuse_tool_calls(i, tool_calls=m.tool_calls, function_call=m.function_call)
    return req


NO_TOOL_CALL = (None, "none", "auto")  # a tool choice that, with no tools, asks for nothing: the model answers in text


def refuse_tools(**fields: Any) -> None:
    """Both front doors' rule for tool use (`/v1/chat/completions`'s `tools`, `tool_choice`, `functions`,
    `function_call`; `/api/chat`'s `tools`): engram's proxy does not pass tool definitions to the model (its replies
    are text), so a request that gives tools, or demands a tool call, is refused with a 400 naming the field, before
    anything is appended, never answered as if the field were not there. An empty list of tools, or a choice of
    `"none"`/`"auto"` with no tools, asks for nothing and is answered."""
    for name, value in fields.items():
        choice = name in ("tool_choice", "function_call")
        if (value not in NO_TOOL_CALL) if choice else bool(value):
            raise error("unsupported_field", f'"{name}": engram\'s proxy does not pass tool definitions to the model '
                        f"(its replies are text); send the request without {name}", param=name)


def refuse_tool_calls(index: int, **fields: Any) -> None:
    """Both doors' rule for a tool call in the history (an assistant message's `tool_calls`, OpenAI's older
    `function_call`): refused with a 400 naming `messages[i].<field>`, as tools are (`refuse_tools`), never dropped
    from the turn while the model is shown the rest."""
    for name, value in fields.items():
        if value:
            field = f"messages[{index}].{name}"
            raise error("unsupported_field", f"{field}: engram's proxy does not pass tool calls to the model (its "
                        "replies are text); send the history without them", param=field)


def completion_request(req: OaiRequest) -> t.CompletionRequest:
    turns = []
    for i, m in enumerate(req.messages):
        role = ROLES.get(m.role)
        if role is None:
            raise error("malformed_messages", f"messages[{i}].role {m.role!r} is not one of {', '.join(sorted(ROLES))}")
        turns.append(t.ChatTurn(role=role, content=text_of(m, i), name=m.name))
    max_tokens = positive(req.max_completion_tokens or req.max_tokens)
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    return t.CompletionRequest(messages=turns, max_tokens=max_tokens, format=reply_format(req.response_format),
                               sampling=samplers(req.temperature, req.top_p, req.top_k, max_tokens, stop, req.seed))


def reply_format(response_format: dict[str, Any] | None) -> str | dict[str, Any] | None:
    """OpenAI's `response_format` as the request's `format` (the Ollama door's: "json" or a JSON schema): never
    dropped; what it names that is not one of OpenAI's three kinds is refused naming the field."""
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return "json"
    schema = (response_format.get("json_schema") or {}).get("schema") if kind == "json_schema" else None
    if isinstance(schema, dict):
        return schema
    raise error("invalid_request", 'response_format: give {"type": "text"}, {"type": "json_object"} or '
                '{"type": "json_schema", "json_schema": {"name": …, "schema": {…}}}', param="response_format")


def positive(n: int | None) -> int | None:
    """A token limit; 0 or -1 (what some front ends send for "no limit") is none."""
    return n if n is not None and n > 0 else None


def samplers(temperature, top_p, top_k, max_tokens, stop, seed) -> t.Samplers | None:
    """The front end's samplers as engram's request carries them (None when it set none); out-of-range values are
    the caller's error (400), as OpenAI answers them."""
    if temperature is None and top_p is None and top_k is None and max_tokens is None and not stop and seed is None:
        return None
    values = {"temperature": temperature, "top_p": top_p, "top_k": top_k, "max_tokens": max_tokens,
              "stop": [s for s in stop if s], "seed": seed}
    try:
        return msgspec.convert({k: v for k, v in values.items() if v is not None}, t.Samplers)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"sampling: {exc}") from None


def choose_agent(request: Request, model: str, principal, default_agent: str) -> str:
    from engram.kernel.ids import validate_agent

    named = request.headers.get("x-engram-agent")
    if not named and model.startswith(MODEL_PREFIX) and len(model) > len(MODEL_PREFIX):
        named = model[len(MODEL_PREFIX):]
    if not named and principal.agents is not None and len(principal.agents) == 1:
        named = next(iter(principal.agents))
    agent = validate_agent(named or default_agent)
    principal.require(agent)
    return agent


POSITION_HEADER = "X-Engram-Position"  # a write's position token (read your writes), as REST's `position`


def headers_of(result: t.CompletionResponse) -> dict[str, str]:
    """The headers of an answered completion (the proxies' own and Ollama's)."""
    out = {"X-Engram-Memory-Ms": f"{result.memory_ms:.2f}", "X-Engram-Llm-Ms": f"{result.llm_ms:.2f}",
           "X-Engram-Agent": result.agent, "X-Engram-Responder": result.responder}
    if result.discussion:
        out["X-Engram-Discussion"] = result.discussion
    if result.position:
        out[POSITION_HEADER] = result.position
    return out


def timings_comment(result: t.CompletionResponse) -> bytes:
    """The whole request's timings as an SSE comment line (a stream's headers only cover the time to its first byte)."""
    doc = {"memory_ms": round(result.memory_ms, 2), "llm_ms": round(result.llm_ms, 2), "responder": result.responder,
           **({"position": result.position} if result.position else {})}
    return b": engram-timings " + msgspec.json.encode(doc) + b"\n\n"


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


# The request bodies' fields as the OpenAPI document describes them (what engram reads of OpenAI's requests).
MODEL = ("The model; `engram/<agent>` names the agent whose memory answers (else the `X-Engram-Agent` header, the "
         "key's one agent or `proxy.defaultAgent`).")
STREAM = "Answer as server-sent events as the model writes (default false)."
MAX_TOKENS = "The most tokens the reply may have."
MESSAGES = ("The conversation, the whole history every turn; a `[DiscussionId]…[/DiscussionId]` tag in any message "
            "switches memory on for that discussion.")


@router.post("/v1/chat/completions", summary="OpenAI-compatible chat completion with memory",
             responses={**error_responses("invalid_id", "unsupported_field", "malformed_messages", "conflict",
                                          "unknown_agent", "bad_workflow", "llm_error", "llm_unavailable"),
                        200: {"description": "a chat.completion object, or (stream) text/event-stream of "
                                             "chat.completion.chunk objects ending with `data: [DONE]`"}},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["model", "messages"],
                 "properties": {"model": {"type": "string", "description": MODEL},
                                "stream": {"type": "boolean", "description": STREAM},
                                "max_tokens": {"type": "integer", "minimum": 1, "description": MAX_TOKENS},
                                "messages": {"type": "array", "minItems": 1, "description": MESSAGES, "items": {
                                    "type": "object", "required": ["role"],
                                    "properties": {"role": {"type": "string", "enum": sorted(ROLES),
                                                            "description": "Who said it."},
                                                   "content": {"type": "string", "description": "What was said."},
                                                   "name": {"type": "string",
                                                            "description": "The speaker's name, if any."}}}}}}}}}})
async def chat_completions(request: Request):
    """OpenAI's chat completion. A `[DiscussionId]…[/DiscussionId]` tag in any message switches memory on: new
    messages are appended once, the memory workflow injects summary, memories and recall into the system prompt,
    the reply is appended, memory creation runs after the response. Without a tag: no memory, nothing appended."""
    state = request.app.state
    if state.api is None:
        await run_in_threadpool(ensure_state, state)
    principal = authenticate(request)
    req = parse_request(await request.body())
    agent = choose_agent(request, req.model, principal, state.api.config.proxy.default_agent)
    body = completion_request(req)
    api = state.api.scoped(principal)
    if req.stream:
        return await _streamed(api, agent, body, req)
    try:
        result: t.CompletionResponse = await run_in_threadpool(api.complete, agent, body)
    except Exception as exc:
        raise refusal(exc) from None
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    return Response(msgspec.json.encode({
        "id": ident, "object": "chat.completion", "created": created, "model": req.model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": _usage(result),
    }), media_type="application/json", headers=headers_of(result))


async def _streamed(api, agent: str, body: t.CompletionRequest, req: OaiRequest):
    """Server-sent events of the reply as the model produces it (see the module docstring)."""
    from engram.kernel.ids import find_discussion_id

    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict, finish: str | None) -> dict:
        return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": req.model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    return await stream_reply(
        api, agent, body, trim=True, include_usage=req.stream_options is not None and req.stream_options.include_usage,
        discussion=find_discussion_id([m.content for m in body.messages]),
        piece=lambda text, finish: chunk({"content": text} if finish is None else {}, finish),
        opening=chunk({"role": "assistant", "content": ""}, None))


def sse(doc: dict) -> bytes:
    return b"data: " + msgspec.json.encode(doc) + b"\n\n"


async def stream_reply(api, agent: str, body: t.CompletionRequest, *, trim: bool, include_usage: bool,
                       discussion: str | None, piece, opening: dict | None = None) -> StreamingResponse:
    """The reply as server-sent events, for both OpenAI doors: `piece(text, None)` is the door's object for a piece of
    the reply, `piece("", "stop")` its last; the usage object (`include_usage`) is the last's envelope with no
    choices; `opening` (the chat door's role chunk) goes first. The headers leave with the reply's first text."""
    reply = ReplyStream(api, agent, body, trim=trim)
    # The headers leave with the first text: the timings until this first byte (the whole ones end the stream).
    memory_ms, llm_ms = await reply.first()

    async def events():
        if opening is not None:
            yield sse(opening)
        async for kind, value in reply.events():
            if kind == "text":
                for part in pieces(value):
                    yield sse(piece(part, None))
            elif kind == "done":
                yield sse(piece("", "stop"))
                if include_usage:
                    yield sse({**piece("", None), "choices": [], "usage": _usage(value)})
                yield timings_comment(value)
                yield b"data: [DONE]\n\n"
            else:
                yield stream_error(value)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers=stream_headers(agent, memory_ms, llm_ms, discussion))


def stream_error(exc: BaseException) -> bytes:
    """An error after the stream started: OpenAI's error event (the `openai` SDK raises it as an APIError)."""
    refused = refusal(exc)
    if not isinstance(refused, ApiError):
        log.error("a streamed completion failed", exc_info=refused)
        refused = error("internal", f"{type(refused).__name__}: {refused} (the server log has the details)")
    return sse(error_body(refused))


def stream_headers(agent: str, memory_ms: float, llm_ms: float, discussion: str | None) -> dict[str, str]:
    headers = {"X-Engram-Agent": agent, "Cache-Control": "no-cache", "X-Engram-Memory-Ms": f"{memory_ms:.2f}",
               "X-Engram-Llm-Ms": f"{llm_ms:.2f}", "X-Engram-Timing": "first-byte"}
    if discussion:
        headers["X-Engram-Discussion"] = discussion
    return headers


# --------------------------------------------------------------------------- POST /v1/completions

class OaiTextRequest(msgspec.Struct, kw_only=True):
    """OpenAI's (legacy) text completion request. Fields engram does not use (logprobs, best_of, suffix…) are
    accepted and ignored; `echo` and several prompts are refused."""

    model: str
    prompt: str | list[str]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = 1
    echo: bool = False


_TEXT_DECODER = msgspec.json.Decoder(OaiTextRequest)


def parse_text_request(raw: bytes) -> OaiTextRequest:
    req: OaiTextRequest = decode_body(_TEXT_DECODER, raw, "text completion")
    if isinstance(req.prompt, list) and len(req.prompt) != 1:
        raise error("invalid_request", "prompt: give one prompt (a string); engram's proxy answers one at a time")
    if req.n != 1:
        raise error("invalid_request", "n must be 1: engram's proxy answers with one choice")
    if req.echo:
        raise error("invalid_request", "echo is not supported: engram's proxy returns the completion only")
    return req


def text_request(prompt: str, system: str, *, raw: bool, max_tokens: int | None,
                 sampling: t.Samplers | None) -> t.CompletionRequest:
    """A text door's request (`/v1/completions`, `/api/generate`). With a `[DiscussionId]` tag: a prompt written in
    a chat template (a text front end's whole transcript) is read back into its messages, a history like a chat
    front end's; any other prompt is the discussion's next user turn. Without a tag: `raw` sends the prompt to the
    model as it is, else it is one user message (and `system` the system prompt)."""
    from engram.kernel.ids import find_discussion_id
    from engram.memory.ingest.transcript import turns

    head = [t.ChatTurn(role="system", content=system)] if system else []
    tagged = find_discussion_id([system, prompt]) is not None
    parsed = turns(prompt) if tagged else None
    if parsed is not None:
        return t.CompletionRequest(messages=head + [t.ChatTurn(role=role, content=text) for role, text in parsed],
                                   max_tokens=max_tokens, sampling=sampling)
    return t.CompletionRequest(messages=head + [t.ChatTurn(role="user", content=prompt)], max_tokens=max_tokens,
                               sampling=sampling, text_prompt=tagged or raw)


@router.post("/v1/completions", summary="OpenAI-compatible text completion with memory",
             responses={**error_responses("invalid_id", "malformed_messages", "conflict", "unknown_agent", "bad_workflow",
                                          "llm_error", "llm_unavailable"),
                        200: {"description": "a text_completion object, or (stream) text/event-stream of "
                                             "text_completion objects ending with `data: [DONE]`"}},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["model", "prompt"],
                 "properties": {"model": {"type": "string", "description": MODEL},
                                "prompt": {"type": "string", "description": "The prompt: a chat template's transcript "
                                           "or plain text; a `[DiscussionId]` tag in it switches memory on."},
                                "stream": {"type": "boolean", "description": STREAM},
                                "max_tokens": {"type": "integer", "minimum": 1, "description": MAX_TOKENS},
                                "temperature": {"type": "number", "description": "Sampling temperature."},
                                "top_p": {"type": "number", "description": "Nucleus sampling's probability mass."},
                                "stop": {"type": "array", "items": {"type": "string"},
                                         "description": "Texts that end the reply."}}}}}}})
async def text_completions(request: Request):
    """OpenAI's text completion. Without a `[DiscussionId]` tag in the prompt it is forwarded to the model as it is
    (a text-completion endpoint gets it untouched). With one, a transcript in a chat template (ChatML, Llama 3,
    Gemma) is read back into its messages and handled as a chat history; any other prompt (tag removed) is the
    discussion's next user turn. Either way each message is appended once, the memory workflow answers with the
    discussion's memory injected, and the reply is appended."""
    state = request.app.state
    if state.api is None:
        await run_in_threadpool(ensure_state, state)
    principal = authenticate(request)
    req = parse_text_request(await request.body())
    agent = choose_agent(request, req.model, principal, state.api.config.proxy.default_agent)
    prompt = req.prompt if isinstance(req.prompt, str) else req.prompt[0]
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    max_tokens = positive(req.max_tokens)
    body = text_request(prompt, "", raw=True, max_tokens=max_tokens,
                        sampling=samplers(req.temperature, req.top_p, req.top_k, max_tokens, stop, req.seed))
    api = state.api.scoped(principal)
    ident, created = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def choice(text: str, finish: str | None) -> dict:
        return {"id": ident, "object": "text_completion", "created": created, "model": req.model,
                "system_fingerprint": None,
                "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]}

    if not req.stream:
        try:
            result: t.CompletionResponse = await run_in_threadpool(api.complete, agent, body)
        except Exception as exc:
            raise refusal(exc) from None
        return Response(msgspec.json.encode({**choice(result.reply, "stop"), "usage": _usage(result)}),
                        media_type="application/json", headers=headers_of(result))
    from engram.kernel.ids import find_discussion_id

    discussion = find_discussion_id([prompt])
    return await stream_reply(api, agent, body, trim=discussion is not None, discussion=discussion,
                              include_usage=req.stream_options is not None and req.stream_options.include_usage,
                              piece=choice)


@router.get("/v1/models", summary="The models engram answers as (OpenAI's list)",
            responses=error_responses())
async def models(request: Request):
    """`engram` (the default agent, or the key's only agent) and `engram/<agent>` for every agent the key may touch:
    a front-end picks the agent by picking the model."""
    state = request.app.state
    if state.api is None:
        await run_in_threadpool(ensure_state, state)
    principal = authenticate(request)
    visible = sorted(await run_in_threadpool(state.api.scoped(principal).known_agents))
    if principal.agents is not None:
        visible = sorted(set(visible) | set(principal.agents))
    created = 0
    data = [{"id": "engram", "object": "model", "created": created, "owned_by": "engram"}]
    data += [{"id": f"{MODEL_PREFIX}{a}", "object": "model", "created": created, "owned_by": "engram"} for a in visible]
    return json_response({"object": "list", "data": data})
