"""One adapter per apiType: the body engram sends, and how its answers, streams and errors read. Pure (no I/O).

Chosen once per endpoint from `ADAPTERS[endpoint.api_type]`; nothing else in engram branches on the type.
claudeMessages is not here: it keeps the anthropic SDK (`engram.providers.llm.caller.MessagesClient`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator

from engram.config.llm import Endpoint, PromptTemplate
from engram.providers.endpoints import gbnf
from engram.providers.endpoints.wire import ANY_JSON, Asks, Completion, Request, Sampling

# The ways of asking for JSON, as recorded on LlmCall.structured.
RECORDED_WAY = {
    "jsonSchema": "json_schema",
    "jsonObjectSchema": "json_object_schema",
    "ollamaFormat": "ollama_format",
    "grammar": "grammar",
    "outputFormat": "output_format",
    "tool": "tool",
    "none": "prompt",
}

BUILTIN_TEMPLATES: dict[str, PromptTemplate] = {
    "chatml": PromptTemplate(
        prompt_template_system_prefix="<|im_start|>system\n", prompt_template_system_suffix="<|im_end|>\n",
        prompt_template_user_prefix="<|im_start|>user\n", prompt_template_user_suffix="<|im_end|>\n",
        prompt_template_assistant_prefix="<|im_start|>assistant\n", prompt_template_assistant_suffix="<|im_end|>\n",
        prompt_template_end_token="<|im_end|>",
    ),
    "llama3": PromptTemplate(
        prompt_template_system_prefix="<|start_header_id|>system<|end_header_id|>\n\n",
        prompt_template_system_suffix="<|eot_id|>",
        prompt_template_user_prefix="<|start_header_id|>user<|end_header_id|>\n\n", prompt_template_user_suffix="<|eot_id|>",
        prompt_template_assistant_prefix="<|start_header_id|>assistant<|end_header_id|>\n\n",
        prompt_template_assistant_suffix="<|eot_id|>", prompt_template_end_token="<|eot_id|>",
    ),
    "mistral": PromptTemplate(
        prompt_template_system_prefix="[INST] ", prompt_template_system_suffix="\n\n",
        prompt_template_user_prefix="[INST] ", prompt_template_user_suffix=" [/INST]",
        prompt_template_assistant_prefix="", prompt_template_assistant_suffix="</s>", prompt_template_end_token="</s>",
    ),
    "gemma": PromptTemplate(
        prompt_template_system_prefix="<start_of_turn>user\n", prompt_template_system_suffix="<end_of_turn>\n",
        prompt_template_user_prefix="<start_of_turn>user\n", prompt_template_user_suffix="<end_of_turn>\n",
        prompt_template_assistant_prefix="<start_of_turn>model\n", prompt_template_assistant_suffix="<end_of_turn>\n",
        prompt_template_end_token="<end_of_turn>",
    ),
    "alpaca": PromptTemplate(
        prompt_template_system_prefix="", prompt_template_system_suffix="\n\n",
        prompt_template_user_prefix="### Instruction:\n", prompt_template_user_suffix="\n\n",
        prompt_template_assistant_prefix="### Response:\n", prompt_template_assistant_suffix="\n\n",
        prompt_template_end_token="### Instruction:",
    ),
    "phi-4": PromptTemplate(
        prompt_template_system_prefix="<|im_start|>system<|im_sep|>", prompt_template_system_suffix="<|im_end|>",
        prompt_template_user_prefix="<|im_start|>user<|im_sep|>", prompt_template_user_suffix="<|im_end|>",
        prompt_template_assistant_prefix="<|im_start|>assistant<|im_sep|>", prompt_template_assistant_suffix="<|im_end|>",
        prompt_template_end_token="<|im_end|>",
    ),
}


def template_of(endpoint: Endpoint) -> PromptTemplate:
    t = endpoint.prompt_template
    return BUILTIN_TEMPLATES[t] if isinstance(t, str) else t


def render_prompt(request: Request, endpoint: Endpoint) -> tuple[str, tuple[str, ...]]:
    """The text prompt of a text-completion type and the stop strings its template ends turns with.

    A front end's own text prompt (`request.prompt`) is sent as it is (after the system part, if any)."""
    t = template_of(endpoint)
    stops = (t.prompt_template_end_token,) if t.prompt_template_end_token else ()
    system = f"{t.prompt_template_system_prefix}{request.system}{t.prompt_template_system_suffix}" if request.system else ""
    if request.prompt is not None and not request.messages:
        return system + request.prompt, ()
    out = [system]
    for role, text in request.messages:
        if role == "assistant":
            out.append(f"{t.prompt_template_assistant_prefix}{text}{t.prompt_template_assistant_suffix}")
        else:
            out.append(f"{t.prompt_template_user_prefix}{text}{t.prompt_template_user_suffix}")
    if request.prompt is not None:
        out.append(f"{t.prompt_template_user_prefix}{request.prompt}{t.prompt_template_user_suffix}")
    out.append(t.prompt_template_assistant_prefix)
    return "".join(out), stops


