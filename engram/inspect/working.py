"""View 5, working memory and the context window: the slots in focus with their activation (and the free
ones, up to the capacity), `working-memory.md`, and the context that would be sent to the model now,
block by block against its budget (working memory, rolling summary, compaction chain, recalled memories,
raw turns), with the compaction chain's nodes.
"""

from __future__ import annotations

from engram.events.envelope import iso
from engram.inspect.source import MemoryReader
from engram.kernel import records
from engram.memory.cognitive.working_memory import FocusedSlot

RECENT_TURNS_SHOWN = 20
SLOT_COLUMNS = ("rank", "tag", "activation", "trace_id", "content", "entered_turn", "rehearsals")
_SLOT_SELECT = records.columns(FocusedSlot, *SLOT_COLUMNS)


def working_memory(reader: MemoryReader, agent: str) -> dict:
    _, rows = reader.sql(f"SELECT {_SLOT_SELECT} FROM working_memory WHERE agent = ? ORDER BY rank", [agent])
    _, state = reader.sql(
        "SELECT turn, capacity, budget_tokens, epoch_us(as_of), as_of_seq FROM working_memory_state WHERE agent = ?", [agent]
    )
    turn, capacity, budget, as_of, as_of_seq = state[0] if state else (0, None, None, None, None)
    config = reader.agent_config(agent)
    return {
        "agent": agent,
        "slots": [dict(zip(SLOT_COLUMNS, r)) for r in rows],
        "capacity": capacity or config.memory.working_memory.capacity,
        "turn": turn,
        "budget_tokens": budget,
        "as_of": iso(as_of) if as_of is not None else None,
        "as_of_seq": as_of_seq,
        "file": reader.working_memory_file(agent),
    }


def context_window(reader: MemoryReader, agent: str, discussion: str) -> dict:
    ctx = reader.context(agent, discussion)
    _, chain = reader.sql(
        "SELECT node_id, level, strategy, first_turn, last_turn, messages, input_tokens, output_tokens, in_chain, summary "
        "FROM context_compactions WHERE agent = ? AND discussion_id = ? ORDER BY first_seq, level",
        [agent, discussion],
    ) if _has(reader, "context_compactions") else ([], [])
    keys = ("node_id", "level", "strategy", "first_turn", "last_turn", "messages", "input_tokens", "output_tokens",
            "in_chain", "summary")
    turns = ctx.get("turns", [])
    recent = sum(_tokens(t["content"]) for t in turns)
    return {
        **ctx,
        # The raw turns are counted whole but shipped only in part: a discussion nothing has compacted yet may
        # have thousands.
        "turns": turns[-RECENT_TURNS_SHOWN:],
        "turns_total": len(turns),
        "recent_tokens": recent,
        "segments": [{"name": b["name"], "title": b["title"], "tokens": b["tokens"], "budget": b["budget"]}
                     for b in ctx["blocks"]] + [{"name": "recent_turns", "title": "recent turns", "tokens": recent,
                                                 "budget": None}],
        "nodes": [dict(zip(keys, r)) for r in chain],
    }


def _tokens(text: str) -> int:
    from engram.kernel.tokens import estimate_tokens

    return estimate_tokens(text)


def _has(reader: MemoryReader, table: str) -> bool:
    _, rows = reader.sql("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [table])
    return bool(rows and rows[0][0])
