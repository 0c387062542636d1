"""A recall hit as it is shown, declared once (issue 26): the core's hit (`engram.memory.cognitive.retrieval.RecallHit`)
and the API's (`engram.api.types.RecallHit`) both extend `HitShown`, so a field added here is in the recall answer
without being retyped. Only msgspec is imported: the API's types import this module, and a command must start fast.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from engram.kernel.describe import doc


class HitShown(msgspec.Struct, kw_only=True):
    """What a recall hit shows as it is: declared once, here, for the core's hit (`RecallHit`) and the API's
    (`engram.api.types.RecallHit`), which both extend it. A field added here reaches the recall answer; a field the
    API computes (a rounded score, an ISO time) is the API's, a scoring input the core's."""

    rank: Annotated[int, doc("1 for the best hit.")]
    trace_id: Annotated[str, doc("The memory trace's id (what `PATCH`/`DELETE …/memories/trace/{id}` take).")]
    content: Annotated[str, doc("The memory's text, whole.")]
    trace_type: Annotated[str, doc("The trace's type: episodic, semantic, procedural, prospective or relational.")]
    category: Annotated[str, doc("The trace's category (a fact's, \"lesson\", \"observation\", …); empty: none.")]
    scope: Annotated[str, doc("What the memory belongs to: `discussion` or `agent`.")]
    scope_id: Annotated[str, doc("The discussion's id (scope discussion) or the agent's (scope agent).")]
    via: Annotated[str, doc(
        "How it became a candidate: similarity, keywords, hyde, feedback, answer, activation (spreading over the "
        "trace graph), correction, dormant (a pruned trace found again) or superseded.")]
    source_seqs: Annotated[tuple[int, ...], doc("Log positions of the messages it was made from.")]
    source_message_ids: Annotated[tuple[str, ...], doc("Ids of the messages it was made from.")]
    context: Annotated[str, doc("For a reply, the question it answers (shown with it).")] = ""
    context_message_ids: Annotated[tuple[str, ...], doc("Where the context comes from.")] = ()
    # A dormant hit (via "dormant"): a trace the decay sweep pruned, found again through what it was made from.
    dormant_weight: Annotated[float, doc(
        "The factor on a dormant hit's score (1 for a live trace); its contributions include it.")] = 1.0
    asks: Annotated[bool, doc(
        "The memory only asks (a stored question, step 9): its composite includes the question weight.")] = False
    superseded_by: Annotated[str, doc("The trace that closed its validity (step 10); empty: none.")] = ""
    shown: Annotated[str, doc(
        "What a prompt shows of it (engram.memory.cognitive.shown): the context cut to its last question, the "
        "content whole for the best three hits and as the sentences sharing the query's words for the others, no "
        "sentence a better hit shows (`content` stays whole).")] = ""
