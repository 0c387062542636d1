"""Cognitive memory (Wunderland): recall with its factor breakdown, traces, working memory, mood,
observation logs and consolidation runs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.clock import iso, now_us, to_us
from engram.api.errors import check_count, error
from engram.events.background import ObservationsRecorded
from engram.events.messages import MessageAppended
from engram.kernel import records
from engram.kernel.ids import validate_discussion
from engram.memory.cognitive.hit import HitShown
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.working_memory import FocusedSlot

if TYPE_CHECKING:
    from engram.memory.cognitive.retrieval import RecallHit, RecallResult
    from engram.memory.context.assemble import Recalled
    from engram.runtime.base import Row

TRACE_COLUMNS = records.columns(
    MemoryTrace, "trace_id", "trace_type", "category", "scope", "round(importance, 2) AS importance",
    "round(encoding_strength, 3) AS s0", "round(stability_s / 3600, 2) AS stability_h", "retrieval_count AS retrievals",
    "verification_count AS verified", "strftime(encoded_at, '%Y-%m-%d %H:%M') AS encoded", "active", "content",
)
SLOT_COLUMNS = ("SELECT " + records.columns(FocusedSlot, "rank", "tag", "round(activation, 2) AS activation", "content",
                                             "entered_turn", "rehearsals", "turn", "capacity", "trace_id")
                + " FROM working_memory WHERE agent = ? ORDER BY rank")
OBSERVATION_LOGS = (
    "SELECT scope, scope_id, messages, message_tokens, notes, note_tokens, round(observation_compression, 1) AS compression, "
    "active_notes AS active, buffered_notes AS buffered, reflected_notes AS reflected, activations, reflections, "
    "round(reflection_compression, 1) AS reflection_compression, unobserved_tokens AS unobserved, "
    "tokens_to_observer, tokens_to_reflector, file, observer_threshold, active_tokens, reflector_threshold "
    "FROM observation_logs WHERE agent = ? "
    "ORDER BY scope, scope_id"
)
OBSERVATION_NOTES = (
    "SELECT strftime(observed_at, '%Y-%m-%d %H:%M') AS observed, status, type, round(importance, 2) AS importance, "
    "refers_to, text, source_message_ids AS messages FROM observation_notes WHERE agent = ? AND (scope_id = ? OR "
    "(scope = 'agent' AND stream = ?)) ORDER BY observed_at, recorded_seq, note_id"
)
CONSOLIDATION_COLUMNS = (
    "strftime(ts, '%Y-%m-%d %H:%M') AS tick, runs AS boundaries, traces, pruned, edges, schemas, conflicts, reinforced, "
    "array_to_string(CAST(bounded AS VARCHAR[]), ',') AS bounded, round(duration_ms, 2) AS ms"
)
BUSY = "(pruned + edges + schemas + conflicts + reinforced) > 0"
# Source messages of recall hits kept in the server, at most this many (a few MB).
SOURCE_CACHE_MESSAGES = 4_096


class SourceCache:
    """The messages recall hits were made from, by (agent, seq), so that a recall does not read the log for each hit.

    A message never changes in the log; it can only be erased (a forget) or moved (a re-shard gives it another seq).
    Both run through `changing()`, which empties the cache when it begins and when it ends and moves the epoch: a
    read that began before (its `mark`) keeps nothing, so erased text is never served from here. Only a sole writer
    keeps one (with other processes over the log, a forget through them would go unseen).
    """

    def __init__(self, capacity: int = SOURCE_CACHE_MESSAGES) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, int], t.SourceMessage | None] = OrderedDict()
        self._lock = threading.Lock()
        self._epoch = 0
        self._changing = 0
        self.hits = self.misses = 0

    def mark(self) -> int | None:
        """Take before reading the log; None while the log's messages are changing (keep nothing then)."""
        with self._lock:
            return None if self._changing else self._epoch

    def get(self, agent: str, seqs: Sequence[int]) -> tuple[dict[int, t.SourceMessage], list[int]]:
        """(the cached messages of `seqs`, the seqs to read): a seq that is no message is cached as such."""
        found: dict[int, t.SourceMessage] = {}
        missing: list[int] = []
        with self._lock:
            for seq in seqs:
                key = (agent, seq)
                if key in self._entries:
                    self._entries.move_to_end(key)
                    if (msg := self._entries[key]) is not None:
                        found[seq] = msg
                else:
                    missing.append(seq)
            self.hits += len(seqs) - len(missing)
            self.misses += len(missing)
        return found, missing

    def put(self, agent: str, mark: int | None, read: dict[int, t.SourceMessage], asked: Iterable[int]) -> None:
        """Keep what a read that began at `mark` found for the seqs it `asked` for."""
        with self._lock:
            if mark is None or mark != self._epoch or self._changing:
                return
            for seq in asked:
                self._entries[(agent, seq)] = read.get(seq)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    @contextmanager
    def changing(self) -> Iterator[None]:
        """While the log's messages are erased or moved: nothing is served or kept, before or after."""
        with self._lock:
            self._changing += 1
            self._epoch += 1
            self._entries.clear()
        failed = True
        try:
            yield
            failed = False
        finally:
            with self._lock:
                self._changing -= 1
                self._epoch += 1
                self._entries.clear()
                # A forget that failed part-way is completed later by the shard itself (when it next starts), out of
                # this cache's sight: it keeps nothing any more.
                self.capacity = 0 if failed else self.capacity


