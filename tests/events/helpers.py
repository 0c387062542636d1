"""Small builders for tests of the log."""

from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended

T0 = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z in µs


def msg(i: int, content: str | None = None, role: str = "user") -> MessageAppended:
    text = content if content is not None else f"message number {i}"
    return MessageAppended(role=role, content=text, message_id=f"m{i}", token_estimate=len(text) // 4 + 1)


def write(stream: str, ids: range, *, agent: str = "a", with_ids: bool = True, expected: int | None = None, t0: int = T0) -> Write:
    return Write(
        stream=stream,
        agent=agent,
        events=tuple(
            NewEvent(event=msg(i), ts_us=t0 + i * 1_000_000, event_id=f"m{i}" if with_ids else None) for i in ids
        ),
        expected_version=expected,
    )
