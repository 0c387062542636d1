"""A home written by earlier code opens, replays identically and recalls the same memories (issue 26).

`tests/fixtures/home-before-layers.tar.gz` was written by `tests/fixtures/make_home_before_layers.py` on the code
from before engram's modules moved into layers; `home-before-layers.expected.json` is what that code saw in it.
Policy snapshots pickle classes by module path, and those paths changed: the snapshots must still restore (the
unpickler knows where each old module went), because rebuilding a policy from the log calls the LLM again for
every message that had facts extracted (measured on this home: 44 `extract_facts` calls for 45 messages), which
on a home that uses a paid endpoint costs money and time.
"""

from __future__ import annotations

import collections
import json
import tarfile
from pathlib import Path

import pytest

from engram import Engram
from tests.fixtures.make_home_before_layers import (
    EXPECTED, TARBALL, hnsw_vectors, log_summary, projection_digest, recall_answers,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


class CountingTasksStandIn:
    """A stand-in around the home's real memory tasks (here the offline provider): it counts every call of a task
    (which would be an LLM request on a home with an endpoint) and passes it on unchanged."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def call(*args, **kwargs):
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def old_home(tmp_path) -> Path:
    with tarfile.open(FIXTURES / TARBALL) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "home"


ADDED_COLUMNS = {"memory_traces": ("valid_from", "valid_to", "superseded_by", "metadata", "context_message_ids")}
# observation_notes became `NoteEntry`'s table (ObservationLogProjection v5): the same columns, the note's in the
# event's order; compared in the order the fixture's table had them.
NOTES_BEFORE = ("agent", "scope", "scope_id", "stream", "note_id", "type", "text", "details", "importance", "confidence",
                "observed_at", "refers_to", "entities", "source_seqs", "source_message_ids", "tokens", "buffered",
                "status", "recorded_seq", "increment_last_seq", "activated_seq", "reflected_seq")
# discussion_memories and discussion_summaries became their lines' tables (DiscussionFiles v2) the same way.
REORDERED = {
    "observation_notes": NOTES_BEFORE,
    "discussion_memories": ("discussion_id", "agent", "generation", "ordinal", "memory_id", "created_seq", "first_seq",
                            "last_seq", "message_count", "token_count", "summary", "line"),
    "discussion_summaries": ("discussion_id", "agent", "generation", "updated_seq", "absorbed_through",
                             "memories_absorbed", "summary", "line"),
}


def test_a_home_written_before_the_layers_opens_replays_identically_and_recalls_the_same(old_home, tmp_path):
    expected = json.loads((FIXTURES / EXPECTED).read_text())
    with Engram.open(old_home, runtime="inprocess", auto_settle=False) as mem:
        tasks = mem.rt.services["tasks"] = CountingTasksStandIn(mem.rt.services["tasks"])
        assert mem.wait_idle(600)

        # Opening appends nothing: every policy restored its snapshot, none went back to the log (and the LLM).
        assert log_summary(mem) == {"heads": expected["heads"], "events_by_type": expected["events_by_type"]}
        [shard] = mem.status().shards
        assert shard.consumers_rebuilt == {}
        assert dict(tasks.calls) == {}

        assert mem.rt.verify_replay([0]) == []
        mem.rt.replay_into([0], str(tmp_path / "replayed"), None, None)
        answers = recall_answers(mem)
        # The same memories, in the same order. Scores follow today's ranking rules (issue 24 changed the weights of
        # dormant traces and questions, docs/recall.md), so they are not compared with the old code's.
        assert [[h["trace_id"] for h in a["hits"]] for a in answers] == [
            [h["trace_id"] for h in e["hits"]] for e in expected["recalls"]]
        assert [[h["context_message_ids"] for h in a["hits"]] for a in answers] == [
            [h["context_message_ids"] for h in e["hits"]] for e in expected["recalls"]]

    # Since the fixture, `memory_traces` gained columns (TraceProjection v4 -> v6: issue 24 added validity, the memory
    # edits `metadata`, issue 26 `context_message_ids`): its other columns are compared, the old home's table was
    # folded again with them, and `projection_versions` says so.
    wanted = _without_versions(expected["projections"])
    assert _without_versions(projection_digest(tmp_path / "replayed", ADDED_COLUMNS, REORDERED)) == wanted
    assert _without_versions(projection_digest(old_home / "projections", ADDED_COLUMNS, REORDERED)) == wanted
    # The index files hold the fixture's vectors: its digest covers their ids, these differ between CPUs in the last
    # bits numpy's SIMD norms round.
    with tarfile.open(FIXTURES / TARBALL) as tar:
        tar.extractall(tmp_path / "fixture", filter="data")
    index = Path("agents/priya-bot/traces.hnsw")
    written = hnsw_vectors(tmp_path / "fixture" / "home" / "projections" / index)[2]
    for projections in (tmp_path / "replayed", old_home / "projections"):
        assert abs(hnsw_vectors(projections / index)[2] - written).max() < 1e-6
    versions = _versions(old_home / "projections" / "shard-000.duckdb")
    # discussion_files 3, vector_memory, discussions and context-compactions 2: rows keyed by (agent, discussion_id)
    # observations 6: a note of an edited or removed message is superseded (`superseded_by`, a column added)
    assert versions["traces"] == 6 and versions["observations"] == 6 and versions["discussion_files"] == 3
    assert versions["vector_memory"] == 2 and versions["discussions"] == 2
    assert set(_columns(old_home / "projections" / "shard-000.duckdb", "observation_notes")) == {*NOTES_BEFORE, "superseded_by"}


def _columns(db: Path, table: str) -> list[str]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
    finally:
        con.close()

    # Its log was migrated to discussion ids per agent on open (schema 2): another agent has a discussion of the
    # old agent's id now, beside it, and the old one keeps its messages.
    from engram.api import types as t

    with Engram.open(old_home, runtime="inprocess", auto_settle=False) as mem:
        assert mem.rt.shard_host(0).store.schema_version() == 2
        mem.append_messages("other-bot", "acme-dashboard", t.AppendRequest(messages=[
            t.Message(role="user", content="A different dashboard, for another team.")]))
        mem.wait_idle(600)
        _, rows = mem.sql_rows("SELECT agent, count(*) FROM messages WHERE discussion_id = 'acme-dashboard' "
                               "GROUP BY agent ORDER BY agent")
        assert rows == [("other-bot", 1), ("priya-bot", expected["events_by_type"]["MessageAppended"])]


def _without_versions(digest: dict) -> dict:
    return {**digest, "tables": {k: v for k, v in digest["tables"].items() if not k.endswith(":projection_versions")}}


def _versions(db: Path) -> dict[str, int]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT projection, version FROM projection_versions").fetchall())
    finally:
        con.close()
