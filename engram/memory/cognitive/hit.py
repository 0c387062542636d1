"""A recall hit as it is shown, declared once (issue 26): the core's hit (`engram.memory.cognitive.retrieval.RecallHit`)
and the API's (`engram.api.types.RecallHit`) both extend `HitShown`, so a field added here is in the recall answer
without being retyped. Only msgspec is imported: the API's types import this module, and a command must start fast.
"""

from __future__ import annotations

import msgspec


class HitShown(msgspec.Struct, kw_only=True):
    """What a recall hit shows as it is: declared once, here, for the core's hit (`RecallHit`) and the API's
    (`engram.api.types.RecallHit`), which both extend it. A field added here reaches the recall answer; a field the
    API computes (a rounded score, an ISO time) is the API's, a scoring input the core's."""

    rank: int
    trace_id: str
    content: str
    trace_type: str
    category: str
    scope: str
    scope_id: str
    via: str  # "similarity" | "keywords" | "hyde" | "feedback" | "answer" | "activation" | "correction" | "dormant" | "superseded": how it became a candidate
    source_seqs: tuple[int, ...]
    source_message_ids: tuple[str, ...]
    context: str = ""  # for a reply, the question it answers (shown with it)
    context_message_ids: tuple[str, ...] = ()  # where the context comes from
    # A dormant hit (via "dormant"): a trace the decay sweep pruned, found again through what it was made from; the
    # factor on its composite (its contributions include it).
    dormant_weight: float = 1.0
    asks: bool = False  # the memory only asks (a stored question, step 9): its composite includes QUESTION_WEIGHT
    superseded_by: str = ""  # the trace that closed its validity (step 10)
    # What a prompt shows of it (engram.memory.cognitive.shown): the context cut to its last question, the content
    # whole for the best three hits and as the sentences sharing the query's words for the others, no sentence a
    # better hit shows. `content` stays whole.
    shown: str = ""
