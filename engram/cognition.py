"""The Python API of cognitive memory, on top of `engram.client.Engram`.

    with Engram.open() as mem:
        cog = CognitiveMemory(mem)
        result = cog.recall("default", "what theme does the user like?", discussion="trip-planning")
        for hit in result.hits:
            print(hit.score, hit.content, hit.factors)      # composite score and its six factors
        cog.set_mood("default", valence=0.6, arousal=0.2, dominance=0.1)
        print(cog.working_memory("default").markdown)

Recall is served by the trace reader actors (logical per agent, pooled); the `TraceRetrieved` each
recall implies is appended by the reader after it answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import ray

from engram.actors.pool import owner
from engram.cognitive.retrieval import RecallResult
from engram.cognitive.working_memory import budget_tokens, fit_notes
from engram.events.cognitive import MoodChanged, WorkingMemoryWritten
from engram.events.envelope import NewEvent, Write
from engram.events.messages import ToolCallFailed
from engram.ids import validate_agent, validate_discussion
from engram.projections.working_memory import FILE_NAME
from engram.settings import agent_stream

READER_GROUP = "traces"
READER_POLICY = "trace-reader"


@dataclass(frozen=True)
class SourceMessage:
    seq: int
    discussion: str
    message_id: str
    role: str
    name: str | None
    content: str
    ts: str


@dataclass(frozen=True)
class WorkingMemoryView:
    slots: list[dict]
    markdown: str
    path: Path


class CognitiveMemory:
    def __init__(self, mem):
        self.mem = mem

    # ------------------------------------------------------------------ recall

    def reader(self, agent: str):
        """The trace reader actor that hosts `agent`'s logical actor."""
        from engram.policies.registry import members as pool_size

        members = pool_size(READER_GROUP, self.mem.config.ray.pools)
        shard = self.mem.shard_of(agent)
        return self.mem.runtime.policies()[(READER_GROUP, shard, owner(agent, members))]

    def recall(
        self,
        agent: str,
        query: str,
        *,
        discussion: str | None = None,
        limit: int | None = None,
        weights: dict[str, float] | None = None,
        hyde: bool | None = None,
        mood: tuple[float, float, float] | None = None,
        now_us: int | None = None,
        fresh: bool = True,
        similarity: str | None = None,
    ) -> RecallResult:
        """The composite-ranked traces of `agent` for `query` (in `discussion`'s scope, if given).

        `fresh`: the reader first folds everything the log holds now (read-your-writes); `now_us` is
        the event time of the question (default: now); `weights` overrides factor weights for this call;
        `similarity` ("hybrid" or "embedding") overrides `memory.retrieval.similarity` for this call.
        """
        from engram.client import now_us as wall_clock

        validate_agent(agent)
        if discussion is not None:
            validate_discussion(discussion)
        if not query.strip():
            raise ValueError("the query is empty")
        self.mem.require_agent(agent)  # a mistyped agent records nothing
        self.mem.sync_settings(agent)  # personality and weights as agent.config.json says now
        head = ray.get(self.mem.runtime.shard(self.mem.shard_of(agent)).head.remote()) if fresh else None
        return ray.get(
            self.reader(agent).call.remote(
                READER_POLICY,
                "recall",
                agent,
                query,
                min_position=head,
                now_us=now_us if now_us is not None else wall_clock(),
                limit=limit,
                discussion=discussion,
                weights=weights,
                hyde=hyde,
                mood=mood,
                similarity=similarity,
            )
        )

    def source_messages(self, result: RecallResult) -> dict[int, SourceMessage]:
        """The messages the results were made from, by seq (from the log)."""
        seqs = sorted({s for h in result.hits for s in h.source_seqs})
        if not seqs:
            return {}
        names, rows = self.mem.sql(
            "SELECT seq, discussion_id, message_id, role, name, content, ts FROM messages "
            "WHERE agent = ? AND seq IN (SELECT unnest(?)) ORDER BY seq",
            [result.agent, seqs],
        )
        return {r[0]: SourceMessage(r[0], r[1], r[2], r[3], r[4], r[5], str(r[6])) for r in rows}

    # ------------------------------------------------------------------ state

    def traces(self, agent: str, *, include_inactive: bool = False, limit: int | None = None) -> tuple[list[str], list[tuple]]:
        validate_agent(agent)
        sql = (
            "SELECT trace_id, trace_type, category, scope, scope_id, round(importance, 3) AS importance, "
            "round(encoding_strength, 3) AS s0, round(stability_s / 3600, 2) AS stability_h, retrieval_count, "
            "verification_count, encoded_at, active, content FROM memory_traces WHERE agent = ?"
            + ("" if include_inactive else " AND active")
            + " ORDER BY encoded_at, last_seq, trace_id"
            + (f" LIMIT {int(limit)}" if limit else "")
        )
        return self.mem.sql(sql, [agent])

    def working_memory(self, agent: str) -> WorkingMemoryView:
        validate_agent(agent)
        _, rows = self.mem.sql(
            "SELECT rank, tag, activation, trace_id, content, entered_turn, rehearsals, turn, capacity FROM working_memory "
            "WHERE agent = ? ORDER BY rank",
            [agent],
        )
        keys = ("rank", "tag", "activation", "trace_id", "content", "entered_turn", "rehearsals", "turn", "capacity")
        path = self.mem.runtime.home.projections_dir / "agents" / agent / FILE_NAME
        text = path.read_text() if path.exists() else ""
        return WorkingMemoryView(slots=[dict(zip(keys, r)) for r in rows], markdown=text, path=path)

    # ------------------------------------------------------------------ writing

    def set_mood(self, agent: str, valence: float, arousal: float, dominance: float, *, reason: str = "set", ts_us: int | None = None):
        """Record the agent's mood (PAD, each in [-1, 1])."""
        from engram.client import now_us as wall_clock

        for name, v in (("valence", valence), ("arousal", arousal), ("dominance", dominance)):
            if not -1.0 <= v <= 1.0:
                raise ValueError(f"{name} must be within [-1, 1], got {v}")
        validate_agent(agent)
        self.mem.sync_settings(agent)
        event = MoodChanged(valence=valence, arousal=arousal, dominance=dominance, reason=reason)
        return self.mem.append([Write(agent_stream(agent), agent, (NewEvent(event, ts_us or wall_clock()),))])[0]

    def write_working_memory(self, agent: str, markdown: str, *, ts_us: int | None = None):
        """Replace the agent's persistent markdown memory (cut to its budget: 5% of the context window)."""
        from engram.client import now_us as wall_clock
        from engram.config.agent import AgentConfig
        from engram.config.loader import load_or_default

        validate_agent(agent)
        self.mem.sync_settings(agent)
        cfg = load_or_default(AgentConfig, self.mem.runtime.home.agent_config_path(agent))
        budget = budget_tokens(cfg.memory.infinite_context.context_window_tokens)
        text, truncated = fit_notes(markdown, budget)
        event = WorkingMemoryWritten(markdown=text, truncated=truncated, budget_tokens=budget)
        return self.mem.append([Write(agent_stream(agent), agent, (NewEvent(event, ts_us or wall_clock()),))])[0]

    def record_tool_failure(
        self, agent: str, discussion: str, tool: str, error: str, *, arguments: str = "", call_id: str | None = None,
        ts_us: int | None = None,
    ):
        """Record a failed tool call (the tool-failure learner turns known failures into lessons)."""
        from engram.client import now_us as wall_clock

        validate_agent(agent)
        validate_discussion(discussion)
        event = ToolCallFailed(tool=tool, error=error, arguments=arguments, call_id=call_id)
        event_id = f"toolfail:{call_id}" if call_id else None
        return self.mem.append([Write(discussion, agent, (NewEvent(event, ts_us or wall_clock(), event_id),))])[0]
