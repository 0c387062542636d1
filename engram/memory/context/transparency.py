"""What a `ContextCompacted` event keeps at each `transparencyLevel`.

Whatever the level, the event keeps what the chain is made of — node id, strategy, level, the
messages and turns it stands for, its summary, the tokens in and out (so the compression ratio),
its children, the trigger, the window in force — and the LLM provenance of its summary (engram
records where every LLM output came from). Beyond that:

- `full` (default): also the dropped content (ids of the messages, or of the child nodes, whose
  content the summary does not carry; `engram compactions` shows their text from the log), the
  preserved entities, the traces created, the context before and after, the hybrid note counts,
  and the duration;
- `summary`: the same figures without the list of what was dropped (only how many);
- `none`: the chain only.

Dropped content is never lost: the messages stay in the log (and in long-term memory as traces).
"""

from __future__ import annotations

import msgspec

from engram.events.background import ContextCompacted

LEVELS = ("full", "summary", "none")


def at_level(ev: ContextCompacted, level: str) -> ContextCompacted:
    """`ev` with only what `level` keeps."""
    if level not in LEVELS:
        raise ValueError(f"transparency level {level!r} is not one of {LEVELS}")
    if level == "full":
        return msgspec.structs.replace(ev, transparency=level)
    if level == "summary":
        return msgspec.structs.replace(ev, transparency=level, dropped=())
    return msgspec.structs.replace(
        ev, transparency=level, dropped=(), dropped_count=0, preserved_entities=(), traces_created=(),
        context_tokens_before=0, context_tokens_after=0, notes_reused=0, notes_observed=0, duration_ms=0.0,
    )
