"""Per task: what fills the prompt's placeholders, and how a model's answer becomes the task's value.

An answer that is not what the task asked for raises `AnswerInvalid` with a message the repair
prompt shows the model; the caller retries once, then records a failure.
"""

from __future__ import annotations

from engram.providers.llm.answers import cognitive as c, discussion as dm, respond as rs
from engram.providers.llm.answers.common import AnswerInvalid, TaskSpec, text_answer


def _text(task_input, answer: str) -> str:
    return text_answer(answer)


def _max_tokens(task_input) -> int:
    return task_input.max_tokens


SPECS: dict[str, TaskSpec] = {
    s.task: s
    for s in (
        TaskSpec("summarize_chunk", False, dm.summarize_chunk_values, _text, _max_tokens),
        TaskSpec("merge_summary", False, dm.merge_values, _text, _max_tokens),
        TaskSpec("extract_memory", True, dm.memory_values, dm.decode_memory, _max_tokens),
        TaskSpec("observe", True, c.observe_values, c.decode_notes),
        TaskSpec("reflect", True, c.reflect_values, c.decode_reflection),
        TaskSpec("extract_facts", True, c.facts_values, c.decode_facts),
        TaskSpec("summarize_schema", False, dm.schema_values, _text, _max_tokens),
        TaskSpec("hyde", False, dm.hyde_values, _text, _max_tokens),
        TaskSpec("compact", True, dm.compact_values, dm.decode_compaction),
        TaskSpec("respond", False, rs.respond_values, _text, _max_tokens, turns=rs.respond_turns),
    )
}

__all__ = ["AnswerInvalid", "SPECS", "TaskSpec"]
