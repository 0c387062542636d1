"""Errors of the API: a stable code, an HTTP status, and a message that says what to fix.

Every refused request is one `ApiError`; the server answers it as
`{"error": {"code": "<stable code>", "message": "<what to fix>"}}` with its status, the CLI prints
its message on one line and exits with code 2 (1 for failures that are not the user's input).
Domain exceptions are translated here, in one place (`translate`).
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None,
                 param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after  # seconds (429 backpressure: the Retry-After header)
        self.param = param  # the request field refused, where there is one (OpenAI's error `param`)

    def __str__(self) -> str:
        return self.message


# The stable codes, with their HTTP status (the OpenAPI document lists them).
CODES: dict[str, int] = {
    "invalid_request": 422,  # the body or a parameter does not match the operation's schema
    "invalid_id": 400,  # an agent, discussion or job id that is not a safe id
    "malformed_messages": 422,  # messages that cannot be appended as given
    "bad_settings": 400,  # a settings file (engram.json, agent.config.json, …) that cannot be used
    "unsupported_field": 400,  # a request field engram cannot honour (the proxy's `tools`): refused, never dropped
    "bad_workflow": 400,  # a workflow that cannot run
    "bad_query": 400,  # SQL that fails, an empty or unusable query
    "unauthorized": 401,  # API keys are configured and the request has none, or one that is not valid
    "forbidden": 403,  # the key may not do this (a home-wide operation with a key limited to agents)
    "unknown_agent": 404,
    "unknown_discussion": 404,
    "unknown_job": 404,
    "unknown_workflow": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,  # e.g. replay into a directory that is not empty
    "ambiguous_discussion": 409,  # a route given only a discussion id, which several agents' discussions have
    "body_too_large": 413,
    "backpressure": 429,  # too much in flight: retry after the Retry-After header's seconds
    "unsupported_media_type": 415,
    "llm_error": 502,  # the LLM answered with an error
    "llm_unavailable": 503,  # the LLM could not be reached (or its API key is missing)
    "runtime_unavailable": 503,  # Ray or the shard actors are down
    "job_lost": 503,  # a job's error: the server (replica) running it stopped before it finished
    "lagging": 503,  # a read `after` a position: what it reads had not handled it within the bounded wait
    "internal": 500,
}


def error(code: str, message: str, param: str | None = None) -> ApiError:
    return ApiError(CODES[code], code, message, param=param)


# The refusals that concern agents and discussions. One text each, whatever the reason (it does not exist, or it is
# another key's): a caller learns nothing of agents it may not see, and no refusal names another agent.

def unknown_agent(agent: str) -> ApiError:
    return error("unknown_agent", f"agent {agent!r} is not known (no events, no agent.config.json)")


def unknown_discussion(discussion: str, agent: str | None = None) -> ApiError:
    if agent is None:
        return error("unknown_discussion", f"discussion {discussion!r} is not known")
    return error("unknown_discussion", f"agent {agent!r} has no discussion {discussion!r}")


def ambiguous_discussion(discussion: str) -> ApiError:
    """A route given only a discussion id, for an id that several agents' discussions have (a discussion id is unique
    within its agent only). Names none of them: the caller names the agent."""
    return error("ambiguous_discussion", f"discussion {discussion!r} is not unique across the agents this key sees; "
                 "name the agent (`agent`) whose discussion it is")


def check_count(name: str, value: int | None, maximum: int) -> None:
    """A count a request asks for (a limit, the last n): None (all), or 1..`maximum`; else invalid_request."""
    if value is not None and not 1 <= value <= maximum:
        raise error("invalid_request", f"{name} must be a number from 1 to {maximum}, got {str(value):.30}")


def translate(exc: BaseException) -> ApiError | None:
    """The ApiError a domain exception means, or None when it is not the caller's doing (a 500)."""
    from engram.config.errors import ConfigError
    from engram.kernel.ids import InvalidIdError

    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InvalidIdError):
        return error("invalid_id", str(exc))
    if isinstance(exc, ConfigError):
        return error("bad_settings", str(exc))
    from engram.memory.ingest.messages import MessageRejected
    if isinstance(exc, MessageRejected):
        return error("malformed_messages", str(exc))
    from engram.events.store import EventIdConflict

    if isinstance(exc, EventIdConflict):
        return error("conflict", str(exc))
    from engram.runtime.base import RuntimeUnavailable
    from engram.kernel.flow import Backpressure

    if isinstance(exc, Backpressure):
        refused = error("backpressure", str(exc))
        refused.retry_after = exc.retry_after_s
        return refused
    if isinstance(exc, RuntimeUnavailable):
        return error("runtime_unavailable", str(exc))
    llm = llm_error(exc)
    if llm is not None:
        return llm
    return None


def llm_error(exc: BaseException) -> ApiError | None:
    """An LLM outage as 503 (unreachable, no key) or 502 (it answered with an error), with its cause."""
    try:
        from engram.providers.llm.caller import CallFailed
    except ImportError:  # the anthropic SDK is part of the install; without it there is no outage to report
        return None
    if isinstance(exc, CallFailed):
        return llm_failure(str(exc))
    return None


def llm_failure(cause: str, suffix: str = "") -> ApiError:
    """503 when the LLM could not be reached (connection, timeout, overload, no key), else 502."""
    unreachable = any(w in cause.lower() for w in ("connect", "timed out", "timeout", "api key", "unreachable",
                                                   "overloaded", "is not set", "529", "503"))
    return error("llm_unavailable" if unreachable else "llm_error", f"the LLM failed: {cause}{suffix}")


def translated_exceptions() -> tuple[type, ...]:
    """What `engram.api.errors.translate` turns into a refusal (4xx, or 502/503 for an outage)."""
    from engram.runtime.base import RuntimeUnavailable
    from engram.config.errors import ConfigError
    from engram.events.store import EventIdConflict
    from engram.kernel.flow import Backpressure
    from engram.kernel.ids import InvalidIdError
    from engram.memory.ingest.messages import MessageRejected
    from engram.providers.llm.caller import CallFailed

    return InvalidIdError, ConfigError, MessageRejected, Backpressure, RuntimeUnavailable, CallFailed, EventIdConflict