def table(names: Iterable[str], rows: Iterable[Row]) -> t.Table:
    return t.Table(columns=list(names), rows=[list(r) for r in rows])


def r6(x: float) -> float:
    return round(float(x), 6)


def api_hit(h: RecallHit, sources: dict[int, t.SourceMessage]) -> t.RecallHit:
    """The API's view of a core recall hit: what both show as it is (`HitShown`, declared once), and what the API
    computes from the core's own fields (`sources`: the messages by seq, when they were asked for)."""
    return t.RecallHit(
        **{name: getattr(h, name) for name in HitShown.__struct_fields__},
        score=r6(h.score),
        factors={k: r6(v) for k, v in h.factors.as_dict().items()},
        similarity_parts={"cosine": r6(h.cosine), "lexical": r6(h.lexical), "feedback": r6(h.feedback)},
        contributions={k: r6(v) for k, v in h.contributions.as_dict().items()},
        sources=[sources[s] for s in h.source_seqs if s in sources],
        pruned_at=None if h.pruned_us is None else iso(h.pruned_us),
        valid_from=iso(h.valid_from_us) if h.valid_from_us else None,
        valid_to=None if h.valid_to_us is None else iso(h.valid_to_us),
    )


class CognitiveOps(ApiCore):
    # ------------------------------------------------------------------ recall

    def recall(self, agent: str, req: t.RecallRequest) -> t.RecallResponse:
        """The agent's traces ranked by the six-factor composite, each with its breakdown and sources.
        Recorded as TraceRetrieved; it reinforces what it returns."""
        self.require_agent(agent)
        if req.discussion is not None:
            validate_discussion(req.discussion)
        if not req.query.strip():
            raise error("bad_query", "the query is empty")
        options: dict[str, Any] = {**({} if req.as_of is None else {"as_of_us": to_us(req.as_of, max_ahead_s=None)}),
                                   **({} if req.record else {"record": False}), **self._recall_filter(req)}
        result = self._recall(agent, req.query, discussion=req.discussion, limit=req.limit, weights=req.weights,
                              hyde=req.hyde, similarity=req.similarity, mood=req.mood,
                              # a recall that records (TraceRetrieved at `at`) is bound like every recorded time;
                              # one that only looks may ask about any moment
                              at=to_us(req.at, max_ahead_s=self.config.limits.max_future_seconds if req.record else None)
                              if req.at is not None else None, **options)
        sources = self._sources(result) if req.sources else {}
        return t.RecallResponse(
            query=result.query, agent=result.agent, discussion=result.discussion, now_us=result.now_us,
            candidates=result.candidates,
            similarity=result.similarity, keyword_share=r6(result.keyword_share), weights=result.weights.as_dict(),
            focus=result.focus, feedback=t.Feedback(
                share=result.feedback_share, traces=list(result.feedback_traces), terms=list(result.feedback_terms)),
            mood=t.Mood(valence=result.mood.valence, arousal=result.mood.arousal, dominance=result.mood.dominance),
            hyde=None if result.hyde is None else t.Hyde(
                text=result.hyde.text, threshold=result.hyde.threshold, tried=list(result.hyde.tried),
                hits=len(result.hyde.hits),
                matches=[t.HydeMatch(trace_id=tid, cosine=r6(c)) for tid, c in result.hyde.hits]),
            hits=[api_hit(h, sources) for h in result.hits],
        )

    @staticmethod
    def _recall_filter(req: t.RecallRequest) -> dict[str, Any]:
        """The request's filters as the trace reader's `only` (none: no option, the reader's fast path)."""
        from engram.events.envelope import to_us as event_us
        from engram.memory.cognitive.filters import TraceFilter

        if not (req.kinds or req.since or req.until or req.metadata):
            return {}
        since = event_us(req.since) if req.since is not None else None
        until = event_us(req.until) if req.until is not None else None
        if since is not None and until is not None and until <= since:
            raise error("invalid_request", "`until` must be later than `since`")
        return {"only": TraceFilter(kinds=frozenset(req.kinds or ()), since_us=since, until_us=until,
                                    metadata=tuple(sorted((req.metadata or {}).items())))}

    def _recall(self, agent: str, query: str, *, at: int | None = None, fresh: bool = True,
                **options: Any) -> RecallResult:
        self.sync_settings(agent)  # personality and weights as agent.config.json says now
        try:
            return self.rt.recall(agent, query, min_position=None if fresh else 0,
                                  now_us=at if at is not None else now_us(), **options)
        except ValueError as exc:  # a weight or a setting the reader refuses
            raise error("bad_query", str(exc)) from None

    def recalled(self, agent: str, discussion: str, query: str, *,
                 exclude_seqs: Sequence[int] = ()) -> list[Recalled]:
        """Recall as the context assembler wants it (engram.memory.context.assemble.Recalled): each hit as it is
        shown (`RecallHit.shown`, on one line: the question a reply answers, then the reply); a hit whose every
        sentence a better hit already shows is left out."""
        from engram.memory.context.assemble import Recalled

        result = self._recall(agent, query, discussion=discussion, fresh=False)
        skip = set(exclude_seqs)
        return [Recalled(h.score, " ".join(h.shown.split("\n")), h.trace_id, tuple(h.source_seqs)) for h in result.hits
                if h.shown.strip() and not skip.intersection(h.source_seqs)]

    def _sources(self, result: RecallResult) -> dict[int, t.SourceMessage]:
        """The messages the hits were made from, by seq (from the log)."""
        from datetime import datetime, timezone

        seqs = sorted({s for h in result.hits for s in h.source_seqs})
        if not seqs:
            return {}
        cache = self.source_cache() if self.rt.sole_writer else None
        mark = cache.mark() if cache is not None else None
        out, missing = cache.get(result.agent, seqs) if cache is not None else ({}, seqs)
        if not missing:
            return out
        read: dict[int, t.SourceMessage] = {}
        for r in self.rt.read_seqs(result.agent, missing):  # point reads of the log: no SQL session per recall
            if isinstance(ev := r.event, MessageAppended):
                ts = datetime.fromtimestamp(r.ts_us / 1_000_000, tz=timezone.utc)
                read[r.seq] = t.SourceMessage(seq=r.seq, discussion=r.stream, message_id=ev.message_id, role=ev.role,
                                              name=ev.name, content=ev.content, ts=str(ts))
        if cache is not None:
            cache.put(result.agent, mark, read, missing)
        return {**out, **read}

    def source_cache(self) -> SourceCache:
        cache: SourceCache | None = self.__dict__.get("_source_cache")
        if cache is None:
            with self._streams_lock:
                cache = self.__dict__.setdefault("_source_cache", SourceCache())
        return cache

    # ------------------------------------------------------------------ state

    def traces(self, agent: str, *, include_inactive: bool = False, limit: int | None = None) -> t.Table:
        """The agent's memory traces (soft-deleted ones too with `include_inactive`), oldest first."""
        self.require_agent(agent)
        check_count("limit", limit, t.MAX_ROWS)
        sql = (f"SELECT {TRACE_COLUMNS} FROM memory_traces WHERE agent = ?" + ("" if include_inactive else " AND active")
               + " ORDER BY encoded_at, last_seq, trace_id" + (f" LIMIT {int(limit)}" if limit else ""))
        return table(*self.sql_rows(sql, [agent]))

    def working_memory(self, agent: str) -> t.WorkingMemoryResponse:
        """The slots in focus and `working-memory.md` (slots, the agent's notes, key memories)."""
        from engram.config.home import ProjectionPaths

        self.require_agent(agent)
        names, rows = self.sql_rows(SLOT_COLUMNS, [agent])
        path = ProjectionPaths(self.home.projections_dir).working_memory_file(agent)
        return t.WorkingMemoryResponse(agent=agent, slots=[dict(zip(names, r)) for r in rows], path=str(path),
                                       markdown=path.read_text() if path.exists() else "")

    def write_working_memory(self, agent: str, req: t.WorkingMemoryWrite) -> t.WorkingMemoryWritten:
        """Replace the agent's persistent markdown notes (cut to their budget: 5% of the context window)."""
        from engram.memory.cognitive.working_memory import budget_tokens, fit_notes
        from engram.config.agent import AgentConfig
        from engram.config.loader import load_or_default
        from engram.events.cognitive import WorkingMemoryWritten
        from engram.events.envelope import NewEvent, Write
        from engram.kernel.ids import agent_stream

        self.require_agent(agent)
        ts = to_us(req.ts, max_ahead_s=self.config.limits.max_future_seconds)
        self.sync_settings(agent, ts)
        cfg = load_or_default(AgentConfig, self.home.agent_config_path(agent))
        budget = budget_tokens(cfg.memory.infinite_context.context_window_tokens)
        text, truncated = fit_notes(req.markdown, budget)
        event = WorkingMemoryWritten(markdown=text, truncated=truncated, budget_tokens=budget)
        appended = self.rt.append([Write(agent_stream(agent), agent, (NewEvent(event, ts),))])[0]
        self.rt.wait_projections()
        return t.WorkingMemoryWritten(agent=agent, seq=appended.seqs[0], position=self.position(agent, appended.seqs),
                                      characters=len(text), truncated=truncated,
                                      budget_tokens=budget)

    def set_mood(self, agent: str, req: t.MoodRequest) -> t.EventResponse:
        """Record the agent's mood (PAD, each in [-1, 1])."""
        from engram.events.cognitive import MoodChanged
        from engram.events.envelope import NewEvent, Write
        from engram.kernel.ids import agent_stream

        self.require_agent(agent)
        ts = to_us(req.ts, max_ahead_s=self.config.limits.max_future_seconds)
        self.sync_settings(agent, ts)
        event = MoodChanged(valence=req.valence, arousal=req.arousal, dominance=req.dominance, reason=req.reason)
        appended = self.rt.append([Write(agent_stream(agent), agent, (NewEvent(event, ts),))])[0]
        return t.EventResponse(seq=appended.seqs[0], position=self.position(agent, appended.seqs))

    def mood_history(self, agent: str) -> t.Table:
        """The MoodChanged history (empty: the agent.config.json baseline applies)."""
        self.require_agent(agent)
        return table(*self.sql_rows("SELECT seq, ts, valence, arousal, dominance, reason FROM ev_mood_changed "
                                    "WHERE agent = ? ORDER BY seq", [agent]))

    # ------------------------------------------------------------------ background processes

    def observation_logs(self, agent: str) -> t.Table:
        """One row per observation log: tokens, notes, compression, what is active, buffered, reflected."""
        self.require_agent(agent)
        return table(*self.sql_rows(OBSERVATION_LOGS, [agent]))

    def observation_notes(self, agent: str, discussion: str) -> t.Table:
        self.require_agent(agent)
        validate_discussion(discussion)
        return table(*self.sql_rows(OBSERVATION_NOTES, [agent, discussion, discussion]))

    def observation_log(self, agent: str, discussion: str) -> t.ObservationLogResponse:
        """The discussion's observation log as rendered (or the agent's, with Observer scope "agent")."""
        from engram.config.home import ProjectionPaths

        self.require_agent(agent)
        validate_discussion(discussion)
        paths = ProjectionPaths(self.home.projections_dir)
        for path in (paths.discussion_file(agent, discussion, "_observations.md"), paths.agent_dir(agent) / "observations.md"):
            if path.exists():
                return t.ObservationLogResponse(agent=agent, discussion=discussion, path=str(path), markdown=path.read_text())
        return t.ObservationLogResponse(agent=agent, discussion=discussion, path=None, markdown=None)

    def recent_observations(self, agent: str, discussion: str, *, limit: int = 10) -> t.RecentObservations:
        """The Observer's latest notes for a discussion (and the agent-wide ones), rendered as the log renders them."""
        from engram.memory.context.hybrid import render_notes

        self.require_agent(agent)
        validate_discussion(discussion)
        check_count("limit", limit, t.MAX_ROWS)
        records = self.rt.read(agent, types=["ObservationsRecorded"], limit=None)
        notes = [n for r in records if r.agent == agent and r.stream in (discussion, f"agent:{agent}")
                 and isinstance(r.event, ObservationsRecorded) for n in r.event.notes]  # every one: read by type
        notes = sorted(notes, key=lambda n: (n.observed_us, n.note_id))[-limit:]
        return t.RecentObservations(agent=agent, discussion=discussion, notes=len(notes),
                                    markdown=render_notes(notes) if notes else "")

    def consolidations(self, agent: str, *, include_idle: bool = False, limit: int = 50) -> t.ConsolidationsResponse:
        """What each consolidation run did (latest `limit`), and totals over every run."""
        self.require_agent(agent)
        check_count("limit", limit, t.MAX_ROWS)
        where = "agent = ?" + ("" if include_idle else f" AND {BUSY}")
        names, rows = self.sql_rows(
            f"SELECT * FROM (SELECT seq, {CONSOLIDATION_COLUMNS} FROM ev_consolidation_ran WHERE {where} "
            f"ORDER BY seq DESC LIMIT {int(limit)}) ORDER BY seq", [agent])
        _, totals = self.sql_rows(
            f"SELECT count(*), count(*) FILTER (WHERE {BUSY}), sum(pruned), sum(edges), sum(schemas), sum(conflicts), "
            "sum(reinforced), round(avg(duration_ms), 2) FROM ev_consolidation_ran WHERE agent = ?", [agent])
        keys = ("runs", "busy", "pruned", "edges", "schemas", "conflicts", "reinforced", "avg_ms")
        return t.ConsolidationsResponse(agent=agent, runs=table(names[1:], [r[1:] for r in rows]),
                                        totals=dict(zip(keys, totals[0])) if totals and totals[0][0] else {"runs": 0})
