"""Working memory in SQL and on disk.

- table `working_memory`: each agent's slots now (rank, trace, activation, prompt tag), the fold of
  `WorkingMemoryUpdated` (their history is the view `ev_working_memory_updated`);
- file `agents/<agent>/working-memory.md`: the slots in focus, the agent's persistent markdown
  notes (`WorkingMemoryWritten`, a template until the first write), and its key memories (its most
  important agent-wide traces) while they fit — the whole file within 5% of the context window.
- tables `working_memory_state` and `working_memory_keys`: what the file is rendered from besides the
  slots (notes, budget, the event it reflects; the key traces), so that a restart resumes where it stopped.
"""

from __future__ import annotations

from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.config.agent import AgentConfig
from engram.config.recorded import SCOPE_AGENT
from engram.events import cognitive as ev
from engram.events.control import AgentForgotten, SettingsChanged
from engram.events.envelope import Recorded, iso
from engram.kernel import records
from engram.kernel.files import atomic_write
from engram.memory.cognitive.book import INTERESTS as TRACE_EVENTS, TraceBook
from engram.memory.cognitive.ingest import NAME_TAG
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.working_memory import (
    DEFAULT_NOTES,
    FocusedSlot,
    budget_tokens,
    render_file,
    tag,
    with_profile_name,
)
from engram.memory.settings import SettingsView
from engram.projections.base import TableProjection

# Categories of the traces listed under "Key Memories": what holds beyond one conversation.
KEY_CATEGORIES = frozenset({"user_preference", "goal", "knowledge", "correction", "lesson"})
KEY_MEMORIES = 20
DEFAULT_BUDGET = budget_tokens(AgentConfig().memory.infinite_context.context_window_tokens)

_TS = pa.timestamp("us", tz="UTC")
_STATE = pa.schema(
    [
        ("agent", pa.string()), ("notes", pa.string()), ("turn", pa.int64()), ("capacity", pa.int64()),
        ("slots_seq", pa.int64()), ("as_of_seq", pa.int64()), ("as_of", _TS), ("budget_tokens", pa.int64()),
    ]
)
_KEYS = pa.schema(
    [
        ("agent", pa.string()), ("trace_id", pa.string()), ("stream", pa.string()), ("category", pa.string()),
        ("content", pa.string()), ("importance", pa.float64()), ("retrieval_count", pa.int64()),
        ("encoded_at", _TS), ("active", pa.bool_()),
    ]
)


class _AgentState:
    def __init__(self, agent: str):
        self.book = TraceBook(agent, track=True)  # the key traces only
        self.slots: tuple[ev.Slot, ...] = ()
        self.turn = 0
        self.capacity = 0
        self.slots_seq = 0
        self.notes = DEFAULT_NOTES
        self.template = True  # the notes are still the starting template (nobody wrote them)
        self.as_of_seq = 0
        self.as_of_us = 0
        self.budget = DEFAULT_BUDGET


def _insert(db: duckdb.DuckDBPyConnection, table: str, schema: pa.Schema, rows: list[tuple]) -> None:
    if not rows:
        return
    records.insert_arrow(db, table, pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(zip(*rows), schema)],
                                                       schema=schema))


