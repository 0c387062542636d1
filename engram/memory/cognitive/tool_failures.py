"""Tool-failure learning: a failed tool call that matches one of six patterns becomes a lesson.

The Wunderland guide's patterns and lessons:
    Anti-bot (CAPTCHA, 403, Cloudflare) → "Use web_search or stealth_navigate"
    Empty content                      → "Site may block headless browsers"
    API key missing                    → "Check wunderland extensions info"
    Timeout                            → "Service may be down, try alternatives"
    Rate limit (429)                   → "Wait or switch provider"
    Ollama model missing               → "Run wunderland ollama-setup"
(engram names its own command where the guide names wunderland's.)

Lessons are deduplicated per discussion: one lesson per (discussion, pattern, tool).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: re.Pattern[str]
    lesson: str  # {tool} is replaced by the failing tool's name


# Order matters: the first match wins (a 403 from Cloudflare is anti-bot, not a missing key).
PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "ollama_model_missing",
        re.compile(r"ollama.*(model|pull)|model\s+['\"]?[\w.:/-]+['\"]?\s+not\s+found.*ollama|try pulling it first", re.I | re.S),
        "{tool} failed because the Ollama model is not installed: run the Ollama setup (pull the model) before using it.",
    ),
    Pattern(
        "anti_bot",
        re.compile(r"captcha|cloudflare|\b403\b|forbidden|access denied|bot (detection|protection)|are you a robot|challenge page", re.I),
        "{tool} was blocked by anti-bot protection (CAPTCHA / 403 / Cloudflare): use web_search or stealth_navigate instead.",
    ),
    Pattern(
        "rate_limit",
        re.compile(r"\b429\b|rate[ -]?limit|too many requests|quota exceeded", re.I),
        "{tool} hit a rate limit (429): wait before retrying or switch provider.",
    ),
    Pattern(
        "api_key_missing",
        re.compile(r"api[ _-]?key|unauthori[sz]ed|\b401\b|missing (credentials|token)|no (auth|credentials)", re.I),
        "{tool} failed for a missing or invalid API key: check the extension's configuration (engram/wunderland extensions info).",
    ),
    Pattern(
        "timeout",
        re.compile(r"time[d ]?[ -]?out|deadline exceeded|ETIMEDOUT|took too long", re.I),
        "{tool} timed out: the service may be down; try alternatives.",
    ),
    Pattern(
        "empty_content",
        re.compile(r"empty (content|page|response|body|result)|no content|blank page|returned nothing|0 bytes", re.I),
        "{tool} returned empty content: the site may block headless browsers; try another source.",
    ),
)

PATTERN_NAMES = tuple(p.name for p in PATTERNS)


@dataclass(frozen=True)
class Lesson:
    pattern: str
    tool: str
    text: str


def match(tool: str, error: str) -> Lesson | None:
    """The lesson for a failed call of `tool` with `error`, or None when no pattern matches."""
    for p in PATTERNS:
        if p.regex.search(error or ""):
            return Lesson(pattern=p.name, tool=tool, text=p.lesson.format(tool=tool or "a tool"))
    return None


def dedup_key(discussion: str, lesson: Lesson) -> tuple[str, str, str]:
    return (discussion, lesson.pattern, lesson.tool)
