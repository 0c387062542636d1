"""The observation log as a projection: the guide's format, every note kept with its status, forgetting,
restart from the tables."""

from __future__ import annotations

import duckdb

from engram.config.home import ProjectionPaths
from engram.events.background import ObservationNote, ObservationsActivated, ObservationsRecorded, Reflected
from engram.events.cognitive import TraceEncoded
from engram.events.control import DiscussionForgotten
from engram.events.envelope import Recorded
from engram.events.provenance import LlmCall
from engram.projections.base import ProjectionContext
from engram.projections.observations import ObservationLogProjection

T0 = 1_773_569_280 * 1_000_000  # 2026-03-15 10:08 UTC
MINUTE_US = 60 * 1_000_000
LLM = LlmCall(provider="offline", model="offline-heuristic-v1", task="observe", prompt_hash="x")

EXPECTED = """\
# Observation log: discussion acme (agent a)

_As of seq 4: 3 messages (90 tokens) observed into 3 notes (53 tokens, 1.7x compression); 2 active, 1 buffered (not yet active), 0 reflected._

## Observations

Date: 2026-03-15
- 10:08 (commitment, importance 0.80) User is building a Next.js app with Supabase auth, due in 1 week
  - App uses server components with client-side hydration
  - refers to 2026-03-22
  - entities: Next.js, Supabase
- 10:12 (preference, importance 0.50) User wants the app called "Acme Dashboard"
"""


def note(i: int, text: str, kind: str, minutes: int, **kw) -> ObservationNote:
    return ObservationNote(note_id=f"n{i}", type=kind, text=text, importance=kw.pop("importance", 0.5),
                           observed_us=T0 + minutes * MINUTE_US, source_seqs=(i,), source_message_ids=(f"m{i}",), **kw)


NOTES = [
    note(1, "User is building a Next.js app with Supabase auth, due in 1 week", "commitment", 0, importance=0.8,
         details=("App uses server components with client-side hydration",), refers_to="2026-03-22",
         entities=("Next.js", "Supabase")),
    note(2, 'User wants the app called "Acme Dashboard"', "preference", 4),
    note(3, "User asked about middleware for protected routes", "factual", 9),
]


def rec(seq: int, event, stream: str = "acme", ts: int = T0) -> Recorded:
    return Recorded(seq=seq, stream=stream, stream_version=seq, agent="a", ts_us=ts, event=event)


def recorded(seq: int, notes, first: int, last: int, buffered: bool = True, stream: str = "acme") -> Recorded:
    return rec(seq, ObservationsRecorded(notes=tuple(notes), first_seq=first, last_seq=last, input_tokens=30 * len(notes),
                                         output_tokens=1, buffered=buffered, llm=LLM, scope="discussion", scope_id=stream,
                                         messages=len(notes)), stream=stream)


def project(tmp_path, events, name="live") -> tuple[ObservationLogProjection, ProjectionPaths, duckdb.DuckDBPyConnection]:
    paths = ProjectionPaths(tmp_path / name)
    paths.root.mkdir(parents=True, exist_ok=True)
    db = duckdb.connect(str(paths.shard_db(0)))
    proj = ObservationLogProjection(ProjectionContext(shard=0, paths=paths, db=db))
    if events:
        proj.apply_batch(events)
        proj.checkpoint()
    return proj, paths, db


def log_path(paths: ProjectionPaths, discussion: str = "acme"):
    return paths.discussion_file("a", discussion, "_observations.md")


def test_the_log_renders_as_the_guide_shows_it_with_only_activated_notes(tmp_path):
    events = [recorded(1, NOTES[:2], 1, 2), recorded(2, NOTES[2:], 3, 3),
              rec(4, ObservationsActivated(through_seq=2, scope="discussion", scope_id="acme", threshold=30_000))]
    _, paths, db = project(tmp_path, events)
    assert log_path(paths).read_text() == EXPECTED
    statuses = db.execute("SELECT note_id, status, activated_seq FROM observation_notes ORDER BY note_id").fetchall()
    assert statuses == [("n1", "active", 4), ("n2", "active", 4), ("n3", "buffered", None)]


