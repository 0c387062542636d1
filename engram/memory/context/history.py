"""A discussion's compaction history and the context that would be sent to the model now, read
through any SQL callable `sql(query, params) -> (names, rows)` (the API passes the runtime's; a
callable answers a query over a table that does not exist yet with no rows).

The history is the `context_compactions` projection (the fold of `ContextCompacted` events). Every read names
the agent as well as the discussion: a discussion id of another agent reads as one with nothing in it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from engram.config.home import Home, ProjectionPaths
from engram.kernel.ids import validate_agent, validate_discussion
from engram.memory.context.assemble import AssembledContext, ChainEntry, RawTurn, Recalled, assemble
from engram.memory.context.rules import effective, threshold_tokens

Sql = Callable[[str, list[Any]], tuple[list[str], list[tuple[Any, ...]]]]


@dataclass(frozen=True)
class CompactionRecord:
    """One compaction node as `engram compactions` and `get_compaction_history()` report it."""

    seq: int
    ts: str
    agent: str
    discussion_id: str
    node_id: str
    strategy: str
    level: int
    trigger: str
    first_seq: int
    last_seq: int
    first_turn: int
    last_turn: int
    messages: int
    children: tuple[str, ...]
    parent: str | None
    in_chain: bool
    summary: str
    input_tokens: int
    output_tokens: int
    compression_ratio: float
    covered_tokens: int
    target_tokens: int
    context_tokens_before: int
    context_tokens_after: int
    window_tokens: int
    transparency: str
    dropped_count: int
    dropped: tuple[str, ...]
    preserved_entities: tuple[str, ...]
    traces_created: tuple[str, ...]
    notes_reused: int
    notes_observed: int
    duration_ms: float
    llm_calls: int
    llm_provider: str | None
    llm_model: str | None

    @property
    def label(self) -> str:
        return f"[L{self.level}: turns {self.first_turn}-{self.last_turn}]"

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in ("children", "dropped", "preserved_entities", "traces_created"):
            out[k] = list(out[k])
        out["label"] = self.label
        return out


_COLUMNS = [f.name for f in fields(CompactionRecord)]
_LISTS = {"children", "dropped", "preserved_entities", "traces_created"}


def compaction_history(sql: Sql, agent: str, discussion: str) -> list[CompactionRecord]:
    """Every compaction of `agent`'s `discussion`, in the order they were recorded."""
    validate_agent(agent)
    validate_discussion(discussion)
    cols = ", ".join("strftime(ts, '%Y-%m-%dT%H:%M:%SZ') AS ts" if c == "ts" else c for c in _COLUMNS)
    _, rows = sql(f"SELECT {cols} FROM context_compactions WHERE agent = ? AND discussion_id = ? "
                  "ORDER BY seq, first_seq, level", [agent, discussion])
    out = []
    for row in rows:
        values: dict[str, Any] = {c: (tuple(v or ()) if c in _LISTS else v) for c, v in zip(_COLUMNS, row)}
        out.append(CompactionRecord(**values))
    return out


def current_chain(history: list[CompactionRecord]) -> list[CompactionRecord]:
    """The nodes standing for the compacted turns now, oldest first."""
    return sorted((c for c in history if c.in_chain), key=lambda c: (c.first_seq, c.level))


def chain_tree(history: list[CompactionRecord]) -> list[str]:
    """The chain as the guide draws it: each node, and under it the nodes it merged."""
    by_id = {c.node_id: c for c in history}
    lines: list[str] = []

    def walk(node: CompactionRecord, prefix: str, last: bool, top: bool) -> None:
        head = "" if top else prefix + ("└── " if last else "├── ")
        lines.append(f"{head}{node.label} {node.output_tokens} tokens ({node.strategy}, {node.node_id})")
        kids = [by_id[k] for k in node.children if k in by_id]
        child_prefix = "" if top else prefix + ("    " if last else "│   ")
        for i, kid in enumerate(kids):
            walk(kid, child_prefix + ("  " if top else ""), i == len(kids) - 1, False)

    for node in current_chain(history):
        walk(node, "", True, True)
    return lines


def discussion_agent(sql: Sql, discussion: str, agent: str | None = None) -> str | None:
    """The agent owning `discussion` (from its messages), or None when the log has none."""
    if agent is not None:
        return validate_agent(agent)
    _, rows = sql("SELECT DISTINCT agent FROM messages WHERE discussion_id = ? ORDER BY agent", [discussion])
    return rows[0][0] if rows else None


def recent_turns(sql: Sql, agent: str, discussion: str, after_seq: int) -> list[RawTurn]:
    """`agent`'s messages of the discussion after `after_seq` (the chain's last), numbered as turns of the whole
    discussion."""
    _, rows = sql(
        "SELECT turn, seq, role, name, content, strftime(ts, '%Y-%m-%dT%H:%M:%SZ'), epoch_us(ts) FROM ("
        "  SELECT row_number() OVER (ORDER BY seq) AS turn, seq, role, name, content, ts FROM messages"
        "  WHERE agent = ? AND discussion_id = ?) WHERE seq > ? ORDER BY seq",
        [agent, discussion, after_seq],
    )
    return [RawTurn(turn=r[0], seq=r[1], role=r[2], name=r[3], content=r[4], ts=r[5], ts_us=r[6]) for r in rows]


def last_user_message(turns: list[RawTurn]) -> str:
    return next((t.content for t in reversed(turns) if t.role == "user"), "")


def build_context(
    sql: Sql, home: Home, projection_paths: ProjectionPaths, agent: str, discussion: str, *, recall: Callable[[str], list[Recalled]] | None = None,
    query: str | None = None, skip_raw: bool = True,
) -> AssembledContext:
    """The context that would be sent to the model now (see `engram.memory.context.assemble` for the layout).

    `recall(query)` gives the recalled traces (None: no recall); `query` defaults to the latest user message;
    `skip_raw`: see `assemble`.
    """
    from engram.config.agent import AgentConfig
    from engram.config.loader import load_or_default
    from engram.memory.discussion.files import SUMMARY_SUFFIX, read_summary

    cfg = effective(load_or_default(AgentConfig, home.agent_config_path(agent)))
    history = compaction_history(sql, agent, discussion)
    chain = current_chain(history)
    covered = max((c.last_seq for c in chain), default=0)
    turns = recent_turns(sql, agent, discussion, covered)
    wm_path = projection_paths.working_memory_file(agent)
    working_memory = wm_path.read_text() if wm_path.exists() else ""
    summary = read_summary(projection_paths.discussion_file(agent, discussion, SUMMARY_SUFFIX))
    asked = query if query is not None else last_user_message(turns)
    recalled = recall(asked) if (recall is not None and asked.strip()) else []
    return assemble(
        agent=agent, discussion=discussion, window_tokens=cfg.context_window_tokens, threshold_tokens=threshold_tokens(cfg),
        working_memory=working_memory, rolling_summary=(summary or {}).get("summary", ""),
        chain=[ChainEntry(c.label, c.summary, c.output_tokens) for c in chain], recalled=recalled, turns=turns,
        query=asked if recall is not None else "", skip_raw=skip_raw,
    )
