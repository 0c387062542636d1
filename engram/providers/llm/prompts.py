"""Prompt templates: the defaults shipped in `engram/prompts/`, overridable file by file, with
WilmerAI's placeholders.

Each task has `<task>.system.txt` (stable: it is the prompt-cached part) and `<task>.prompt.txt`
(the user message); `repair.prompt.txt` and `repair_text.prompt.txt` ask once more after an
unusable answer. Placeholders are replaced literally wherever they appear:

    [TextChunk]          the messages of the task (transcript)
    [Memory_file]        recent chunk memories          [Full_Memory_file]  all chunk memories
    [Chat_Summary]       the rolling summary            [CHAT_SUMMARY]      the same
    [LATEST_MEMORIES]    memories not yet in the summary
    engram's own: [Focus] [Notes] [ExistingTraces] [Members] [Query] [Categories] [MaxFacts]
                  [MaxTokens] [TargetTokens] [Error]
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

from engram.events.envelope import iso
from engram.providers.llm.types import ChatLine

WILMER_PLACEHOLDERS = (
    "[TextChunk]",
    "[Memory_file]",
    "[Full_Memory_file]",
    "[Chat_Summary]",
    "[CHAT_SUMMARY]",
    "[LATEST_MEMORIES]",
)
# What fills a WilmerAI placeholder that has nothing to show (prompts stay readable).
EMPTY = "(none)"


class PromptTemplates:
    """Templates by file name; a file in `override_dir` wins over the packaged default."""

    def __init__(self, override_dir: str | Path | None = None):
        self._override = Path(override_dir).expanduser() if override_dir else None
        self._cache: dict[str, str] = {}

    def get(self, name: str) -> str:
        if name not in self._cache:
            text = None
            if self._override is not None and (self._override / name).is_file():
                text = (self._override / name).read_text(encoding="utf-8")
            if text is None:
                text = resources.files("engram").joinpath("prompts", name).read_text(encoding="utf-8")
            self._cache[name] = text.strip()
        return self._cache[name]

    def system(self, task: str) -> str:
        return self.get(f"{task}.system.txt")

    def prompt(self, task: str) -> str:
        return self.get(f"{task}.prompt.txt")


def render(template: str, values: Mapping[str, str]) -> str:
    """`template` with each `[Name]` of `values` replaced (other bracketed text is left alone)."""
    out = template
    for name, value in values.items():
        out = out.replace(f"[{name}]", value)
    return out


def wilmer_values(
    text_chunk: str = "",
    recent_memories: Sequence[str] = (),
    all_memories: Sequence[str] = (),
    chat_summary: str = "",
    latest_memories: Sequence[str] = (),
) -> dict[str, str]:
    summary = chat_summary.strip() or EMPTY
    return {
        "TextChunk": text_chunk,
        "Memory_file": "\n".join(recent_memories) or EMPTY,
        "Full_Memory_file": "\n".join(all_memories) or EMPTY,
        "Chat_Summary": summary,
        "CHAT_SUMMARY": summary,
        "LATEST_MEMORIES": "\n".join(latest_memories) or EMPTY,
    }


def transcript(lines: Sequence[ChatLine]) -> str:
    """WilmerAI's chunk text: one "speaker: text" line per message."""
    return "\n".join(f"{line.speaker}: {line.content}" for line in lines)


def line_label(line: ChatLine) -> str:
    return line.message_id or f"seq-{line.seq}"


def numbered_transcript(lines: Sequence[ChatLine], by_id: bool = False) -> str:
    """Lines an answer can point back to: "[n] (2023-05-08 13:56) speaker: text" (n from 1, or the message id)."""
    out = []
    for n, line in enumerate(lines, start=1):
        when = iso(line.ts_us)[:16].replace("T", " ")
        key = line_label(line) if by_id else str(n)
        out.append(f"[{key}] ({when}) {line.speaker}: {line.content}")
    return "\n".join(out)
