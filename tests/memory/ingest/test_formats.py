"""Input formats: OpenAI chat JSON, JSONL of messages, LoCoMo JSON; malformed files fail whole."""

import json
from datetime import datetime, timezone

import pytest

from engram.events.envelope import to_us
from engram.memory.ingest.formats import IngestError, parse_file, parse_locomo_date
from engram.memory.ingest.messages import MessageRejected, discussion_write

NOW = 1_800_000_000_000_000


def test_openai_chat_takes_the_discussion_id_from_a_tag_and_strips_it(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([
        {"role": "system", "content": "You are helpful. [DiscussionId]trip-42[/DiscussionId]"},
        {"role": "user", "content": "Book Lisbon for May.", "name": "ana"},
        {"role": "assistant", "content": "Done."},
    ]))
    [conv] = parse_file(path, now_us=NOW)
    assert conv.discussion == "trip-42"
    write = discussion_write("default", conv.discussion, conv.messages, max_message_chars=1000)
    contents = [e.event.content for e in write.events]
    assert contents == ["You are helpful.", "Book Lisbon for May.", "Done."]
    assert [e.ts_us for e in write.events] == [NOW, NOW + 1, NOW + 2]
    assert write.events[1].event.name == "ana"


def test_a_message_that_is_only_a_tag_is_dropped(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": "[DiscussionId]d1[/DiscussionId]"},
        {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
    ]}))
    [conv] = parse_file(path, now_us=NOW)
    write = discussion_write("default", conv.discussion, conv.messages, max_message_chars=1000)
    assert [e.event.content for e in write.events] == ["Hello"]


def test_without_a_tag_the_discussion_comes_from_the_option(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    with pytest.raises(IngestError, match="no discussion id"):
        parse_file(path, now_us=NOW)
    assert parse_file(path, discussion="given", now_us=NOW)[0].discussion == "given"


def test_tag_and_option_that_disagree_are_an_error(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "[DiscussionId]a[/DiscussionId] hi"}]))
    with pytest.raises(IngestError, match="differs from the \\[DiscussionId\\] tag 'a'"):
        parse_file(path, discussion="b", now_us=NOW)


def test_jsonl_keeps_timestamps_names_and_ids(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"role": "user", "content": "hi", "ts": "2024-05-01T10:00:00Z", "name": "Ana", "message_id": "u1"}\n'
        '\n'
        '{"role": "assistant", "content": "hello", "ts": 1714557660}\n'
    )
    [conv] = parse_file(path, discussion="d", now_us=NOW)
    m1, m2 = conv.messages
    assert m1.ts_us == to_us(datetime(2024, 5, 1, 10, tzinfo=timezone.utc)) and m1.name == "Ana" and m1.message_id == "u1"
    assert m2.ts_us == 1714557660 * 1_000_000


@pytest.mark.parametrize(
    "lines, where, reason",
    [
        (['{"role": "user", "content": "ok"}', '{"role": "user", "content": '], ":2:", "Input data was truncated"),
        (['{"role": "user"}'], ":1:", "missing 'content'"),
        (['{"role": "user", "content": "x", "contnet": 1}'], ":1:", "unknown key"),
        (['{"role": "user", "content": "x", "ts": "yesterday"}'], ":1:", "not ISO-8601"),
        (['[1, 2]'], ":1:", "must be a JSON object"),
    ],
)
def test_malformed_jsonl_names_file_line_and_reason(tmp_path, lines, where, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(IngestError) as err:
        parse_file(path, discussion="d", now_us=NOW)
    assert str(path) + where in str(err.value) and reason in str(err.value)


def test_malformed_json_names_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[\n {"role": "user", "content": "a"},\n {"role": \n]')
    with pytest.raises(IngestError, match=rf"{path}:4:1: JSON is malformed: invalid character"):
        parse_file(path, discussion="d", now_us=NOW)


def test_unknown_roles_and_oversized_messages_are_rejected_by_name():
    from engram.memory.ingest.messages import IncomingMessage

    with pytest.raises(MessageRejected, match="message 1: role 'robot'"):
        discussion_write("a", "d", [IncomingMessage(role="robot", content="x", ts_us=NOW)], max_message_chars=10)
    big = IncomingMessage(role="user", content="y" * 11, ts_us=NOW, message_id="big-one")
    with pytest.raises(MessageRejected, match=r"message 1 \(big-one\): 11 characters, over the limit of 10"):
        discussion_write("a", "d", [big], max_message_chars=10)


def test_messages_without_ids_get_stable_derived_ids():
    from engram.memory.ingest.messages import IncomingMessage

    msgs = [IncomingMessage(role="user", content="same text", ts_us=NOW + i) for i in range(2)]
    w1 = discussion_write("a", "d", msgs, max_message_chars=100)
    w2 = discussion_write("a", "d", msgs, max_message_chars=100)
    ids = [e.event.message_id for e in w1.events]
    assert ids == [e.event.message_id for e in w2.events]  # re-ingest finds the same ids
    assert ids[0] != ids[1]  # the same words twice are two messages


def test_locomo_dates_parse():
    assert parse_locomo_date("1:56 pm on 8 May, 2023", "f", "w") == to_us(datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc))
    assert parse_locomo_date("12:05 am on 1 January, 2024", "f", "w") == to_us(datetime(2024, 1, 1, 0, 5, tzinfo=timezone.utc))
    with pytest.raises(IngestError, match="is not like"):
        parse_locomo_date("sometime in May", "f", "w")


def test_locomo_samples_become_discussions_with_dated_named_turns(tmp_path):
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look at this.", "blip_caption": "a photo of a lake",
                 "img_url": ["http://x"]},
            ],
            "session_2_date_time": "10:00 am on 9 May, 2023",
            "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "Back."}],
        },
        "qa": [], "observation": {"ignored": True},
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    [conv] = parse_file(path, now_us=NOW)
    assert conv.discussion == "conv-x"
    assert [m.message_id for m in conv.messages] == ["D1:1", "D1:2", "D2:1"]
    assert [m.name for m in conv.messages] == ["Caroline", "Melanie", "Caroline"]
    assert conv.messages[1].content == "Look at this. [shares a photo: a photo of a lake]"
    s1 = to_us(datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc))
    assert [m.ts_us for m in conv.messages] == [s1, s1, to_us(datetime(2023, 5, 9, 10, 0, tzinfo=timezone.utc))]