class WorkingMemoryProjection(TableProjection):
    name = "working-memory"
    # 2: its key traces fold reinforcement with the spacing effect (engram.memory.cognitive.decay.reinforce), and the
    # profile's Name comes from the user's stated name: refold.
    version = 2
    tables: ClassVar[tuple[str, ...]] = ("working_memory", "working_memory_state", "working_memory_keys")
    interests = frozenset({"WorkingMemoryUpdated", "WorkingMemoryWritten", "SettingsChanged"}) | TRACE_EVENTS

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(records.ddl("working_memory", FocusedSlot, "PRIMARY KEY (agent, rank)"))
        db.execute(
            "CREATE TABLE IF NOT EXISTS working_memory_state (agent VARCHAR PRIMARY KEY, notes VARCHAR, turn BIGINT, "
            "capacity BIGINT, slots_seq BIGINT, as_of_seq BIGINT, as_of TIMESTAMPTZ, budget_tokens BIGINT)"
        )
        db.execute(
            "CREATE TABLE IF NOT EXISTS working_memory_keys (agent VARCHAR, trace_id VARCHAR, stream VARCHAR, "
            "category VARCHAR, content VARCHAR, importance DOUBLE, retrieval_count BIGINT, encoded_at TIMESTAMPTZ, "
            "active BOOLEAN, PRIMARY KEY (agent, trace_id))"
        )
        self.agents: dict[str, _AgentState] = {}
        self._dirty_slots: set[str] = set()
        self._dirty: set[str] = set()
        self._forgotten: set[str] = set()

    def _state(self, agent: str) -> _AgentState:
        st = self.agents.get(agent)
        if st is None:
            st = self.agents[agent] = _AgentState(agent)
        return st

    def apply(self, rec: Recorded) -> None:
        e = rec.event
        if isinstance(e, SettingsChanged):
            if e.scope != SCOPE_AGENT or not rec.stream.startswith("agent:"):
                return
            view = SettingsView()
            view.apply(rec)
            budget = budget_tokens(view.agent_config(rec.agent).memory.infinite_context.context_window_tokens)
            self._state(rec.agent).budget = budget
        elif isinstance(e, AgentForgotten):
            if e.agent_id == rec.agent:
                self.agents.pop(rec.agent, None)
                self._forgotten.add(rec.agent)
                self._dirty_slots.discard(rec.agent)
                self._dirty.discard(rec.agent)
            return
        elif isinstance(e, ev.WorkingMemoryUpdated):
            st = self._state(rec.agent)
            st.slots, st.turn, st.capacity, st.slots_seq = tuple(e.slots), e.turn, e.capacity, rec.seq
            self._dirty_slots.add(rec.agent)
        elif isinstance(e, ev.WorkingMemoryWritten):
            st = self._state(rec.agent)
            st.notes, st.template = e.markdown, False
        elif isinstance(e, ev.TraceEncoded) and self._profile_name(rec, e):
            pass
        elif isinstance(e, ev.TraceEncoded) and e.category not in KEY_CATEGORIES:
            pass  # not a key memory; the file still says which event it reflects
        else:
            self._state(rec.agent).book.apply(rec)
        st = self._state(rec.agent)
        st.as_of_seq, st.as_of_us = rec.seq, rec.ts_us
        self._dirty.add(rec.agent)
        self._forgotten.discard(rec.agent)

    def _profile_name(self, rec, e) -> bool:
        """A trace of the user stating their name fills the template's profile (never notes someone wrote)."""
        name = next((t[len(NAME_TAG):] for t in e.tags if t.startswith(NAME_TAG)), None)
        if name is None or e.source_type != "user_statement":
            return False
        st = self._state(rec.agent)
        if getattr(st, "template", True):
            st.notes = with_profile_name(DEFAULT_NOTES, name)
        if e.category in KEY_CATEGORIES:
            st.book.apply(rec)
        return True

    def render(self, agent: str) -> str:
        st = self.agents[agent]
        key = sorted(
            st.book.active(), key=lambda t: (-t.importance, -t.retrieval_count, -t.encoded_us, t.trace_id)
        )[:KEY_MEMORIES]
        return render_file(
            agent=agent, slots=st.slots, notes=st.notes, key_memories=[t.content for t in key], budget=st.budget,
            capacity=st.capacity, turn=st.turn, as_of_seq=st.as_of_seq, as_of=iso(st.as_of_us),
        )

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        slots_changed = sorted(self._dirty_slots | self._forgotten)
        if slots_changed:
            db.execute("DELETE FROM working_memory WHERE agent IN (SELECT unnest(?))", [slots_changed])
        focused = []
        for agent in sorted(self._dirty_slots):
            st = self.agents[agent]
            focused += [FocusedSlot(agent=agent, rank=rank, trace_id=s.trace_id, activation=s.activation,
                                    tag=tag(s.activation), content=s.content, entered_turn=s.entered_turn,
                                    rehearsals=s.rehearsals, turn=st.turn, capacity=st.capacity, as_of_seq=st.slots_seq)
                        for rank, s in enumerate(st.slots, 1)]
        if focused:
            records.insert_arrow(db, "working_memory", records.arrow_table(FocusedSlot, focused))
        changed = sorted(self._dirty | self._forgotten)
        if changed:
            db.execute("DELETE FROM working_memory_state WHERE agent IN (SELECT unnest(?))", [changed])
        if self._forgotten:
            db.execute("DELETE FROM working_memory_keys WHERE agent IN (SELECT unnest(?))", [sorted(self._forgotten)])
        states, keys = [], []
        gone: dict[str, list[str]] = {"agent": [], "trace_id": []}  # key traces rewritten or forgotten, every agent's
        for agent in sorted(self._dirty):
            st = self.agents[agent]
            states.append((agent, st.notes, st.turn, st.capacity, st.slots_seq, st.as_of_seq, st.as_of_us, st.budget))
            _, dirty, forgotten, _, _ = st.book.take_changes()
            st.book.changes.clear()
            for tid in sorted(dirty | forgotten):
                gone["agent"].append(agent)
                gone["trace_id"].append(tid)
            for tid in sorted(dirty):
                t = st.book.traces.get(tid)
                if t is not None:
                    keys.append((agent, tid, t.stream, t.category, t.content, t.importance, t.retrieval_count,
                                 t.encoded_us, t.active))
            atomic_write(self.ctx.paths.working_memory_file(agent), self.render(agent).encode())
        records.delete_keys(db, "working_memory_keys", gone)  # one statement for every agent (issue 27)
        _insert(db, "working_memory_state", _STATE, states)
        _insert(db, "working_memory_keys", _KEYS, keys)
        for agent in sorted(self._forgotten):
            path = self.ctx.paths.working_memory_file(agent)
            if path.exists():
                path.unlink()
        self._dirty_slots.clear()
        self._dirty.clear()
        self._forgotten.clear()

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        """After a restart: the slots, notes, budget and key traces back from the tables."""
        for agent, notes, turn, capacity, slots_seq, as_of_seq, as_of_us, budget in db.execute(
            "SELECT agent, notes, turn, capacity, slots_seq, as_of_seq, epoch_us(as_of), budget_tokens FROM working_memory_state"
        ).fetchall():
            st = self._state(agent)
            st.notes, st.turn, st.capacity, st.slots_seq = notes, turn, capacity, slots_seq
            st.template = with_profile_name(notes, "").rstrip() == with_profile_name(DEFAULT_NOTES, "").rstrip()
            st.as_of_seq, st.as_of_us, st.budget = as_of_seq, as_of_us, budget
        cursor = db.execute(f"SELECT {records.select_list(FocusedSlot)} FROM working_memory ORDER BY agent, rank")
        for f in records.from_rows(FocusedSlot, [c[0] for c in cursor.description], cursor.fetchall()):
            st = self._state(f.agent)
            st.slots += (f.slot(),)
        for agent, tid, stream, category, content, importance, retrievals, encoded_us, active in db.execute(
            "SELECT agent, trace_id, stream, category, content, importance, retrieval_count, epoch_us(encoded_at), active "
            "FROM working_memory_keys ORDER BY agent, encoded_at, trace_id"
        ).fetchall():
            self._state(agent).book.traces[tid] = _key_trace(agent, tid, stream, category, content, importance,
                                                             retrievals, encoded_us, active)


def _key_trace(agent, tid, stream, category, content, importance, retrievals, encoded_us, active) -> MemoryTrace:
    """A key trace as the file needs it (the decay state lives in `memory_traces`, not here)."""
    return MemoryTrace(
        trace_id=tid, agent=agent, stream=stream, content=content, trace_type="semantic", scope="agent", scope_id=agent,
        source_type="user_statement", source_seqs=(), source_message_ids=(), confidence=0.0, valence=0.0, arousal=0.0,
        dominance=0.0, intensity=0.0, flashbulb=False, importance=importance, encoding_strength=0.0, stability_s=1.0,
        encoded_us=encoded_us, last_access_us=encoded_us, interval_s=1.0, next_due_us=encoded_us, category=category,
        retrieval_count=retrievals, active=active,
    )
