"""The Ollama-compatible front door: `POST /api/chat`, `POST /api/generate`, `GET /api/tags`, `GET /api/version`
(and `POST /api/show`, `GET /api/ps`, which clients probe).

Point an Ollama client (Open WebUI's Ollama connection, SillyTavern's Ollama mode, the `ollama` Python client) at
`http://<engram>` instead of `http://localhost:11434` and put `[DiscussionId]my-chat[/DiscussionId]` in a message:
that discussion gets memory by the same rules as `/v1/chat/completions` (`engram.api.completions`). The model
named picks the agent: `engram` (the default agent, or the key's only agent) or `engram/<agent>`, with any `:tag`
(`engram:latest`: Open WebUI adds `:latest` to every name); `GET /api/tags` lists the names the key may use. The
reply comes from the model engram's `respond` route is configured with (or the labelled offline responder).

Wire format, as Ollama's (docs/api.md): `stream` is true unless the request says false. A stream is
`application/x-ndjson`, one JSON object per line: `{"model", "created_at", "message": {"role": "assistant",
"content": "<piece>"}, "done": false}` (`"response": "<piece>"` for /api/generate), the last with `"done": true`,
`done_reason`, and the durations in nanoseconds (`total_duration`, `load_duration`, `prompt_eval_duration`,
`eval_duration`) and token counts (`prompt_eval_count`, `eval_count`). Not streamed: one object, the last line's
shape with the whole reply. Errors are Ollama's `{"error": "<message>"}` with their status (the ollama client
raises `ResponseError(error, status_code)`); after the stream started, a line `{"error": …}` ends it.

Samplers come from `options` (`temperature`, `top_p`, `top_k`, `num_predict`, `stop`, `seed`) and win over the
route's preset unless it says `frontEndSamplers: "override"`. `format`, `keep_alive`, the other options and
`images` go to the reply's call (`engram.api.completions.asks_of`; which upstream type takes which:
`engram.providers.endpoints.adapters.refused_asks`), or are refused with a 400 naming the field, before anything is
appended; `tools` are refused as the OpenAI door refuses them (`openai.refuse_tools`); `think` is accepted and not used. `/api/generate`: `system` is the system prompt; without a tag the
prompt is answered as one user message (Ollama templates it), or with `"raw": true` sent to the model as it is;
with a tag, a transcript in a chat template (SillyTavern's text modes send one) is read back into its messages
and handled as a chat history, any other prompt is the discussion's next user turn (`openai.text_request`). An empty prompt without
`system` is Ollama's "load the model" call, answered with `done_reason: "load"`.

Security: the same front door as every route (`engram.server.frontdoor`: Host/Origin checks, JSON bodies) and the
same keys. An Ollama client sends no key by default: on a home without keys the server answers loopback clients
only, as on every route; once a key exists, the client sends it as `Authorization: Bearer <key>` (the `ollama`
Python client and the `ollama` CLI read it from `OLLAMA_API_KEY`; Open WebUI's Ollama connection has a key field;
any client: its headers setting). There is no key in URLs. A key scoped to agents sees only those agents' models
in /api/tags, and any other `engram/<agent>` is answered as a model that does not exist (404), never named.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any, TypeVar

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from engram.api import types as t
from engram.api.errors import ApiError, error
from engram.server.auth import authenticate
from engram.server.endpoint import ensure_state
from engram.server.openai import MODEL_PREFIX, choose_agent, positive, samplers, text_request
from engram.server.openai import headers_of, refuse_tool_calls, refuse_tools
from engram.server.streaming import ReplyStream, refusal

log = logging.getLogger("engram.proxy")
router = APIRouter(tags=["ollama"])

OLLAMA_VERSION = "0.12.0"  # the Ollama API version whose wire format this front door follows
ROLES: dict[str, t.Role] = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
NDJSON = "application/x-ndjson"
NO_LIMIT = (-1, -2)  # num_predict: -1 until the model stops, -2 fill the context


class OllamaMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str = ""
    images: list[str] | None = None  # base64: to the model with the turn it answers, where the upstream takes images
    tool_calls: list[Any] | None = None  # refused as `tools` are (openai.refuse_tool_calls)
    # thinking, tool_name: accepted and not used (Go's decoder ignores unknown fields too)


class ChatBody(msgspec.Struct, kw_only=True):
    model: str = ""
    messages: list[OllamaMessage] = []
    stream: bool = True
    options: dict[str, Any] | None = None
    format: str | dict[str, Any] | None = None
    keep_alive: str | float | None = None
    tools: list[Any] | None = None
    think: Any = None


class GenerateBody(msgspec.Struct, kw_only=True):
    model: str = ""
    prompt: str = ""
    system: str = ""
    stream: bool = True
    raw: bool = False
    options: dict[str, Any] | None = None
    suffix: str | None = None
    template: str | None = None
    context: Any = None
    format: str | dict[str, Any] | None = None
    keep_alive: str | float | None = None
    images: list[str] | None = None
    think: Any = None


Body = TypeVar("Body", ChatBody, GenerateBody)


def _decode(cls: type[Body], raw: bytes) -> Body:
    if not raw.strip():
        raise error("invalid_request", "missing request body")
    try:
        body = msgspec.json.decode(raw, type=cls)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"{exc}") from None
    except msgspec.DecodeError as exc:
        raise error("invalid_request", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise error("invalid_request", "the request body is nested too deeply") from None
    if not body.model:
        raise error("invalid_request", "model is required")
    return body


SAMPLER_OPTIONS = ("temperature", "top_p", "top_k", "num_predict", "stop", "seed")  # mapped to engram's samplers


def asked(body: t.CompletionRequest, req) -> t.CompletionRequest:
    """`body` with the request's format, keep_alive and options beyond the samplers (checked against the reply's
    upstream by `CompletionOps`: what it cannot do is refused there, naming the field)."""
    if req.format is not None and not isinstance(req.format, dict) and req.format != "json":
        raise error("invalid_request", f'invalid format: {req.format!r:.40} (give "json" or a JSON schema)')
    extra = {k: v for k, v in (req.options or {}).items() if k not in SAMPLER_OPTIONS}
    return msgspec.structs.replace(body, format=req.format or None, keep_alive=req.keep_alive, options=extra)


def sampling_of(options: dict[str, Any] | None) -> tuple[int | None, t.Samplers | None]:
    """(max_tokens, samplers) from Ollama's `options`; a value of the wrong type is refused as Ollama refuses it."""
    options = options or {}

    def number(name: str, kind: type):
        value = options.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise error("invalid_request", f'option "{name}" must be of type {"integer" if kind is int else "float"}')
        return int(value) if kind is int else float(value)

    stop = options.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise error("invalid_request", 'option "stop" must be of type array of strings')
    num_predict = number("num_predict", int)
    max_tokens = None if num_predict in NO_LIMIT else positive(num_predict)
    return max_tokens, samplers(number("temperature", float), number("top_p", float), number("top_k", int), max_tokens,
                                stop, number("seed", int))


