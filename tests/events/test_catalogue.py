"""The event catalogue: stable explicit tags, frozen structs, a JSON codec that round-trips."""

import msgspec
import pytest

import engram.events  # noqa: F401  (registers the catalogue)
from engram.events import codec
from engram.events.base import index_by_tag, registry
from engram.events.messages import MessageAppended

REQUIRED_TAGS = {
    # messages
    "MessageAppended", "ToolCallFailed",
    # discussion memory
    "ChunkSummarized", "RollingSummaryUpdated", "VectorMemoryStored",
    # cognitive memory
    "ObservationsRecorded", "Reflected", "TraceEncoded", "TraceRetrieved", "TraceReinforced", "TracePruned",
    "EdgeAdded", "EdgeStrengthened", "SchemaCreated", "ConflictResolved", "WorkingMemoryUpdated",
    "WorkingMemoryWritten", "ContextCompacted", "FactsIngested", "LessonLearned", "MoodChanged",
    # control
    "SettingsChanged", "ClockTick", "GenerationStarted", "DiscussionForgotten", "AgentForgotten",
}


def test_catalogue_has_every_event_the_design_names():
    assert REQUIRED_TAGS <= set(registry())


def test_every_event_type_is_frozen_with_an_explicit_tag_equal_to_its_registry_key():
    for tag, cls in registry().items():
        assert cls.__struct_config__.frozen, tag
        assert cls.__struct_config__.tag == tag
        assert isinstance(cls.SCHEMA_VERSION, int) and cls.SCHEMA_VERSION >= 1


def test_events_cannot_be_mutated():
    ev = MessageAppended(role="user", content="hi", message_id="m1", token_estimate=1)
    with pytest.raises(AttributeError):
        ev.content = "changed"  # type: ignore[misc]


def test_payload_round_trips_through_the_codec():
    ev = MessageAppended(role="user", content="Grüße — 東京", message_id="m1", token_estimate=3, name="Ana",
                         metadata={"session": "1"})
    payload = codec.encode(ev)
    assert '"type":"MessageAppended"' in payload
    assert codec.decode("MessageAppended", 1, payload) == ev


def test_new_fields_need_defaults_so_old_payloads_still_decode():
    # A payload written before `name` and `metadata` existed decodes with their defaults.
    old = '{"type":"MessageAppended","role":"user","content":"x","message_id":"m","token_estimate":1}'
    ev = codec.decode("MessageAppended", 1, old)
    assert ev.name is None and ev.metadata == {}


def test_unknown_type_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown event type 'NoSuchEvent'"):
        codec.decode("NoSuchEvent", 1, "{}")


def test_payload_from_a_newer_engram_is_refused_not_misread():
    with pytest.raises(ValueError, match="newer than this engram knows"):
        codec.decode("MessageAppended", 99, "{}")


def test_duplicate_tags_are_rejected():
    # Probes are plain tagged structs, so the real catalogue stays untouched.
    class First(msgspec.Struct, tag="DuplicateProbe"):
        x: int = 0

    class Second(msgspec.Struct, tag="DuplicateProbe"):
        y: int = 0

    with pytest.raises(TypeError, match="'DuplicateProbe' used by both First and Second"):
        index_by_tag([First, Second])
