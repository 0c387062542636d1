"""`engram llm check`: call each configured endpoint once and say what it is, or what to fix.

Per endpoint: the model it answered as, the latency, the way JSON answers work there (the strongest the server
took), the context window and where it came from; or one line saying what is wrong and what to do about it (a
wrong URL, a model the server does not have — Ollama: `ollama pull` it —, a key missing or refused). Keys never
appear in what it says.
"""

from __future__ import annotations

import json
import os
import time
from typing import Mapping

import msgspec

from engram.config.llm import Endpoint, LlmConfig
from engram.providers.endpoints.wire import CallFailed, Request, Structured

# A one-field JSON answer: cheap, and it shows whether the structured-output way works.
CHECK_SCHEMA = {"type": "object", "properties": {"ok": {"enum": ["yes"]}}, "required": ["ok"],
                "additionalProperties": False}


class EndpointCheck(msgspec.Struct, kw_only=True):
    endpoint: str
    api_type: str
    url: str
    ok: bool
    model: str | None = None  # what the server said it answers as (or serves)
    latency_ms: float | None = None
    structured: str | None = None  # the way JSON answers work ("json_schema", "grammar", ...); None: no JSON way
    context_window: int | None = None
    context_source: str | None = None  # "maxContextTokens", "/api/show ...", None: unknown
    embedding_dim: int | None = None
    local: bool = False
    problem: str | None = None  # one line: what is wrong and what to fix
    notes: list[str] = []

    def line(self) -> str:
        if not self.ok:
            return f"{self.endpoint}: {self.api_type} at {self.url or '-'}: FAILED — {self.problem}"
        parts = [f"{self.endpoint}: {self.api_type} at {self.url or '-'}"]
        if self.model:
            parts.append(f"answered as {self.model}")
        if self.latency_ms is not None:
            parts.append(f"{self.latency_ms:.0f} ms")
        if self.embedding_dim is not None:
            parts.append(f"{self.embedding_dim}-d vectors")
        elif self.api_type != "offline":
            parts.append(f"JSON: {self.structured}" if self.structured else "JSON: not constrained (prompt only)")
        if self.context_window:
            parts.append(f"window {self.context_window:,} tokens ({self.context_source})")
        elif self.api_type not in ("offline", "openAIEmbeddings", "ollamaEmbeddings"):
            parts.append("window unknown: set maxContextTokens")
        parts.append("local, cost 0" if self.local else "hosted")
        return ", ".join(parts) + "".join(f"; {n}" for n in self.notes)


def check_endpoint(name: str, endpoint: Endpoint, env: Mapping[str, str] | None = None) -> EndpointCheck:
    """Call one endpoint once (never raises for what the endpoint does)."""
    env = os.environ if env is None else env
    base = EndpointCheck(endpoint=name, api_type=endpoint.api_type, url=endpoint.url, ok=True, local=endpoint.is_local)
    if endpoint.api_type == "offline":
        return msgspec.structs.replace(base, model="offline-heuristic", notes=["the labelled heuristic: no call"])
    try:
        client = _client(name, endpoint, env)
    except CallFailed as failed:
        return msgspec.structs.replace(base, ok=False, problem=failed.error)
    start = time.perf_counter()
    try:
        if endpoint.api_type in ("openAIEmbeddings", "ollamaEmbeddings"):
            vectors = client.embed(["engram llm check"])
            return msgspec.structs.replace(base, model=endpoint.model or None, embedding_dim=len(vectors[0]),
                                           latency_ms=round((time.perf_counter() - start) * 1000, 1))
        served = _served(client)
        request = Request(model=endpoint.model, system="Answer with JSON only.",
                          messages=(("user", 'Reply with {"ok": "yes"}.'),), max_tokens=16, temperature=0,
                          structured=Structured("check", CHECK_SCHEMA))
        completion, _ = client.create(request)
        latency = round((time.perf_counter() - start) * 1000, 1)
        window, source = client.window()
        way = completion.structured if _is_json(completion.text) else None
        notes = []
        if way is None:
            notes.append(f"the answer to a JSON request was not JSON ({completion.text[:40]!r})")
        if completion.usage_estimated:
            notes.append("the server reports no token usage: counts are estimated")
        return msgspec.structs.replace(base, model=served or completion.model or endpoint.model or None,
                                       latency_ms=latency, structured=way, context_window=window,
                                       context_source=source, notes=notes)
    except CallFailed as failed:
        return msgspec.structs.replace(base, ok=False, problem=failed.error)
    finally:
        close = getattr(client, "close", None)
        if close is not None:
            close()


def check_all(config: LlmConfig, env: Mapping[str, str] | None = None) -> list[EndpointCheck]:
    return [check_endpoint(name, endpoint, env) for name, endpoint in sorted(config.endpoints.items())]


def _client(name: str, endpoint: Endpoint, env: Mapping[str, str]):
    if endpoint.api_type == "claudeMessages":
        from engram.providers.llm.caller import MessagesClient

        key = env.get(endpoint.key_env or "", "")
        if not key:
            raise CallFailed(f"environment variable {endpoint.key_env} is not set (the endpoint's apiKeyEnv)", 0)
        return MessagesClient(endpoint, key, name=name)
    from engram.providers.endpoints.client import EndpointClient

    return EndpointClient(name, endpoint, env=env)


def _served(client) -> str | None:
    """The model the server lists (Ollama: the configured one must be among them), None when it lists none."""
    served_model = getattr(client, "served_model", None)
    if served_model is None:
        return None
    from engram.providers.endpoints.adapters import WireError
    from engram.providers.endpoints.client import _fix

    import httpx

    try:
        return served_model()
    except WireError as exc:
        raise CallFailed(f"{client.who()}: {exc.message}{_fix(exc.kind, client)}", 1, kind=exc.kind) from None
    except httpx.HTTPError as exc:
        raise CallFailed(f"{client.who()}: cannot reach {client.endpoint.url} ({type(exc).__name__}) — is the server "
                         f"running? check llm.endpoints.{client.name}.baseUrl", 1, transient=True) from None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False