def reflected(seq: int) -> list[Recorded]:
    trace = TraceEncoded(trace_id="t1", content="User builds the Acme Dashboard (Next.js, Supabase), due 2026-03-22",
                         trace_type="prospective", scope="agent", scope_id="a", source_type="reflection",
                         source_seqs=(1, 2), importance=0.8, confidence=0.7, strength=0.5, stability_s=3600.0,
                         interval_s=3600.0)
    return [rec(seq, Reflected(consumed_note_ids=("n1", "n2"), trace_ids=("t1",), superseded=("n2",), input_tokens=30,
                               output_tokens=15, llm=LLM, scope="discussion", scope_id="acme", threshold=40_000,
                               trace_note_ids=(("n1", "n2"),))),
            rec(seq + 1, trace)]


def test_reflected_notes_stay_in_the_table_marked_and_the_log_shows_their_trace(tmp_path):
    events = [recorded(1, NOTES[:2], 1, 2, buffered=False)] + reflected(2)
    _, paths, db = project(tmp_path, events)
    assert db.execute("SELECT note_id, status, reflected_seq FROM observation_notes ORDER BY note_id").fetchall() == [
        ("n1", "reflected", 2), ("n2", "superseded", 2)]
    text = log_path(paths).read_text()
    assert "## Reflections (long-term traces)\n\nDate: 2026-03-15\n- (prospective, from 2 notes) User builds the Acme" in text
    assert "## Observations\n\n(none active yet)" in text
    ((compression, reflections),) = db.execute(
        "SELECT reflection_compression, reflections FROM observation_logs").fetchall()
    assert (compression, reflections) == (2.0, 1)


def test_forgetting_a_discussion_removes_its_log(tmp_path):
    events = [recorded(1, NOTES[:2], 1, 2, buffered=False), recorded(2, NOTES[2:], 3, 3, buffered=False, stream="other")]
    proj, paths, db = project(tmp_path, events)
    assert log_path(paths).exists() and log_path(paths, "other").exists()
    proj.apply_batch([rec(3, DiscussionForgotten(discussion_id="acme"), stream="agent:a")])
    proj.checkpoint()
    assert not log_path(paths).exists() and log_path(paths, "other").exists()
    assert db.execute("SELECT DISTINCT scope_id FROM observation_notes").fetchall() == [("other",)]


def test_a_restarted_projection_writes_what_a_single_pass_writes(tmp_path):
    events = [recorded(1, NOTES[:2], 1, 2), recorded(2, NOTES[2:], 3, 3),
              rec(4, ObservationsActivated(through_seq=3, scope="discussion", scope_id="acme", threshold=30_000))]
    events += reflected(5)
    _, once, _ = project(tmp_path, events, "once")
    first, paths, db = project(tmp_path, events[:3], "restarted")
    db.close()
    db = duckdb.connect(str(paths.shard_db(0)))
    again = ObservationLogProjection(ProjectionContext(shard=0, paths=paths, db=db))
    assert again.position == 4
    again.apply_batch(events[3:])
    again.checkpoint()
    assert log_path(paths).read_text() == log_path(once).read_text()


def test_a_restatement_is_shown_as_the_trace_it_verified_and_survives_a_restart(tmp_path):
    restating = rec(2, Reflected(consumed_note_ids=("n3",), trace_ids=(), superseded=(), input_tokens=10,
                                 output_tokens=0, llm=LLM, scope="discussion", scope_id="acme", threshold=40_000,
                                 duplicates=("t-auto",), duplicate_note_ids=(("n3",),)))
    _, paths, db = project(tmp_path, [recorded(1, NOTES[2:], 3, 3, buffered=False), restating])
    text = log_path(paths).read_text()
    assert "- (already remembered: t-auto verified, by 1 note) User asked about middleware for protected routes" in text
    assert db.execute("SELECT restated_trace_ids, restated_note_ids FROM reflections").fetchall() == [(["t-auto"], ["n3"])]
    db.close()
    db = duckdb.connect(str(paths.shard_db(0)))
    again = ObservationLogProjection(ProjectionContext(shard=0, paths=paths, db=db))
    again.apply_batch([rec(3, DiscussionForgotten(discussion_id="other"), stream="agent:a")])
    (log,) = again.book.logs.values()
    assert log.reflections[0].duplicate_note_ids == (("n3",),)  # restored from the table


