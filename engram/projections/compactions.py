"""`context_compactions`: every compaction node of every discussion, and which ones form the chain now.

One row per `ContextCompacted` (its transparency fields as recorded), plus `parent` (the node that
replaced it) and `in_chain` (true while no node has replaced it). The chain of a discussion is
`WHERE in_chain ORDER BY first_seq`; the raw turns after it are the messages with seq > the chain's
largest `last_seq`. A pure fold of the events: replay rebuilds it row for row, without an LLM call.
"""

from __future__ import annotations

from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.events.background import ContextCompacted
from engram.events.control import AgentForgotten, DiscussionForgotten
from engram.kernel import records
from engram.events.envelope import Recorded
from engram.memory.context.rules import ratio
from engram.projections.base import TableProjection
from engram.projections.discussion_base import delete_discussions

TABLE = "context_compactions"
_STRINGS = pa.list_(pa.string())
_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("agent", pa.string()),
        ("discussion_id", pa.string()), ("node_id", pa.string()), ("strategy", pa.string()), ("level", pa.int64()),
        ("trigger", pa.string()), ("first_seq", pa.int64()), ("last_seq", pa.int64()), ("first_turn", pa.int64()),
        ("last_turn", pa.int64()), ("messages", pa.int64()), ("children", _STRINGS), ("parent", pa.string()),
        ("in_chain", pa.bool_()), ("summary", pa.string()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64()),
        ("compression_ratio", pa.float64()), ("covered_tokens", pa.int64()), ("target_tokens", pa.int64()),
        ("context_tokens_before", pa.int64()), ("context_tokens_after", pa.int64()), ("window_tokens", pa.int64()),
        ("transparency", pa.string()), ("dropped_count", pa.int64()), ("dropped", _STRINGS),
        ("preserved_entities", _STRINGS), ("traces_created", _STRINGS), ("notes_reused", pa.int64()),
        ("notes_observed", pa.int64()), ("duration_ms", pa.float64()), ("llm_calls", pa.int64()),
        ("llm_provider", pa.string()), ("llm_model", pa.string()),
    ]
)
_DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    seq BIGINT, ts TIMESTAMPTZ, agent VARCHAR, discussion_id VARCHAR, node_id VARCHAR, strategy VARCHAR, level BIGINT,
    trigger VARCHAR, first_seq BIGINT, last_seq BIGINT, first_turn BIGINT, last_turn BIGINT, messages BIGINT,
    children VARCHAR[], parent VARCHAR, in_chain BOOLEAN, summary VARCHAR, input_tokens BIGINT, output_tokens BIGINT,
    compression_ratio DOUBLE, covered_tokens BIGINT, target_tokens BIGINT, context_tokens_before BIGINT,
    context_tokens_after BIGINT, window_tokens BIGINT, transparency VARCHAR, dropped_count BIGINT, dropped VARCHAR[],
    preserved_entities VARCHAR[], traces_created VARCHAR[], notes_reused BIGINT, notes_observed BIGINT,
    duration_ms DOUBLE, llm_calls BIGINT, llm_provider VARCHAR, llm_model VARCHAR,
    PRIMARY KEY (agent, discussion_id, node_id))"""


def _row(rec: Recorded, ev: ContextCompacted) -> tuple:
    last = ev.llm[-1] if ev.llm else None
    return (
        rec.seq, rec.ts_us, rec.agent, rec.stream, ev.node_id, ev.strategy, ev.level, ev.trigger, ev.first_seq,
        ev.last_seq, ev.first_turn, ev.last_turn, ev.messages, list(ev.children), None, True, ev.summary,
        ev.input_tokens, ev.output_tokens, ratio(ev.input_tokens, ev.output_tokens), ev.covered_tokens,
        ev.target_tokens, ev.context_tokens_before, ev.context_tokens_after, ev.window_tokens, ev.transparency,
        ev.dropped_count, list(ev.dropped), list(ev.preserved_entities), list(ev.traces_created), ev.notes_reused,
        ev.notes_observed, ev.duration_ms, len(ev.llm), last.provider if last else None, last.model if last else None,
    )


class CompactionChainProjection(TableProjection):
    name = "context-compactions"
    version: ClassVar[int] = 2  # 2: rows keyed by (agent, discussion_id, node_id)
    tables: ClassVar[tuple[str, ...]] = (TABLE,)
    interests = frozenset({"ContextCompacted", "DiscussionForgotten", "AgentForgotten"})

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(_DDL)
        self._rows: list[tuple] = []
        self._parents: list[tuple[str, str, str, str]] = []  # (parent node, agent, discussion, child node)
        self._forget_discussions: set[tuple[str, str]] = set()  # (agent, discussion)
        self._forget_agents: set[str] = set()

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if isinstance(ev, ContextCompacted):
            self._rows.append(_row(rec, ev))
            self._parents += [(ev.node_id, rec.agent, rec.stream, child) for child in ev.children]
        elif isinstance(ev, DiscussionForgotten):
            key = (rec.agent, ev.discussion_id)
            self._forget(lambda row_agent, row_discussion: (row_agent, row_discussion) == key)
            self._forget_discussions.add(key)
        elif isinstance(ev, AgentForgotten):
            self._forget(lambda row_agent, row_discussion: row_agent == ev.agent_id)
            self._forget_agents.add(ev.agent_id)

    def _forget(self, gone) -> None:
        self._rows = [r for r in self._rows if not gone(r[2], r[3])]
        self._parents = [p for p in self._parents if not gone(p[1], p[2])]

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        if self._forget_discussions:
            delete_discussions(db, TABLE, sorted(self._forget_discussions))
        if self._forget_agents:
            db.execute(f"DELETE FROM {TABLE} WHERE agent IN (SELECT unnest(?))", [sorted(self._forget_agents)])
        if self._rows:
            table = pa.Table.from_arrays(
                [pa.array(col, type=f.type) for col, f in zip(zip(*self._rows), _SCHEMA)], schema=_SCHEMA
            )
            records.insert_arrow(db, TABLE, table, or_replace=True)
        if self._parents:
            # One UPDATE for every replaced node (an `executemany` ran a statement per row, issue 27); a node replaced
            # twice keeps its last parent, as the updates one after the other left it.
            last = {(agent, discussion, child): parent for parent, agent, discussion, child in self._parents}
            _engram_parents = pa.table({  # noqa: F841  (read by DuckDB, by its name)
                "parent": pa.array(list(last.values()), pa.string()),
                "agent": pa.array([k[0] for k in last], pa.string()),
                "discussion_id": pa.array([k[1] for k in last], pa.string()),
                "node_id": pa.array([k[2] for k in last], pa.string()),
            })
            db.execute(f"UPDATE {TABLE} SET parent = p.parent, in_chain = false FROM _engram_parents p "
                       f"WHERE {TABLE}.agent = p.agent AND {TABLE}.discussion_id = p.discussion_id "
                       f"AND {TABLE}.node_id = p.node_id")
        self._rows, self._parents = [], []
        self._forget_discussions, self._forget_agents = set(), set()
