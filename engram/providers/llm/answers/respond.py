"""The respond task's request: the turns a model reads (its answer is plain text).

Without a prompt, the conversation becomes alternating user/assistant turns (consecutive lines of
one side are joined; a line with a speaker name keeps it, for group chats), and the memory
context goes into the last user turn through the `respond.prompt.txt` template (passages the
system prompt already shows are left out). With a prompt, the prompt is the one user turn,
rendered with the same placeholders (`[MemoryContext]` among them).
"""

from __future__ import annotations

from typing import Sequence

from engram.providers.llm import inputs as i
from engram.providers.llm.prompts import EMPTY, render, transcript, wilmer_values
from engram.providers.llm.types import ChatLine

# Placeholders of the respond templates (engram's own).
CONTEXT = "MemoryContext"
MESSAGE = "Message"
# The user turn added when the conversation ends with the assistant (the API answers a user turn).
CONTINUE = "(Continue the conversation.)"
# The user turn put first when the conversation opens with the assistant.
OPENING = "(The conversation so far.)"
PASSAGE_SEPARATOR = "\n\n"


def context_text(passages: Sequence[str]) -> str:
    return PASSAGE_SEPARATOR.join(p.strip() for p in passages if p.strip())


def respond_values(t: i.Respond) -> dict[str, str]:
    v = wilmer_values(transcript(t.lines))
    v[CONTEXT] = context_text(t.context) or EMPTY
    v["MaxTokens"] = str(t.max_tokens)
    return v


def _side(line: ChatLine) -> str:
    return "assistant" if line.role == "assistant" else "user"


def conversation_turns(lines: Sequence[ChatLine]) -> list[tuple[str, str]]:
    turns: list[tuple[str, str]] = []
    for line in lines:
        if not line.content.strip():
            continue
        text = f"{line.name}: {line.content}" if line.name else line.content
        side = _side(line)
        if turns and turns[-1][0] == side:
            turns[-1] = (side, turns[-1][1] + "\n\n" + text)
        else:
            turns.append((side, text))
    if turns and turns[0][0] == "assistant":
        turns.insert(0, ("user", OPENING))
    return turns


def respond_turns(t: i.Respond, values: dict[str, str], templates, system: str) -> tuple[tuple[str, str], ...]:
    if t.prompt.strip():
        return (("user", render(t.prompt, values)),)
    turns = conversation_turns(t.lines)
    if not turns or turns[-1][0] == "assistant":
        turns.append(("user", CONTINUE))
    # Passages the system prompt shows already (a node's `{search}` there) are not shown twice.
    shown = context_text([p for p in t.context if p.strip() not in system])
    if shown:
        last = render(templates.prompt("respond"), {**values, CONTEXT: shown, MESSAGE: turns[-1][1]})
        turns[-1] = ("user", last)
    return tuple(turns)