def agent_model(model: str) -> str:
    """The engram model name inside an Ollama name: `engram/alice:latest` -> `engram/alice` (agent ids hold no ':')."""
    return model.split(":", 1)[0] if ":" in model else model


def created_at() -> str:
    """Now as Ollama writes it: RFC 3339 with nanoseconds, UTC."""
    ns = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + f".{ns % 1_000_000_000:09d}Z"


def final_fields(result: t.CompletionResponse, reason: str = "stop") -> dict:
    total_ms = result.memory_ms + result.llm_ms
    return {"done": True, "done_reason": reason, "total_duration": int(total_ms * 1e6), "load_duration": 0,
            "prompt_eval_count": result.input_tokens, "prompt_eval_duration": 0,
            "eval_count": result.output_tokens, "eval_duration": int(result.llm_ms * 1e6)}


def line(doc: dict) -> bytes:
    return msgspec.json.encode(doc) + b"\n"


async def _ready(request: Request):
    state = request.app.state
    if state.api is None:
        await run_in_threadpool(ensure_state, state)
    return state, authenticate(request)


def _choose(request: Request, model: str, principal, state) -> str:
    name = agent_model(model)
    if name != "engram" and not name.startswith(MODEL_PREFIX):
        name = "engram"  # a front end's own model name: answered by engram's configured model, as on /v1
    try:
        return choose_agent(request, name, principal, state.api.config.proxy.default_agent)
    except ApiError as exc:
        if exc.code == "unknown_agent" and not request.headers.get("x-engram-agent"):
            # Ollama's words for it, naming only what the caller sent
            raise ApiError(404, "unknown_agent", f"model '{model}' not found") from None
        raise


