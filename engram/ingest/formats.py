"""Input formats of `engram ingest`: OpenAI-style chat JSON, JSONL of messages, LoCoMo JSON.

A file is parsed completely before anything is appended; any problem raises IngestError
naming the file, the line or JSON path, and the reason, so a file goes in whole or not at all.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
import msgspec

from engram.events.envelope import to_us
from engram.ids import InvalidIdError, find_discussion_id, validate_discussion
from engram.ingest.messages import IncomingMessage


class IngestError(ValueError):
    def __init__(self, source: str, where: str, reason: str):
        super().__init__(f"{source}:{where}: {reason}" if where else f"{source}: {reason}")
        self.source, self.where, self.reason = source, where, reason


class Conversation(msgspec.Struct, frozen=True):
    discussion: str
    messages: list[IncomingMessage]


# Keys an OpenAI chat message may carry; only role, content and name matter for memory.
_OPENAI_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "function_call", "refusal", "audio", "ts", "timestamp"}
_JSONL_KEYS = {"role", "content", "name", "ts", "timestamp", "message_id", "id", "discussion", "discussion_id", "metadata"}


def parse_ts(value: object, source: str, where: str) -> int:
    """Event time in µs from ISO-8601 text (naive means UTC) or epoch seconds."""
    if isinstance(value, bool):
        raise IngestError(source, where, f"timestamp {value!r} is neither ISO-8601 text nor epoch seconds")
    if isinstance(value, (int, float)):
        return int(value * 1_000_000)
    if isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise IngestError(source, where, f"timestamp {value!r} is not ISO-8601") from None
        return to_us(ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc))
    raise IngestError(source, where, f"timestamp {value!r} is neither ISO-8601 text nor epoch seconds")


def _text(content: object, source: str, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(parts)
    if content is None:
        return ""
    raise IngestError(source, where, f"content must be text, got {type(content).__name__}")


def _resolve_discussion(tag_id: str | None, given: str | None, source: str) -> str:
    if given and tag_id and given != tag_id:
        raise IngestError(source, "", f"--discussion {given!r} differs from the [DiscussionId] tag {tag_id!r}")
    chosen = given or tag_id
    if not chosen:
        raise IngestError(source, "", "no discussion id: add a [DiscussionId]…[/DiscussionId] tag to a message or pass --discussion")
    try:
        return validate_discussion(chosen)
    except InvalidIdError as exc:
        raise IngestError(source, "", str(exc)) from None


def _tag_id(messages: list[IncomingMessage], source: str) -> str | None:
    try:
        return find_discussion_id([m.content for m in messages if m.role in ("user", "system")])
    except InvalidIdError as exc:
        raise IngestError(source, "[DiscussionId]", str(exc)) from None


def parse_openai(data: object, source: str, discussion: str | None, now_us: int) -> list[Conversation]:
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if not isinstance(data, list):
        raise IngestError(source, "", "expected a list of {role, content} messages")
    messages = []
    for i, item in enumerate(data):
        where = f"[{i}]"
        if not isinstance(item, dict):
            raise IngestError(source, where, "a message must be an object with role and content")
        unknown = set(item) - _OPENAI_KEYS
        if unknown:
            raise IngestError(source, where, f"unknown key(s) {sorted(unknown)}; a message has {sorted(_OPENAI_KEYS)}")
        for key in ("role", "content"):
            if key not in item:
                raise IngestError(source, where, f"missing {key!r}")
        ts_raw = item.get("ts", item.get("timestamp"))
        messages.append(
            IncomingMessage(
                role=str(item["role"]),
                content=_text(item["content"], source, where + ".content"),
                name=item.get("name"),
                ts_us=parse_ts(ts_raw, source, where + ".ts") if ts_raw is not None else now_us + i,
            )
        )
    return [Conversation(_resolve_discussion(_tag_id(messages, source), discussion, source), messages)]


def parse_jsonl(text: str, source: str, discussion: str | None, now_us: int) -> list[Conversation]:
    by_discussion: dict[str | None, list[IncomingMessage]] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{lineno}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IngestError(source, f"{lineno}:{exc.colno}", exc.msg) from None
        if not isinstance(item, dict):
            raise IngestError(source, where, "each line must be a JSON object")
        unknown = set(item) - _JSONL_KEYS
        if unknown:
            raise IngestError(source, where, f"unknown key(s) {sorted(unknown)}; a line has {sorted(_JSONL_KEYS)}")
        for key in ("role", "content"):
            if key not in item:
                raise IngestError(source, where, f"missing {key!r}")
        ts_raw = item.get("ts", item.get("timestamp"))
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise IngestError(source, where, "metadata must be an object")
        msg = IncomingMessage(
            role=str(item["role"]),
            content=_text(item["content"], source, where),
            name=item.get("name"),
            message_id=str(item.get("message_id") or item.get("id")) if (item.get("message_id") or item.get("id")) else None,
            ts_us=parse_ts(ts_raw, source, where) if ts_raw is not None else now_us + lineno,
            metadata={str(k): str(v) for k, v in metadata.items()},
        )
        by_discussion.setdefault(item.get("discussion") or item.get("discussion_id"), []).append(msg)
    if not by_discussion:
        raise IngestError(source, "", "no messages in the file")
    out = []
    for line_discussion, messages in by_discussion.items():
        given = line_discussion or discussion
        out.append(Conversation(_resolve_discussion(_tag_id(messages, source), given, source), messages))
    return out


_LOCOMO_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"], 1)}


def parse_locomo_date(text: str, source: str, where: str) -> int:
    """"1:56 pm on 8 May, 2023" -> µs (UTC; the dataset gives no time zone)."""
    m = _LOCOMO_DATE.match(text or "")
    month = _MONTHS.get(m.group(5).lower()) if m else None
    if not m or not month:
        raise IngestError(source, where, f"session date {text!r} is not like '1:56 pm on 8 May, 2023'")
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
    ts = datetime(int(m.group(6)), month, int(m.group(4)), hour, int(m.group(2)), tzinfo=timezone.utc)
    return to_us(ts)


def parse_locomo(data: object, source: str) -> list[Conversation]:
    samples = data if isinstance(data, list) else [data]
    out = []
    for si, sample in enumerate(samples):
        where = f"[{si}]"
        if not isinstance(sample, dict) or "conversation" not in sample or "sample_id" not in sample:
            raise IngestError(source, where, "a LoCoMo sample needs 'sample_id' and 'conversation'")
        try:
            discussion = validate_discussion(str(sample["sample_id"]))
        except InvalidIdError as exc:
            raise IngestError(source, where + ".sample_id", str(exc)) from None
        conv = sample["conversation"]
        numbers = sorted(
            int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list)
        )
        messages = []
        for n in numbers:
            swhere = f"{where}.conversation.session_{n}"
            ts_us = parse_locomo_date(conv.get(f"session_{n}_date_time", ""), source, swhere + "_date_time")
            for ti, turn in enumerate(conv[f"session_{n}"]):
                twhere = f"{swhere}[{ti}]"
                if not isinstance(turn, dict) or not {"speaker", "dia_id", "text"} <= set(turn):
                    raise IngestError(source, twhere, "a turn needs 'speaker', 'dia_id' and 'text'")
                content = turn["text"]
                metadata = {"session": str(n)}
                if turn.get("blip_caption"):
                    # The shared image is part of what was said; its caption is how a text memory sees it.
                    content = f"{content} [shares a photo: {turn['blip_caption']}]"
                    metadata["blip_caption"] = str(turn["blip_caption"])
                messages.append(
                    IncomingMessage(
                        role="user",
                        content=content,
                        name=str(turn["speaker"]),
                        message_id=str(turn["dia_id"]),
                        ts_us=ts_us,
                        metadata=metadata,
                    )
                )
        out.append(Conversation(discussion, messages))
    return out


def detect_format(path: Path, data: object | None) -> str:
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    sample = data[0] if isinstance(data, list) and data else data
    if isinstance(sample, dict) and "conversation" in sample and "sample_id" in sample:
        return "locomo"
    return "openai"


def parse_file(
    path: str | Path,
    *,
    discussion: str | None = None,
    fmt: str | None = None,
    now_us: int,
) -> list[Conversation]:
    """Every conversation in the file, fully validated; raises IngestError on the first problem."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise IngestError(source, "", f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise IngestError(source, f"byte {exc.start}", "not UTF-8 text") from None
    data = None
    if fmt != "jsonl" and path.suffix.lower() != ".jsonl":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IngestError(source, f"{exc.lineno}:{exc.colno}", exc.msg) from None
    kind = fmt or detect_format(path, data)
    if kind == "jsonl":
        return parse_jsonl(text, source, discussion, now_us)
    if kind == "locomo":
        if discussion:
            raise IngestError(source, "", "LoCoMo files name their discussions (sample_id); do not pass --discussion")
        return parse_locomo(data, source)
    if kind == "openai":
        return parse_openai(data, source, discussion, now_us)
    raise IngestError(source, "", f"unknown format {kind!r}; use openai, jsonl or locomo")