def chat_messages(request: Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    out += [{"role": role, "content": text} for role, text in request.messages]
    if request.prompt is not None:
        out.append({"role": "user", "content": request.prompt})
    return out


def answered_turn(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The user turn the model answers (the last one): the front end's images go with it."""
    return next((m for m in reversed(messages) if m["role"] == "user"), None)


# ---------------------------------------------------------------------------------------------- a front end's asks

# Ollama's sampling options (beyond temperature, top_p, top_k, num_predict, stop, seed, which engram maps itself) as
# each other type names them. An Ollama upstream takes every option as it is; an option a type has no name for
# (a load option such as num_gpu, or a sampler the server lacks) is refused, never dropped.
OPTION_NAMES: dict[str, dict[str, str]] = {
    # OpenAI's penalties, and llama.cpp's (llama-server, llama-cpp-python) own samplers in its OpenAI-compatible body.
    "openAIChatCompletion": {"presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
                             "repeat_penalty": "repeat_penalty", "min_p": "min_p", "typical_p": "typical_p",
                             "repeat_last_n": "repeat_last_n", "mirostat": "mirostat_mode",
                             "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta"},
    "koboldCppGenerate": {"presence_penalty": "presence_penalty", "repeat_penalty": "rep_pen",
                          "repeat_last_n": "rep_pen_range", "min_p": "min_p", "typical_p": "typical",
                          "tfs_z": "tfs", "mirostat": "mirostat", "mirostat_tau": "mirostat_tau",
                          "mirostat_eta": "mirostat_eta"},
}
OPTION_NAMES["openAIV1Completion"] = OPTION_NAMES["openAIChatCompletion"]
OLLAMA_TYPES = ("ollamaApiChat", "ollamaApiGenerate")
# The types that take a front end's images with the turn the model answers.
IMAGE_TYPES = ("ollamaApiChat", "openAIChatCompletion")
# The types whose strongest JSON way is a grammar made here (the front end's schema must be one it can write).
GRAMMAR_FIRST = ("openAIV1Completion", "koboldCppGenerate")


def refused_asks(api_type: str, asks: Asks, structured_output: str = "auto") -> str | None:
    """Why the reply's upstream (of `api_type`) cannot do what the front end asked, naming the field; None: it can.
    `keep_alive` is for an Ollama upstream only and means nothing to the others (no other server unloads its model),
    so it is never a reason."""
    where = "the model engram's reply comes from" + (" (the offline responder, not a language model)"
                                                      if api_type == "offline" else f" ({api_type})")
    if asks.images and api_type not in IMAGE_TYPES:
        return f'"images": {where} takes no images (an Ollama /api/chat or OpenAI chat endpoint does)'
    if asks.format is not None:
        if api_type == "offline":
            return f'"format": {where} cannot answer in JSON'
        if api_type in GRAMMAR_FIRST and structured_output in ("auto", "grammar"):
            from engram.providers.endpoints import gbnf

            keyword = gbnf.unenforced(asks.format.schema)
            if keyword is not None:
                return (f'"format": {where} is constrained by a grammar engram writes from the schema, and the grammar '
                        f'cannot enforce "{keyword}": send the schema without it')
            try:
                gbnf.grammar(asks.format.schema)
            except (ValueError, TypeError, AttributeError) as exc:
                return f'"format": {where} is constrained by a grammar engram writes from the schema, and {exc}'
    if api_type not in OLLAMA_TYPES:
        names = OPTION_NAMES.get(api_type, {})
        unknown = [k for k, _ in asks.options if k not in names]
        if unknown:
            return f'option "{unknown[0]}": {where} has no such setting'
    return None


def put_options(body: dict, api_type: str, asks: Asks | None) -> None:
    """A front end's extra options in the body of a non-Ollama type, under that type's names."""
    if asks is None:
        return
    names = OPTION_NAMES.get(api_type, {})
    for key, value in asks.options:
        if key in names:
            body[names[key]] = value


def sampling_of(request: Request) -> Sampling:
    """Every sampler of the request, temperature and max_tokens included."""
    base = request.sampling or Sampling()
    return Sampling(temperature=request.temperature, max_tokens=request.max_tokens).over(base)


def image_url(image: str) -> str:
    """A base64 image (as Ollama clients send them) as an OpenAI image part's data URL, its type read from its
    first bytes."""
    if image.startswith("data:"):
        return image
    head = image[:16]
    kind = ("png" if head.startswith("iVBOR") else "gif" if head.startswith("R0lG") else
            "webp" if head.startswith("UklGR") else "jpeg")
    return f"data:image/{kind};base64,{image}"


class WireError(Exception):
    """What an endpoint's error answer means. `kind`: "context", "model_missing", "auth", "refused_structured",
    "busy", "not_found", "bad_request", "server"."""

    def __init__(self, message: str, *, transient: bool, kind: str, status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.message, self.transient, self.kind, self.status = message, transient, kind, status
        self.retry_after = retry_after  # seconds the server asked to wait (its `retry-after`), when it did


class Event:
    """One piece of a stream: text, and when it is the last, why it ended and what it used."""

    __slots__ = ("text", "done", "finish_reason", "input_tokens", "output_tokens", "model")

    def __init__(self, text: str = "", *, done: bool = False, finish_reason: str | None = None,
                 input_tokens: int | None = None, output_tokens: int | None = None, model: str | None = None):
        self.text, self.done, self.finish_reason = text, done, finish_reason
        self.input_tokens, self.output_tokens, self.model = input_tokens, output_tokens, model


def error_text(data: Any, raw: str) -> str:
    """The message of an error body of any of the shapes servers use."""
    if isinstance(data, dict):
        err = data.get("error", data.get("detail"))
        if isinstance(err, dict):
            return str(err.get("message") or err.get("msg") or err.get("error") or json.dumps(err))[:600]
        if isinstance(err, str):
            return err[:600]
    return raw.strip()[:300] or "(empty body)"


_CONTEXT = re.compile(r"context (length|window|size)|maximum context|exceeds? the (available )?context|prompt is too long|"
                      r"input length exceeds", re.I)
_STRUCTURED = re.compile(r"response_format|json_schema|json_object|grammar|'format'|\"format\"", re.I)


def read_error(status: int, data: Any, raw: str, path: str) -> WireError:
    """Classify an error answer: what to tell the user and whether to retry (shared by every HTTP type)."""
    message = error_text(data, raw)
    said = f"HTTP {status}: {message}"
    if _CONTEXT.search(message):
        return WireError(said, transient=False, kind="context", status=status)
    if status in (400, 422, 500) and _STRUCTURED.search(message) and ("validation" in message.lower()
                                                                       or status != 500 or "literal" in message):
        return WireError(said, transient=False, kind="refused_structured", status=status)
    if status in (401, 403):
        return WireError(said, transient=False, kind="auth", status=status)
    if status == 404:
        if path.startswith("/api/") and ("model" in message.lower() or "not found" in message.lower()):
            return WireError(said, transient=False, kind="model_missing", status=status)
        if "model" in message.lower() and "not" in message.lower():
            return WireError(said, transient=False, kind="model_missing", status=status)
        return WireError(said, transient=False, kind="not_found", status=status)
    if status in (408, 409, 429, 499, 503, 529) or status >= 500:
        return WireError(said, transient=True, kind="busy" if status in (429, 503) else "server", status=status)
    return WireError(said, transient=False, kind="bad_request", status=status)


# ---------------------------------------------------------------------------------------------- stream framing


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str | None, str]]:
    """(event name, data) per Server-Sent Event; comments and blank keep-alives skipped."""
    name: str | None = None
    data: list[str] = []
    for line in lines:
        line = line.rstrip("\r")
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        yield name, "\n".join(data)


def ndjson_objects(lines: Iterable[str]) -> Iterator[dict]:
    for line in lines:
        if line.strip():
            yield json.loads(line)


class Adapter:
    """The wire of one apiType."""

    api_type = ""
    framing = "sse"  # "sse" | "ndjson"
    ways: tuple[str, ...] = ("none",)  # structured-output ways, strongest first

    def path(self, stream: bool) -> str:
        raise NotImplementedError

    def body(self, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None) -> dict:
        raise NotImplementedError

    def answer(self, data: dict) -> Completion:
        raise NotImplementedError

    def events(self, lines: Iterable[str]) -> Iterator[Event]:
        raise NotImplementedError

    def models_path(self) -> str | None:
        return None

    def model_of(self, data: Any) -> str | None:
        return None


def _put(body: dict, key: str, value: Any) -> None:
    if value is not None and value != () and value != []:
        body[key] = list(value) if isinstance(value, tuple) else value


class _OpenAI(Adapter):
    def models_path(self) -> str | None:
        return "/v1/models"

    def model_of(self, data: Any) -> str | None:
        try:
            return data["data"][0]["id"]
        except (KeyError, IndexError, TypeError):
            return None

    def samplers(self, body: dict, request: Request, stream: bool) -> None:
        s = sampling_of(request)
        _put(body, "max_tokens", s.max_tokens)  # always: OpenAI's default for /v1/completions is 16 tokens
        _put(body, "temperature", s.temperature)
        _put(body, "top_p", s.top_p)
        _put(body, "top_k", s.top_k)
        _put(body, "seed", s.seed)
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}

    def usage(self, data: dict) -> tuple[int | None, int | None]:
        u = data.get("usage") or {}
        return u.get("prompt_tokens"), u.get("completion_tokens")

    def cached(self, data: dict) -> int:
        """Prompt tokens read from the server's prompt cache (OpenAI: usage.prompt_tokens_details.cached_tokens)."""
        return int(((data.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0)

    def piece(self, choice: dict) -> str:
        raise NotImplementedError

    def events(self, lines: Iterable[str]) -> Iterator[Event]:
        finish: str | None = None
        model = None
        for _, data in sse_events(lines):
            if data.strip() == "[DONE]":
                break
            obj = json.loads(data)
            if "error" in obj:
                raise read_error(500, obj, data, "")
            model = obj.get("model", model)
            for choice in obj.get("choices") or []:
                text = self.piece(choice)
                if text:
                    yield Event(text)
                finish = choice.get("finish_reason") or finish
            if obj.get("usage"):
                i, o = self.usage(obj)
                if finish:
                    yield Event(done=True, finish_reason=finish, input_tokens=i, output_tokens=o, model=model)
                    return
        if finish is None:
            # llama-cpp-python ends a stream this way on a context error, or when another request interrupts it.
            raise WireError("the stream ended without a finish reason (cut by the server)", transient=True,
                            kind="server")
        yield Event(done=True, finish_reason=finish, model=model)


class OpenAIChat(_OpenAI):
    api_type = "openAIChatCompletion"
    ways = ("jsonSchema", "jsonObjectSchema", "grammar", "none")

    def path(self, stream: bool) -> str:
        return "/v1/chat/completions"

    def body(self, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None) -> dict:
        messages = chat_messages(request)
        turn = answered_turn(messages)
        if request.asks is not None and request.asks.images and turn is not None:
            turn["content"] = [{"type": "text", "text": turn["content"]}] + [
                {"type": "image_url", "image_url": {"url": image_url(image)}} for image in request.asks.images]
        body: dict[str, Any] = {"messages": messages}
        if request.model:
            body["model"] = request.model
        self.samplers(body, request, stream)
        _put(body, "stop", sampling_of(request).stop)
        put_options(body, self.api_type, request.asks)
        st = request.structured
        if st is not None:
            if way == "jsonSchema":
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": st.name, "schema": st.schema, "strict": False}}
            elif way == "jsonObjectSchema":
                body["response_format"] = {"type": "json_object", "schema": st.schema}
            elif way == "grammar":
                body["grammar"] = gbnf.grammar(st.schema)
        return body

    def piece(self, choice: dict) -> str:
        return (choice.get("delta") or {}).get("content") or ""

    def answer(self, data: dict) -> Completion:
        choice = (data.get("choices") or [{}])[0]
        i, o = self.usage(data)
        cached = self.cached(data)
        return Completion(text=(choice.get("message") or {}).get("content") or "", input_tokens=(i or 0) - cached,
                          cache_read_tokens=cached, output_tokens=o or 0, stop_reason=choice.get("finish_reason"),
                          model=data.get("model"), usage_estimated=i is None)


class OpenAICompletion(_OpenAI):
    api_type = "openAIV1Completion"
    ways = ("grammar", "none")

    def path(self, stream: bool) -> str:
        return "/v1/completions"

    def body(self, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None) -> dict:
        prompt, stops = render_prompt(request, endpoint)
        body: dict[str, Any] = {"prompt": prompt}
        if request.model:
            body["model"] = request.model
        self.samplers(body, request, stream)
        _put(body, "stop", tuple(dict.fromkeys(stops + sampling_of(request).stop)))
        put_options(body, self.api_type, request.asks)
        if request.structured is not None and way == "grammar":
            body["grammar"] = gbnf.grammar(request.structured.schema)
        return body

    def piece(self, choice: dict) -> str:
        return choice.get("text") or ""

    def answer(self, data: dict) -> Completion:
        choice = (data.get("choices") or [{}])[0]
        i, o = self.usage(data)
        return Completion(text=choice.get("text") or "", input_tokens=i or 0, output_tokens=o or 0,
                          stop_reason=choice.get("finish_reason"), model=data.get("model"), usage_estimated=i is None)


class _Ollama(Adapter):
    framing = "ndjson"
    ways = ("ollamaFormat", "none")

    def models_path(self) -> str | None:
        return "/api/tags"

    def options(self, request: Request, window: int | None) -> dict:
        s = sampling_of(request)
        options: dict[str, Any] = dict(request.asks.options) if request.asks is not None else {}
        _put(options, "num_ctx", window)  # always when known: Ollama otherwise silently drops the oldest messages
        _put(options, "num_predict", s.max_tokens)
        _put(options, "temperature", s.temperature)
        _put(options, "top_p", s.top_p)
        _put(options, "top_k", s.top_k)
        _put(options, "seed", s.seed)
        _put(options, "stop", s.stop)
        return options

    def common(self, body: dict, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None):
        body["model"] = request.model
        body["stream"] = stream  # Ollama streams unless told not to
        body["truncate"] = False  # an error, never the oldest messages dropped silently (older servers ignore it)
        options = self.options(request, window)
        if options:
            body["options"] = options
        keep_alive = request.asks.keep_alive if request.asks is not None else None
        keep_alive = keep_alive if keep_alive is not None else endpoint.keep_alive
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        st = request.structured
        if st is not None and way == "ollamaFormat":
            body["format"] = "json" if st.name == ANY_JSON else st.schema
        return body

    def text_of(self, obj: dict) -> str:
        raise NotImplementedError

    def answer(self, data: dict) -> Completion:
        return Completion(text=self.text_of(data), input_tokens=data.get("prompt_eval_count") or 0,
                          output_tokens=data.get("eval_count") or 0, stop_reason=data.get("done_reason"),
                          model=data.get("model"), usage_estimated="eval_count" not in data)

    def events(self, lines: Iterable[str]) -> Iterator[Event]:
        for obj in ndjson_objects(lines):
            if "error" in obj:
                raise read_error(500, obj, json.dumps(obj), "/api/")
            text = self.text_of(obj)
            if text:
                yield Event(text)
            if obj.get("done"):
                yield Event(done=True, finish_reason=obj.get("done_reason") or "stop",
                            input_tokens=obj.get("prompt_eval_count"), output_tokens=obj.get("eval_count"),
                            model=obj.get("model"))
                return
        raise WireError("the stream ended before its done line", transient=True, kind="server")


class OllamaChat(_Ollama):
    api_type = "ollamaApiChat"

    def path(self, stream: bool) -> str:
        return "/api/chat"

    def body(self, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None) -> dict:
        messages = chat_messages(request)
        turn = answered_turn(messages)
        if request.asks is not None and request.asks.images and turn is not None:
            turn["images"] = list(request.asks.images)
        return self.common({"messages": messages}, request, endpoint, way, stream, window)

    def text_of(self, obj: dict) -> str:
        return (obj.get("message") or {}).get("content") or ""


class OllamaGenerate(_Ollama):
    api_type = "ollamaApiGenerate"

    def path(self, stream: bool) -> str:
        return "/api/generate"

    def body(self, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None) -> dict:
        prompt, stops = render_prompt(request, endpoint)
        body = self.common({"prompt": prompt, "raw": True}, request, endpoint, way, stream, window)
        stop = tuple(dict.fromkeys(stops + sampling_of(request).stop))
        if stop:
            body.setdefault("options", {})["stop"] = list(stop)
        return body

    def text_of(self, obj: dict) -> str:
        return obj.get("response") or ""


class KoboldCpp(Adapter):
    api_type = "koboldCppGenerate"
    ways = ("grammar", "none")

    def path(self, stream: bool) -> str:
        return "/api/extra/generate/stream" if stream else "/api/v1/generate"

    def models_path(self) -> str | None:
        return "/api/v1/model"

    def model_of(self, data: Any) -> str | None:
        return data.get("result") if isinstance(data, dict) else None

    def body(self, request: Request, endpoint: Endpoint, way: str, stream: bool, window: int | None) -> dict:
        prompt, stops = render_prompt(request, endpoint)
        s = sampling_of(request)
        body: dict[str, Any] = {"prompt": prompt, "max_length": s.max_tokens, "trim_stop": True}
        _put(body, "max_context_length", window)
        _put(body, "temperature", s.temperature)
        _put(body, "top_p", s.top_p)
        _put(body, "top_k", s.top_k)
        _put(body, "sampler_seed", s.seed)
        _put(body, "stop_sequence", tuple(dict.fromkeys(stops + s.stop)))
        put_options(body, self.api_type, request.asks)
        if request.structured is not None and way == "grammar":
            body["grammar"] = gbnf.grammar(request.structured.schema)
            body["grammar_retain_state"] = False
        return body

    def answer(self, data: dict) -> Completion:
        result = (data.get("results") or [{}])[0]
        return Completion(text=result.get("text") or "", input_tokens=result.get("prompt_tokens") or 0,
                          output_tokens=result.get("completion_tokens") or 0, stop_reason=result.get("finish_reason"),
                          usage_estimated="completion_tokens" not in result)

    def events(self, lines: Iterable[str]) -> Iterator[Event]:
        for _, data in sse_events(lines):
            obj = json.loads(data)
            if obj.get("token"):
                yield Event(obj["token"])
            if obj.get("finish_reason"):
                yield Event(done=True, finish_reason=obj["finish_reason"])
                return
        raise WireError("the stream ended without its final event", transient=True, kind="server")


ADAPTERS: dict[str, Adapter] = {
    a.api_type: a for a in (OpenAIChat(), OpenAICompletion(), OllamaChat(), OllamaGenerate(), KoboldCpp())
}


def embed_request(api_type: str, model: str, texts: list[str]) -> tuple[str, dict]:
    """The path and body of an embedding request."""
    if api_type == "ollamaEmbeddings":
        body: dict[str, Any] = {"input": texts, "truncate": False}
        if model:
            body["model"] = model
        return "/api/embed", body
    body = {"input": texts}
    if model:
        body["model"] = model
    return "/v1/embeddings", body


def embed_answer(api_type: str, data: dict) -> list[list[float]]:
    if api_type == "ollamaEmbeddings":
        return [list(map(float, v)) for v in data["embeddings"]]
    rows = sorted(data["data"], key=lambda row: row.get("index", 0))
    return [list(map(float, row["embedding"])) for row in rows]
