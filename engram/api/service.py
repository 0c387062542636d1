"""`Api`: every operation a user has, as typed functions over one `Runtime`.

The CLI (through the HTTP server), `engram.Client`, REST and, later, MCP and the OpenAI-compatible
proxy all call these methods and nothing else. Each method takes plain arguments or a request type of
`engram.api.types` and returns a response type; every refusal is an `ApiError` (a stable code, an HTTP
status, a message saying what to fix) raised before anything is appended.

The operations are grouped by area in mixins (one module each) over `engram.api.core.ApiCore`, what they share:
the runtime, the clock (the API is a shell: it may read the wall clock, the domain never does), the
agents and discussions the log knows, and settings recording.
"""

from __future__ import annotations

from engram.api.access import Principal, ScopedApi
from engram.api.admin import AdminOps
from engram.api.cognitive import CognitiveOps
from engram.api.completions import CompletionOps
from engram.api.discussions import DiscussionOps
from engram.api.listing import ListOps
from engram.api.memories import MemoryOps
from engram.api.messages import MessageOps
from engram.api.work import WorkOps


class Api(MessageOps, DiscussionOps, CognitiveOps, MemoryOps, WorkOps, CompletionOps, AdminOps, ListOps):
    """Every operation, by area; what they share is `engram.api.core.ApiCore`."""

    def scoped(self, principal: Principal) -> ScopedApi:
        """This API as `principal` sees the home: exactly its agents (`engram.api.access.ScopedApi`)."""
        return ScopedApi(self, principal)