async def _answer(request: Request, state, principal, model: str, agent: str, body: t.CompletionRequest, stream: bool,
                  key: str, trim: bool = True):
    """The reply as Ollama's one object or NDJSON stream; `key`: "message" (/api/chat) or "response" (/api/generate)."""
    from engram.kernel.ids import find_discussion_id

    api = state.api.scoped(principal)

    def piece(text: str) -> dict:
        return {"message": {"role": "assistant", "content": text}} if key == "message" else {"response": text}

    if not stream:
        try:
            result: t.CompletionResponse = await run_in_threadpool(api.complete, agent, body)
        except Exception as exc:
            raise refusal(exc) from None
        doc = {"model": model, "created_at": created_at(), **piece(result.reply), **final_fields(result)}
        return Response(line(doc), media_type="application/json", headers=headers_of(result))
    reply = ReplyStream(api, agent, body, trim=trim)
    memory_ms, llm_ms = await reply.first()

    async def ndjson():
        async for kind, value in reply.events():
            if kind == "text":
                yield line({"model": model, "created_at": created_at(), **piece(value), "done": False})
            elif kind == "done":
                yield line({"model": model, "created_at": created_at(), **piece(""), **final_fields(value)})
            else:
                refused = refusal(value)
                if not isinstance(refused, ApiError):
                    log.error("a streamed Ollama completion failed", exc_info=refused)
                    refused = error("internal", f"{type(refused).__name__}: {refused} (the server log has the details)")
                yield line({"error": refused.message})

    headers = {"X-Engram-Agent": agent, "Cache-Control": "no-cache", "X-Engram-Memory-Ms": f"{memory_ms:.2f}",
               "X-Engram-Llm-Ms": f"{llm_ms:.2f}", "X-Engram-Timing": "first-byte"}
    discussion = find_discussion_id([m.content for m in body.messages])
    if discussion:
        headers["X-Engram-Discussion"] = discussion
    return StreamingResponse(ndjson(), media_type=NDJSON, headers=headers)


def _body_schema(required: list[str], properties: dict) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": required, "properties": properties}}}}}


OPTIONS_SCHEMA = {"type": "object", "description": "Ollama's sampling options (the ones engram passes to the model).",
                  "properties": {
    "temperature": {"type": "number", "description": "Sampling temperature."},
    "top_p": {"type": "number", "description": "Nucleus sampling's probability mass."},
    "top_k": {"type": "integer", "description": "Sample from the k likeliest tokens."},
    "num_predict": {"type": "integer", "description": "The most tokens the reply may have."},
    "seed": {"type": "integer", "description": "A seed for reproducible sampling."},
    "stop": {"type": "array", "items": {"type": "string"}, "description": "Texts that end the reply."}}}
MODEL = {"type": "string", "description": "A model name /api/tags lists (the agent whose memory answers)."}
STREAM = {"type": "boolean", "description": "Answer as NDJSON lines as the model writes (default true)."}


@router.post("/api/chat", summary="Ollama-compatible chat with memory (NDJSON stream unless stream is false)",
             openapi_extra=_body_schema(["model", "messages"], {
                 "model": MODEL, "stream": STREAM, "options": OPTIONS_SCHEMA,
                 "messages": {"type": "array", "minItems": 1, "description": "The conversation, the whole history "
                              "every turn; a `[DiscussionId]` tag in any message switches memory on.", "items": {
                     "type": "object", "required": ["role"],
                     "properties": {"role": {"type": "string", "enum": sorted(ROLES), "description": "Who said it."},
                                    "content": {"type": "string", "description": "What was said."}}}}}))
async def chat(request: Request):
    """Ollama's chat. A `[DiscussionId]…[/DiscussionId]` tag in any message switches memory on (the rules of
    `/v1/chat/completions`); without one the conversation is forwarded to the model unchanged."""
    state, principal = await _ready(request)
    req = _decode(ChatBody, await request.body())
    if not req.messages:
        raise error("malformed_messages", "messages is empty: send the conversation (at least one user message)")
    turns = []
    for i, m in enumerate(req.messages):
        role = ROLES.get(m.role)
        if role is None:
            raise error("malformed_messages", f"messages[{i}].role {m.role!r} is not one of {', '.join(sorted(ROLES))}")
        turns.append(t.ChatTurn(role=role, content=m.content, images=m.images or []))
    refuse_tools(tools=req.tools)
    for i, m in enumerate(req.messages):
        refuse_tool_calls(i, tool_calls=m.tool_calls)
    agent = _choose(request, req.model, principal, state)
    max_tokens, sampling = sampling_of(req.options)
    body = asked(t.CompletionRequest(messages=turns, max_tokens=max_tokens, sampling=sampling), req)
    return await _answer(request, state, principal, req.model, agent, body, req.stream, "message")


@router.post("/api/generate", summary="Ollama-compatible generate with memory (NDJSON stream unless stream is false)",
             openapi_extra=_body_schema(["model"], {
                 "model": MODEL,
                 "prompt": {"type": "string", "description": "The prompt; a `[DiscussionId]` tag in it makes it the "
                            "discussion's next user turn, answered with its memory."},
                 "system": {"type": "string", "description": "A system prompt for this request."},
                 "stream": STREAM,
                 "raw": {"type": "boolean", "description": "Send the prompt to the model as it is (no template)."},
                 "options": OPTIONS_SCHEMA}))
