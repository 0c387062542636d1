"""Position tokens: read your writes.

Every write answers with a `position` token: where its events are in the log, per shard (`"0:1234"`; a client that
wrote to agents on several shards holds `"0:1234,2:77"`). A read given that token as `after` answers only once the
projections and policies it reads from have handled that position (`Api.reach`), or refuses after a bounded wait
(503 `lagging`, naming what lags). A read without `after` never waits for anyone's writes.

The token is plain text, so that every interface (REST query, MCP tool argument, a client's session) carries it as is;
`merge` keeps the furthest position of each shard, which is what a session that wrote several times needs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from engram.api.errors import error
from engram.kernel.idle import PROJECTIONS

if TYPE_CHECKING:
    from engram.runtime.base import Lagging

_PART = re.compile(r"^(\d{1,6}):(\d{1,19})$")
MAX_SHARDS_IN_TOKEN = 1024


def parse(token: str | None) -> dict[int, int]:
    """The token as shard -> seq ({} for None or ""); a malformed one is refused, saying what a token looks like."""
    if not token:
        return {}
    out: dict[int, int] = {}
    parts = token.split(",")
    if len(parts) > MAX_SHARDS_IN_TOKEN:
        raise error("invalid_request", f"after: a position token names at most {MAX_SHARDS_IN_TOKEN} shards")
    for part in parts:
        m = _PART.match(part.strip())
        if m is None:
            raise error("invalid_request", f"after: {token[:80]!r} is not a position token: pass the `position` a "
                                           "write answered with (e.g. \"0:1234\", or \"0:1234,1:56\")")
        shard, seq = int(m.group(1)), int(m.group(2))
        out[shard] = max(out.get(shard, 0), seq)
    return out


def render(positions: dict[int, int]) -> str:
    """shard -> seq as a token (shards in order; empty positions left out)."""
    return ",".join(f"{s}:{q}" for s, q in sorted(positions.items()) if q > 0)


def token(shard: int, seqs: Iterable[int | None]) -> str | None:
    """The token of a write whose events landed on `shard` at `seqs` (None when nothing was appended)."""
    landed = [s for s in seqs if s]
    return f"{shard}:{max(landed)}" if landed else None


def merge(*tokens: str | None) -> str:
    """The furthest position of each shard over `tokens`: what a session that wrote each of them must read after."""
    out: dict[int, int] = {}
    for tok in tokens:
        for shard, seq in parse(tok).items():
            out[shard] = max(out.get(shard, 0), seq)
    return render(out)


# What each kind of read reads from, in the order a read `after` a position waits for them (`Runtime.reach`): the
# policy groups whose output it shows handle the position first (what they append for it comes after it in the log),
# then the consumers that fold their output. PROJECTIONS is the shard's fold (files and rows).
READS: dict[str, tuple[str, ...]] = {
    # the log as folded: messages, discussions, agents
    "log": (PROJECTIONS,),
    # traces are made by auto-ingest (every turn) and the Reflector; the trace reader folds them for recall
    "recall": ("auto-ingest", "traces"),
    "traces": ("auto-ingest", PROJECTIONS),
    # chunk memories, the rolling summary and the vector memory are the Summarizer's, folded into the files
    "discussion": ("summarizer", PROJECTIONS),
    "context": ("summarizer", "context", "auto-ingest", "traces", PROJECTIONS),
    "working_memory": ("auto-ingest", "working-memory", PROJECTIONS),
    "observations": ("observer", PROJECTIONS),
    "mood": ("auto-ingest", PROJECTIONS),
    # an agent's memories of every kind (engram.api.listing): traces, chunk and vector memories, observations
    "memories": ("auto-ingest", "summarizer", "observer", PROJECTIONS),
}


def lagging_message(shard: int, seq: int, lag: Lagging) -> str:
    """The 503 of a read whose wait ran out: which consumer lags, where it is, and what to do."""
    return (f"this read waits for position {shard}:{seq} (`after`) and {lag.what} had not handled it in time "
            f"(at {lag.shard}:{lag.position}): retry shortly, or read without `after` to get what is folded now")
