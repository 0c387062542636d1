"""Messages without ids get ids from what they are, not from where they are in the file."""

import json

import pytest

from engram.events.store import EventStore
from engram.memory.ingest.formats import parse_file
from engram.memory.ingest.messages import discussion_write

NOW = 1_714_557_600_000_000


@pytest.fixture
def store(tmp_path):
    s = EventStore(tmp_path / "log.duckdb")
    yield s
    s.close()


def _ingest(store: EventStore, path, now_us: int) -> tuple[int, int]:
    """(new, already recorded), as `engram ingest` reports them."""
    [conv] = parse_file(path, discussion="trip", now_us=now_us)
    result = store.append_many([discussion_write("a", conv.discussion, conv.messages, max_message_chars=10_000)])[0]
    return len(result.seqs) - result.duplicates, result.duplicates


def _write_lines(path, texts: list[str]) -> None:
    path.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in texts))


def _stored(store: EventStore) -> list[str]:
    return [r[0] for r in store.query("SELECT payload->>'$.content' FROM events ORDER BY seq")[1]]


def test_reingesting_a_file_with_a_prepended_line_adds_only_that_line(store, tmp_path):
    path = tmp_path / "chat.jsonl"
    texts = [f"line {i}" for i in range(45)]
    _write_lines(path, texts)
    assert _ingest(store, path, NOW) == (45, 0)
    _write_lines(path, ["a new first line"] + texts)
    assert _ingest(store, path, NOW + 60_000_000) == (1, 45)  # an hour later: arrival times differ, ids do not
    assert len(_stored(store)) == 46


def test_reingesting_a_file_with_a_removed_or_edited_line_adds_only_the_edit(store, tmp_path):
    path = tmp_path / "chat.jsonl"
    texts = [f"line {i}" for i in range(10)]
    _write_lines(path, texts)
    _ingest(store, path, NOW)
    _write_lines(path, texts[:3] + texts[4:])  # line 3 removed
    assert _ingest(store, path, NOW + 1) == (0, 9)
    _write_lines(path, texts[:5] + ["line 5, corrected"] + texts[6:])
    assert _ingest(store, path, NOW + 2) == (1, 9)
    assert _stored(store)[-1] == "line 5, corrected"


def test_the_same_words_said_twice_are_two_messages_and_stay_two(store, tmp_path):
    path = tmp_path / "chat.jsonl"
    _write_lines(path, ["ok", "sure?", "ok"])
    assert _ingest(store, path, NOW) == (3, 0)
    _write_lines(path, ["hello", "ok", "sure?", "ok"])
    assert _ingest(store, path, NOW + 1) == (1, 3)
    assert _stored(store) == ["ok", "sure?", "ok", "hello"]


def test_the_same_words_at_two_dated_moments_are_two_messages(store, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": "ok", "ts": "2024-05-01T10:00:00Z"}) + "\n"
        + json.dumps({"role": "user", "content": "ok", "ts": "2024-05-02T10:00:00Z"}) + "\n"
    )
    assert _ingest(store, path, NOW) == (2, 0)
    assert _ingest(store, path, NOW + 5) == (0, 2)