def test_each_log_says_how_far_it_is_from_the_observer_and_reflector_thresholds():
    """Issue 12, finding 7: at the guide's thresholds a LoCoMo-sized chat never activates, and nothing said so."""
    from engram.memory.background.observation_log import ObservationLog
    from engram.config.agent import AgentConfig
    from engram.events.messages import MessageAppended
    from engram.providers.llm.offline.respond import QUOTING
    from engram.config.recorded import SCOPE_AGENT
    from engram.memory.settings import settings_event

    book = ObservationLog()
    cfg = AgentConfig.model_validate({"memory": {"observer": {"activationTokens": 1_000}}})
    book.apply(Recorded(seq=1, stream="agent:a", stream_version=1, agent="a", ts_us=T0,
                        event=settings_event(SCOPE_AGENT, "agent.config.json", cfg)))
    for seq, (role, text, tokens) in enumerate([("user", "hello there", 300), ("assistant", "my own reply", 200),
                                                ("assistant", f"{QUOTING}\n- a quoted memory", 500)], 2):
        book.apply(Recorded(seq=seq, stream="d", stream_version=seq, agent="a", ts_us=T0, event=MessageAppended(
            role=role, content=text, message_id=f"m{seq}", token_estimate=tokens)))
    p = book.logs[("a", "discussion", "d")].progress()
    # The offline responder's quote of memory is not conversation the Observer watches (provenance).
    assert (p.unobserved_tokens, p.observer_threshold, p.tokens_to_observer) == (500, 1_000, 501)
    assert (p.active_tokens, p.reflector_threshold, p.tokens_to_reflector) == (0, 40_000, 40_001)
    book.apply(Recorded(seq=9, stream="d", stream_version=9, agent="a", ts_us=T0, event=ObservationsRecorded(
        notes=(note(1, "User said hello", "factual", 1),), first_seq=2, last_seq=3, input_tokens=500, output_tokens=4,
        buffered=False, llm=LLM, scope="discussion", scope_id="d", messages=2)))
    p = book.logs[("a", "discussion", "d")].progress()
    assert p.unobserved_tokens == 0 and p.tokens_to_observer == 1_001 and p.active_tokens > 0


# observation_notes as ObservationLogProjection v4 had it, hand-written (before `NoteEntry` was its declaration).
NOTES_V4 = ("agent", "scope", "scope_id", "stream", "note_id", "type", "text", "details", "importance", "confidence",
            "observed_at", "refers_to", "entities", "source_seqs", "source_message_ids", "tokens", "buffered", "status",
            "recorded_seq", "increment_last_seq", "activated_seq", "reflected_seq")


