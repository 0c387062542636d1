"""Working memory in SQL and on disk.

- table `working_memory`: each agent's slots now (rank, trace, activation, prompt tag), the fold of
  `WorkingMemoryUpdated` (their history is the view `ev_working_memory_updated`);
- file `agents/<agent>/working-memory.md`: the slots in focus, the agent's persistent markdown
  notes (`WorkingMemoryWritten`, a template until the first write), and its key memories (its most
  important agent-wide traces) while they fit — the whole file within 5% of the context window.
"""

from __future__ import annotations

from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.cognitive.book import TraceBook
from engram.cognitive.working_memory import DEFAULT_NOTES, budget_tokens, render_file, tag
from engram.events import cognitive as ev
from engram.events.control import AgentForgotten
from engram.events.envelope import Recorded, iso
from engram.projections.base import TableProjection, atomic_write
from engram.settings import SettingsView

FILE_NAME = "working-memory.md"
# Categories of the traces listed under "Key Memories": what holds beyond one conversation.
KEY_CATEGORIES = frozenset({"user_preference", "goal", "knowledge", "correction", "lesson"})
KEY_MEMORIES = 20

_SCHEMA = pa.schema(
    [
        ("agent", pa.string()), ("rank", pa.int64()), ("trace_id", pa.string()), ("activation", pa.float64()),
        ("tag", pa.string()), ("content", pa.string()), ("entered_turn", pa.int64()), ("rehearsals", pa.int64()),
        ("turn", pa.int64()), ("capacity", pa.int64()), ("as_of_seq", pa.int64()),
    ]
)


class _AgentState:
    def __init__(self, agent: str):
        self.book = TraceBook(agent)
        self.slots: tuple[ev.Slot, ...] = ()
        self.turn = 0
        self.capacity = 0
        self.slots_seq = 0
        self.notes = DEFAULT_NOTES
        self.as_of_seq = 0
        self.as_of_us = 0


class WorkingMemoryProjection(TableProjection):
    name = "working-memory"
    tables: ClassVar[tuple[str, ...]] = ("working_memory",)
    interests = frozenset({"WorkingMemoryUpdated", "WorkingMemoryWritten", "SettingsChanged"}) | TRACE_EVENTS

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(
            "CREATE TABLE IF NOT EXISTS working_memory (agent VARCHAR, rank BIGINT, trace_id VARCHAR, activation DOUBLE, "
            "tag VARCHAR, content VARCHAR, entered_turn BIGINT, rehearsals BIGINT, turn BIGINT, capacity BIGINT, "
            "as_of_seq BIGINT, PRIMARY KEY (agent, rank))"
        )
        self.agents: dict[str, _AgentState] = {}
        self.settings = SettingsView()
        self._dirty_slots: set[str] = set()
        self._dirty_files: set[str] = set()
        self._forgotten: set[str] = set()

    def _state(self, agent: str) -> _AgentState:
        st = self.agents.get(agent)
        if st is None:
            st = self.agents[agent] = _AgentState(agent)
        return st

    def apply(self, rec: Recorded) -> None:
        e = rec.event
        if rec.type == "SettingsChanged":
            self.settings.apply(rec)
            if rec.agent in self.agents:
                self._touch(rec)
            return
        st = self._state(rec.agent)
        if isinstance(e, ev.WorkingMemoryUpdated):
            st.slots, st.turn, st.capacity, st.slots_seq = tuple(e.slots), e.turn, e.capacity, rec.seq
            self._dirty_slots.add(rec.agent)
        elif isinstance(e, ev.WorkingMemoryWritten):
            st.notes = e.markdown
        elif isinstance(e, AgentForgotten) and e.agent_id == rec.agent:
            self.agents.pop(rec.agent, None)
            self._forgotten.add(rec.agent)
            self._dirty_slots.discard(rec.agent)
            self._dirty_files.discard(rec.agent)
            return
        else:
            st.book.apply(rec)
        self._touch(rec)

    def _touch(self, rec: Recorded) -> None:
        st = self._state(rec.agent)
        st.as_of_seq, st.as_of_us = rec.seq, rec.ts_us
        self._dirty_files.add(rec.agent)
        self._forgotten.discard(rec.agent)

    def render(self, agent: str) -> str:
        st = self.agents[agent]
        cfg = self.settings.agent_config(agent)
        key = sorted(
            (t for t in st.book.active() if t.category in KEY_CATEGORIES),
            key=lambda t: (-t.importance, -t.retrieval_count, -t.encoded_us, t.trace_id),
        )[:KEY_MEMORIES]
        return render_file(
            agent=agent,
            slots=st.slots,
            notes=st.notes,
            key_memories=[t.content for t in key],
            budget=budget_tokens(cfg.memory.infinite_context.context_window_tokens),
            capacity=st.capacity,
            turn=st.turn,
            as_of_seq=st.as_of_seq,
            as_of=iso(st.as_of_us),
        )

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        changed = sorted(self._dirty_slots | self._forgotten)
        if changed:
            db.execute("DELETE FROM working_memory WHERE agent IN (SELECT unnest(?))", [changed])
        rows = []
        for agent in sorted(self._dirty_slots):
            st = self.agents[agent]
            for rank, s in enumerate(st.slots, 1):
                rows.append(
                    (agent, rank, s.trace_id, s.activation, tag(s.activation), s.content, s.entered_turn, s.rehearsals,
                     st.turn, st.capacity, st.slots_seq)
                )
        if rows:
            table = pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(zip(*rows), _SCHEMA)], schema=_SCHEMA)
            db.register("_wm_batch", table)
            db.execute("INSERT INTO working_memory SELECT * FROM _wm_batch")
            db.unregister("_wm_batch")
        for agent in sorted(self._dirty_files):
            atomic_write(self.ctx.paths.agent_dir(agent) / FILE_NAME, self.render(agent).encode())
        for agent in sorted(self._forgotten):
            path = self.ctx.paths.agent_dir(agent) / FILE_NAME
            if path.exists():
                path.unlink()
        self._dirty_slots.clear()
        self._dirty_files.clear()
        self._forgotten.clear()

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        """After a restart, fold again from the start: the notes, key memories and settings this
        projection renders live in memory only (the table holds just the slots)."""
        self.position = 0
