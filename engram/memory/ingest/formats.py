"""Input formats of `engram ingest`: OpenAI-style chat JSON, JSONL of messages, LoCoMo JSON.

A file is parsed completely before anything is appended; any problem raises IngestError
naming the file, the line or JSON path, and the reason, so a file goes in whole or not at all.

Each format is a set of msgspec Structs, decoded straight from the file's bytes: types, required
keys and (where the format is ours, or closed like OpenAI's message keys) unknown keys are checked
by the decoder, which names the JSON path of what is wrong. Values the decoder cannot judge
(timestamps in range, dates that exist, text that is valid Unicode) are checked here after it.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Union

import msgspec

from engram.events.envelope import iso, to_us
from engram.events.validation import MAX_TS_US, MIN_TS_US
from engram.kernel.ids import InvalidIdError, find_discussion_id, validate_discussion
from engram.memory.ingest.messages import IncomingMessage


class IngestError(ValueError):
    def __init__(self, source: str, where: str, reason: str):
        super().__init__(f"{source}:{where}: {reason}" if where else f"{source}: {reason}")
        self.source, self.where, self.reason = source, where, reason


class Conversation(msgspec.Struct, frozen=True):
    discussion: str
    messages: list[IncomingMessage]


Timestamp = Union[str, int, float, None]  # ISO-8601 text (naive means UTC) or epoch seconds


# ---------------------------------------------------------------------- OpenAI chat


class ContentPart(msgspec.Struct, frozen=True):
    """An OpenAI content part; only text parts carry text for memory (images etc. are skipped)."""

    type: str
    text: str | None = None
    image_url: msgspec.Raw | None = None
    input_audio: msgspec.Raw | None = None
    file: msgspec.Raw | None = None
    refusal: str | None = None


class OpenAIMessage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The keys an OpenAI chat message may carry; only role, content, name and a timestamp matter for memory."""

    role: str
    content: Union[str, list[ContentPart], None]
    name: str | None = None
    tool_calls: msgspec.Raw | None = None
    tool_call_id: str | None = None
    function_call: msgspec.Raw | None = None
    refusal: str | None = None
    audio: msgspec.Raw | None = None
    ts: Timestamp = None
    timestamp: Timestamp = None


class OpenAIChat(msgspec.Struct, frozen=True):
    """`{"messages": [...]}` (other keys of a request, e.g. "model", are ignored)."""

    messages: list[OpenAIMessage]


# ---------------------------------------------------------------------- JSONL (engram's own format)

Scalar = Union[str, int, float, bool, None]


class JsonlMessage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    role: str
    content: Union[str, list[ContentPart], None]
    name: str | None = None
    ts: Timestamp = None
    timestamp: Timestamp = None
    message_id: str | int | None = None
    id: str | int | None = None
    discussion: str | None = None
    discussion_id: str | None = None
    metadata: dict[str, Scalar] | None = None


# ---------------------------------------------------------------------- LoCoMo


class LocomoTurn(msgspec.Struct, frozen=True):
    speaker: str
    dia_id: str
    text: str
    blip_caption: str | None = None


class LocomoSample(msgspec.Struct, frozen=True):
    sample_id: str | int
    conversation: dict[str, msgspec.Raw]


_turns = msgspec.json.Decoder(list[LocomoTurn])
_date_text = msgspec.json.Decoder(str)


# ---------------------------------------------------------------------- values


def parse_ts(value: object, source: str, where: str) -> int:
    """Event time in µs from ISO-8601 text (naive means UTC) or epoch seconds, within the range the log accepts."""
    if isinstance(value, bool):
        raise IngestError(source, where, f"timestamp {value!r} is neither ISO-8601 text nor epoch seconds")
    if isinstance(value, (int, float)):
        if value != value or not -1e13 < value < 1e13:  # NaN, or far beyond any date
            raise IngestError(source, where, f"timestamp {value!r} is outside {iso(MIN_TS_US)} .. {iso(MAX_TS_US)}")
        ts_us = int(value * 1_000_000)
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise IngestError(source, where, f"timestamp {value!r:.60} is not ISO-8601") from None
        ts_us = to_us(ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc))
    else:
        raise IngestError(source, where, f"timestamp {value!r:.60} is neither ISO-8601 text nor epoch seconds")
    if not MIN_TS_US <= ts_us < MAX_TS_US:
        raise IngestError(source, where, f"timestamp {value!r:.60} is outside {iso(MIN_TS_US)} .. {iso(MAX_TS_US)}")
    return ts_us