def test_the_notes_table_is_its_declaration_and_an_old_homes_v4_table_is_folded_again_with_the_same_rows(tmp_path):
    from engram.kernel import records
    from engram.memory.background.observation_log import NoteEntry
    from engram.projections.observations import NOTES_DDL

    assert NOTES_DDL == records.ddl("observation_notes", NoteEntry, before=[("agent", "VARCHAR"), ("scope", "VARCHAR"),
                                                                            ("scope_id", "VARCHAR")])
    events = [recorded(1, NOTES[:2], 1, 2), recorded(2, NOTES[2:], 3, 3),
              rec(4, ObservationsActivated(through_seq=2, scope="discussion", scope_id="acme", threshold=30_000))]
    events += reflected(5)
    _, paths, db = project(tmp_path, events)
    wanted = db.execute(f"SELECT {', '.join(NOTES_V4)} FROM observation_notes ORDER BY note_id").fetchall()
    assert len(wanted) == 3 and {c[0] for c in db.execute("DESCRIBE observation_notes").fetchall()} == {*NOTES_V4, "superseded_by"}
    # the home as v4 left it: the old column order, version 4
    db.execute(f"CREATE TABLE v4 AS SELECT {', '.join(NOTES_V4)} FROM observation_notes")
    db.execute("DROP TABLE observation_notes")
    db.execute("ALTER TABLE v4 RENAME TO observation_notes")
    db.execute("UPDATE projection_versions SET version = 4 WHERE projection = 'observations'")
    db.close()
    db = duckdb.connect(str(paths.shard_db(0)))
    upgraded = ObservationLogProjection(ProjectionContext(shard=0, paths=paths, db=db))
    assert upgraded.position == 0  # the v4 tables are dropped: the runner folds the log again
    upgraded.apply_batch(events)
    upgraded.checkpoint()
    assert db.execute(f"SELECT {', '.join(NOTES_V4)} FROM observation_notes ORDER BY note_id").fetchall() == wanted
    # a restart reads each note back by column name into the record it was written from
    db.close()
    db = duckdb.connect(str(paths.shard_db(0)))
    again = ObservationLogProjection(ProjectionContext(shard=0, paths=paths, db=db))
    assert again.book.logs == upgraded.book.logs


def test_the_reflectors_snapshot_shape_of_a_note_is_unchanged_or_its_state_version_is_bumped():
    """The Reflector pickles its observation log, notes included: a note whose attributes change must bump
    `Reflector.STATE_VERSION` (its old snapshots then rebuild from the log instead of restoring a wrong shape)."""
    import dataclasses

    from engram.memory.background.observation_log import NoteEntry
    from engram.policies.reflector import Reflector

    shape = {f.name for f in dataclasses.fields(NoteEntry)}
    assert (shape, Reflector.STATE_VERSION) == ({"note", "stream", "recorded_seq", "increment_last_seq", "buffered",
                                                  "status", "tokens", "activated_seq", "reflected_seq",
                                                  "superseded_by"}, 1)
    # `superseded_by` came with a default: a note pickled before it reads it from the class (nothing superseded it).
    old = NoteEntry(stream="acme", note=NOTES[0], tokens=1, buffered=False, status="active", recorded_seq=1,
                    increment_last_seq=1)
    del old.__dict__["superseded_by"]
    import pickle

    assert pickle.loads(pickle.dumps(old)).superseded_by == ""


def test_notes_and_reflections_of_an_edited_or_removed_message_are_superseded_even_notes_recorded_after(tmp_path):
    from engram.events.messages import MessageEdited, MessageRemoved

    late = note(4, "User asked about middleware for protected routes", "factual", 12)
    late = ObservationNote(**{**{f: getattr(late, f) for f in late.__struct_fields__}, "note_id": "n4",
                              "source_message_ids": ("m3",)})
    events = [recorded(1, NOTES[:2], 1, 2, buffered=False)] + reflected(2)
    events += [recorded(4, NOTES[2:], 3, 3, buffered=False),
               rec(5, MessageEdited(message_id="m3", role="user", content="User asked about caching", token_estimate=5)),
               rec(6, MessageRemoved(message_id="m1")),
               rec(7, MessageRemoved(message_id="m1"), stream="other"),  # another discussion's m1
               recorded(8, [late], 3, 3, buffered=False)]  # observed in the old words, recorded after the edit
    _, paths, db = project(tmp_path, events)
    assert db.execute("SELECT note_id, status, superseded_by FROM observation_notes ORDER BY note_id").fetchall() == [
        ("n1", "superseded", "removal of message m1"), ("n2", "superseded", ""),  # n2 lost a contradiction
        ("n3", "superseded", "edit of message m3"), ("n4", "superseded", "edit of message m3")]
    text = log_path(paths).read_text()
    assert "- (prospective, from 2 notes; superseded: removal of message m1) User builds the Acme" in text
    assert "3 superseded by edits of their messages._" in text
    assert "## Observations\n\n(none active yet)" in text
    ((active_tokens,),) = db.execute("SELECT active_tokens FROM observation_logs WHERE scope_id = 'acme'").fetchall()
    assert active_tokens == 0  # nothing of the old words is left for the Reflector to condense
    # A restart half-way writes what one pass writes.
    _, restarted, db2 = project(tmp_path, events[:4], "restarted")
    db2.close()
    db2 = duckdb.connect(str(restarted.shard_db(0)))
    again = ObservationLogProjection(ProjectionContext(shard=0, paths=restarted, db=db2))
    again.apply_batch(events[4:])
    again.checkpoint()
    assert log_path(restarted).read_text() == text