async def generate(request: Request):
    """Ollama's generate. Without a `[DiscussionId]` tag the prompt is answered as one user message (with `raw`:
    sent as it is); with one, the prompt is the discussion's next user turn, answered with its memory."""
    from engram.kernel.ids import find_discussion_id

    state, principal = await _ready(request)
    req = _decode(GenerateBody, await request.body())
    agent = _choose(request, req.model, principal, state)
    if not req.prompt and not req.system:  # Ollama's "load the model" call
        return Response(line({"model": req.model, "created_at": created_at(), "response": "", "done": True,
                              "done_reason": "load"}), media_type="application/json")
    if not req.prompt.strip():
        raise error("malformed_messages", "prompt is empty: give the text to answer")
    tagged = find_discussion_id([req.system, req.prompt]) is not None
    max_tokens, sampling = sampling_of(req.options)
    body = asked(text_request(req.prompt, req.system, raw=req.raw, max_tokens=max_tokens, sampling=sampling), req)
    if req.images:  # the prompt's images: with the user turn the model answers
        last = max(i for i, m in enumerate(body.messages) if m.role != "system")
        turn = msgspec.structs.replace(body.messages[last], images=list(req.images))
        body = msgspec.structs.replace(body, messages=[*body.messages[:last], turn, *body.messages[last + 1:]])
    return await _answer(request, state, principal, req.model, agent, body, req.stream, "response",
                         trim=tagged or not req.raw)


def _model_entry(name: str) -> dict:
    return {"name": name, "model": name, "modified_at": "1970-01-01T00:00:00Z", "size": 0,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": {"parent_model": "", "format": "engram", "family": "engram", "families": ["engram"],
                        "parameter_size": "", "quantization_level": ""}}


async def _visible(state, principal) -> list[str]:
    visible = set(await run_in_threadpool(state.api.scoped(principal).known_agents))
    if principal.agents is not None:
        visible |= set(principal.agents)
    return sorted(visible)


@router.get("/api/tags", summary="The models engram answers as (Ollama's list)")
async def tags(request: Request):
    """`engram:latest` and `engram/<agent>:latest` for every agent the key may touch."""
    state, principal = await _ready(request)
    names = ["engram:latest"] + [f"{MODEL_PREFIX}{a}:latest" for a in await _visible(state, principal)]
    return Response(line({"models": [_model_entry(n) for n in names]}), media_type="application/json")


@router.get("/api/version", summary="The Ollama API version this front door speaks")
async def version(request: Request):
    """The version of Ollama's API this door speaks, so that Ollama clients that check it go on."""
    await _ready(request)
    return Response(line({"version": OLLAMA_VERSION}), media_type="application/json")


# HEAD as Ollama answers it (clients probe with it), outside the OpenAPI document (one operation per route there).
router.add_api_route("/api/tags", tags, methods=["HEAD"], include_in_schema=False, name="tags_head")
router.add_api_route("/api/version", version, methods=["HEAD"], include_in_schema=False, name="version_head")


@router.get("/api/ps", summary="Running models (Ollama's list; engram loads none)")
async def running(request: Request):
    """The models loaded in memory, as Ollama lists them: engram loads none (its model is the upstream's)."""
    await _ready(request)
    return Response(line({"models": []}), media_type="application/json")


class ShowBody(msgspec.Struct, kw_only=True):
    model: str = ""
    name: str = ""  # the older field name
    verbose: bool = False


@router.post("/api/show", summary="A model's details (Ollama's show) for the names /api/tags lists",
             openapi_extra=_body_schema(["model"], {"model": MODEL}))
async def show(request: Request):
    """A model's details as Ollama's show answers them, for the names /api/tags lists (another key's agent: 404)."""
    state, principal = await _ready(request)
    try:
        req = msgspec.json.decode(await request.body() or b"{}", type=ShowBody)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise error("invalid_request", f"{exc}") from None
    model = req.model or req.name
    if not model:
        raise error("invalid_request", "model is required")
    name = agent_model(model)
    if name != "engram":
        if not name.startswith(MODEL_PREFIX) or name[len(MODEL_PREFIX):] not in await _visible(state, principal):
            raise ApiError(404, "unknown_agent", f"model '{model}' not found")
    entry = _model_entry(model)
    return Response(line({"modelfile": "", "parameters": "", "template": "", "details": entry["details"],
                          "model_info": {}, "capabilities": ["completion"], "modified_at": entry["modified_at"]}),
                    media_type="application/json")