def _text(content: str | list[ContentPart] | None) -> str:
    if isinstance(content, list):  # OpenAI content parts: the text ones
        return "\n".join(p.text for p in content if p.type == "text" and p.text)
    return content or ""


def _check_unicode(message: IncomingMessage, source: str, where: str) -> IncomingMessage:
    texts = [message.content, message.name or "", *message.metadata.keys(), *message.metadata.values()]
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise IngestError(source, where, "text that is not valid Unicode (a lone surrogate such as \\ud800)") from None
    return message


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


# ---------------------------------------------------------------------- decoding


_UNKNOWN = re.compile(r"Object contains unknown field `([^`]*)`")
_MISSING = re.compile(r"Object missing required field `([^`]*)`")
_AT = re.compile(r" - at `\$([^`]*)`$")
_BYTE = re.compile(r"\(byte (\d+)\)")
_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})|(?<![0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _decode(raw: bytes, type_: Any, source: str, where: str = "", keys: list[str] | None = None) -> Any:
    """`raw` decoded into `type_`, or an IngestError naming `where` (a line) plus the JSON path and the reason."""
    try:
        return msgspec.json.decode(raw, type=type_)
    except RecursionError:
        raise IngestError(source, where, "JSON nested too deeply") from None
    except msgspec.ValidationError as exc:
        text = str(exc)
        at = _AT.search(text)
        path = at.group(1) if at else ""
        reason = _AT.sub("", text)
        unknown, missing = _UNKNOWN.match(reason), _MISSING.match(reason)
        if unknown:
            reason = f"unknown key(s) [{unknown.group(1)!r}]" + (f"; a message has {keys}" if keys else "")
        elif missing:
            reason = f"missing {missing.group(1)!r}"
        elif reason.startswith("Expected `array`, got `object`") and not path and type_ is list[LocomoSample]:
            reason = "expected a list of LoCoMo samples"
        loc = ":".join(x for x in (where, path.lstrip(".")) if x)
        raise IngestError(source, loc, reason) from None
    except msgspec.DecodeError as exc:
        reason = _BYTE.sub("", str(exc)).strip()
        lone = _LONE_SURROGATE.search(raw)
        at_byte = _BYTE.search(str(exc))
        offset = lone.start() if lone is not None else int(at_byte.group(1)) if at_byte else None
        if lone is not None:
            reason = f"a lone surrogate escape {lone.group().decode()} is not valid Unicode"
        if offset is None:
            raise IngestError(source, where, reason) from None
        line, col = _line_col(raw, offset)
        raise IngestError(source, f"{where}:{col}" if where else f"{line}:{col}", reason) from None


def _line_col(raw: bytes, offset: int) -> tuple[int, int]:
    before = raw[:offset]
    return before.count(b"\n") + 1, offset - (before.rfind(b"\n") + 1) + 1


# ---------------------------------------------------------------------- formats


_OPENAI_KEYS = sorted(f.encode_name for f in msgspec.structs.fields(OpenAIMessage))
_JSONL_KEYS = sorted(f.encode_name for f in msgspec.structs.fields(JsonlMessage))


def parse_openai(raw: bytes, source: str, discussion: str | None, now_us: int) -> list[Conversation]:
    decoded = _decode(raw, Union[list[OpenAIMessage], OpenAIChat], source, keys=_OPENAI_KEYS)
    items = decoded.messages if isinstance(decoded, OpenAIChat) else decoded
    messages = []
    for i, item in enumerate(items):
        where = f"[{i}]"
        given = item.ts if item.ts is not None else item.timestamp
        message = IncomingMessage(
            role=item.role,
            content=_text(item.content),
            name=item.name,
            ts_us=parse_ts(given, source, where + ".ts") if given is not None else now_us + i,
            ts_given=given is not None,
        )
        messages.append(_check_unicode(message, source, where))
    return [Conversation(_resolve_discussion(_tag_id(messages, source), discussion, source), messages)]


def parse_jsonl(raw: bytes, source: str, discussion: str | None, now_us: int) -> list[Conversation]:
    by_discussion: dict[str | None, list[IncomingMessage]] = {}
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{lineno}"
        if not line.lstrip().startswith(b"{"):
            try:
                msgspec.json.decode(line)
            except (msgspec.DecodeError, RecursionError):
                pass
            else:
                raise IngestError(source, where, "each line must be a JSON object")
        item = _decode(line, JsonlMessage, source, where, keys=_JSONL_KEYS)
        given = item.ts if item.ts is not None else item.timestamp
        message_id = item.message_id if item.message_id is not None else item.id
        metadata = {k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in (item.metadata or {}).items()}
        message = IncomingMessage(
            role=item.role,
            content=_text(item.content),
            name=item.name,
            message_id=str(message_id) if message_id not in (None, "") else None,
            ts_us=parse_ts(given, source, where) if given is not None else now_us + lineno,
            ts_given=given is not None,
            metadata=metadata,
        )
        by_discussion.setdefault(item.discussion or item.discussion_id, []).append(_check_unicode(message, source, where))
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
        raise IngestError(source, where, f"session date {text!r:.60} is not like '1:56 pm on 8 May, 2023'")
    hour12, minute = int(m.group(1)), int(m.group(2))
    if not 1 <= hour12 <= 12 or minute > 59:
        raise IngestError(source, where, f"session date {text!r}: {hour12}:{minute:02d} is not a time of a 12-hour clock")
    hour = hour12 % 12 + (12 if m.group(3).lower() == "pm" else 0)
    try:
        ts = datetime(int(m.group(6)), month, int(m.group(4)), hour, minute, tzinfo=timezone.utc)
    except ValueError as exc:
        raise IngestError(source, where, f"session date {text!r} is not a date: {exc}") from None
    ts_us = to_us(ts)
    if not MIN_TS_US <= ts_us < MAX_TS_US:
        raise IngestError(source, where, f"session date {text!r} is outside {iso(MIN_TS_US)} .. {iso(MAX_TS_US)}")
    return ts_us


_SESSION = re.compile(r"session_(\d+)")


def parse_locomo(raw: bytes, source: str) -> list[Conversation]:
    samples = _decode(raw, Union[list[LocomoSample], LocomoSample], source)
    samples = samples if isinstance(samples, list) else [samples]
    out = []
    for si, sample in enumerate(samples):
        where = f"[{si}]"
        try:
            discussion = validate_discussion(str(sample.sample_id))
        except InvalidIdError as exc:
            raise IngestError(source, where + ".sample_id", str(exc)) from None
        conv = sample.conversation
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
        messages = []
        for n in numbers:
            swhere = f"{where}.conversation.session_{n}"
            raw_turns = bytes(conv[f"session_{n}"])
            if raw_turns.strip() in (b"null", b"[]"):
                continue
            turns = _decode(raw_turns, list[LocomoTurn], source, swhere)
            date_raw = conv.get(f"session_{n}_date_time")
            if date_raw is None:
                raise IngestError(source, swhere + "_date_time", "missing: a session needs its date")
            date_text = _decode(bytes(date_raw), str, source, swhere + "_date_time")
            ts_us = parse_locomo_date(date_text, source, swhere + "_date_time")
            for ti, turn in enumerate(turns):
                content = turn.text
                metadata = {"session": str(n)}
                if turn.blip_caption:
                    # The shared image is part of what was said; its caption is how a text memory sees it.
                    content = f"{content} [shares a photo: {turn.blip_caption}]"
                    metadata["blip_caption"] = turn.blip_caption
                message = IncomingMessage(role="user", content=content, name=turn.speaker, message_id=turn.dia_id,
                                          ts_us=ts_us, metadata=metadata)
                messages.append(_check_unicode(message, source, f"{swhere}[{ti}]"))
        out.append(Conversation(discussion, messages))
    return out


def detect_format(path: Path, raw: bytes) -> str:
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    try:
        head = msgspec.json.decode(raw, type=Union[list[msgspec.Raw], dict[str, msgspec.Raw]])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return "openai"  # the OpenAI parser reports what is wrong
    sample = head[0] if isinstance(head, list) and head else head
    if isinstance(sample, msgspec.Raw):
        try:
            sample = msgspec.json.decode(sample, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return "openai"
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
    """Every conversation in the file, fully validated; raises IngestError on the first problem.

    `now_us`: the event time given to messages that come without one (in file order)."""
    path = Path(path)
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IngestError(source, "", f"cannot read: {exc.strerror}") from None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(source, f"byte {exc.start}", "not UTF-8 text") from None
    kind = fmt or detect_format(path, raw)
    if kind == "jsonl":
        return parse_jsonl(raw, source, discussion, now_us)
    if kind == "locomo":
        if discussion:
            raise IngestError(source, "", "LoCoMo files name their discussions (sample_id); do not pass --discussion")
        return parse_locomo(raw, source)
    if kind == "openai":
        return parse_openai(raw, source, discussion, now_us)
    raise IngestError(source, "", f"unknown format {kind!r}; use openai, jsonl or locomo")