def test_a_reflection_trace_of_a_removed_message_is_superseded_at_the_removal():
    from engram.events.messages import MessageRemoved
    from engram.memory.cognitive.book import TraceBook

    book = TraceBook("a")
    trace = TraceEncoded(trace_id="t1", content="User builds the Acme Dashboard", trace_type="semantic", scope="discussion",
                         scope_id="acme", source_type="reflection", source_seqs=(1, 2), source_message_ids=("m1", "m2"),
                         importance=0.8, confidence=0.7, strength=0.5, stability_s=3600.0, interval_s=3600.0)
    book.apply(rec(3, trace))
    book.apply(rec(4, MessageRemoved(message_id="m2"), ts=T0 + MINUTE_US))
    t = book.get("t1")
    assert (t.active, t.valid_to_us, t.superseded_by) == (False, T0 + MINUTE_US, "removal of message m2")


def test_runs_of_messages_fold_as_each_message_alone_would(tmp_path):
    """The projection folds a batch's runs of messages a run at a time (`ObservationLog.messages`): the same rows and
    files as folding the events one by one, across settings changes, an agent whose Observer is off, and a forget."""
    from engram.config.agent import AgentConfig
    from engram.config.recorded import SCOPE_AGENT
    from engram.events.messages import MessageAppended
    from engram.memory.settings import settings_event
    from engram.providers.llm.offline.respond import QUOTING

    def settings(seq, agent, memory):
        return Recorded(seq=seq, stream=f"agent:{agent}", stream_version=seq, agent=agent, ts_us=T0, event=settings_event(
            SCOPE_AGENT, "agent.config.json", AgentConfig.model_validate({"memory": memory})))

    said = [("user", "hello there"), ("assistant", "my own reply"), ("assistant", f"{QUOTING}\n- a quoted memory"),
            ("system", "be brief"), ("user", "  "), ("tool", "42")]
    events, seq = [], 0
    for part in range(3):
        for i in range(12):
            seq += 1
            role, text = said[(i + part) % len(said)]
            agent = "b" if i % 4 == 3 else "a"
            events.append(Recorded(seq=seq, stream=f"d{i % 3}", stream_version=seq, agent=agent, ts_us=T0 + seq,
                                   event=MessageAppended(role=role, content=text, message_id=f"m{seq}", token_estimate=seq)))
        seq += 1
        events.append([settings(seq, "a", {"observer": {"scope": "agent", "activationTokens": 1_000}}),
                       settings(seq, "b", {"observer": {"enabled": False}}),
                       rec(seq, DiscussionForgotten(discussion_id="d1"), stream="agent:a")][part])
    batched, _, db1 = project(tmp_path, events, "batched")
    alone, _, db2 = project(tmp_path, [], "alone")
    for e in events:
        alone.apply_batch([e])
    alone.checkpoint()
    rows = "SELECT * FROM observation_logs ORDER BY ALL"
    assert db1.execute(rows).fetchall() == db2.execute(rows).fetchall()
    assert len(db1.execute(rows).fetchall()) == 5  # a's d0 d2 (d1 forgotten), a's agent-wide log, b's d1 d2
    assert batched._as_of == alone._as_of and batched._dirty == alone._dirty == set()
