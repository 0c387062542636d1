"""MemoryTraces in SQL, and each agent's HNSW trace index on disk.

Tables (the fold of the cognitive events, `engram.memory.cognitive.book.TraceBook`):
- `memory_traces`: one row per trace with its content, provenance, emotional context, decay and
  spaced-repetition state, graph links, active / soft-deleted, and `context` (what it is indexed
  with besides its content: for a reply, the question it answers);
- `trace_edges`: the typed weighted edges of the trace graph;
- `trace_changes`: a trace's life, one row per event that changed it (encoded, retrieved,
  reinforced, verified, pruned, superseded) with its strength before and after.
View `trace_strength`: every trace's Ebbinghaus strength as of its agent's latest event time.

Files: `agents/<agent>/traces.hnsw` (hnswlib, items added single-threaded in log order, so replay
writes the same bytes) and `traces.hnsw.json` (label order, deleted ids, model, the seq it reflects, and
`text`: what the vectors embed, `engram.memory.cognitive.memory.VECTOR_TEXT`).

Memory is bounded by agents in use, not agents known. The fold keeps an agent's memory (its book, links,
keyword and vector index) only while it is among the `ray.shardResidentAgents` most recently folded agents.
Past that, the least recently used are let go once a checkpoint has written them, since what was let go
is exactly what the checkpoint wrote: the agent's rows and its index files. When the agent's events come
again its memory is read back from them (`_restore`), as a restart does, so the rows and files written
afterwards are the ones an unbounded fold writes (`tests/projections/test_trace_residency.py`). Nothing is
loaded at start either: an agent's memory is read back when its first event after the start comes.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import ClassVar

import duckdb
import numpy as np
import pyarrow as pa

from engram.events.cognitive import TraceEncoded
from engram.events.envelope import Recorded
from engram.kernel import records
from engram.kernel.files import atomic_write
from engram.memory.cognitive.book import INTERESTS, Change
from engram.memory.cognitive.graph import Edge
from engram.memory.cognitive.indexing import asks
from engram.memory.cognitive.memory import AgentMemory
from engram.memory.cognitive.model import MemoryTrace
from engram.projections.base import TableProjection
from engram.providers.search.hnsw import HnswIndex
from engram.providers.services import embedder_of

INDEX_FILE = "traces.hnsw"
INDEX_META = "traces.hnsw.json"
# Agents whose memory the fold keeps (`ray.shardResidentAgents`, None: this). Reading one back costs a query
# of its rows and a load of its index file (a few ms), against a few hundred KB held per agent.
DEFAULT_RESIDENT_AGENTS = 1024

# Derived from the records' declarations (`engram.kernel.records`): a trace's row is `MemoryTrace`, an edge's and a
# change's are `Edge` and `Change` after their agent.
_AGENT_SQL = [("agent", "VARCHAR")]


class TraceProjection(TableProjection):
    name = "traces"
    # 2: the index vectors embed the question and the content, not the day (`engram.memory.cognitive.indexing`).
    # 3: the spacing effect changes how a retrieval reinforces (engram.memory.cognitive.decay.reinforce).
    # 4: a reply's index vector combines the embeddings of its content and of its question (engram.memory.cognitive.indexing).
    # 5: validity in time (valid_from, valid_to, superseded_by).
    # 6: `context_message_ids` reaches the table (a trace read back after an eviction or a restart kept it nowhere).
    # A home folded by an older version folds again.
    version = 6
    tables: ClassVar[tuple[str, ...]] = ("memory_traces", "trace_edges", "trace_changes")
    interests = INTERESTS

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(records.ddl("memory_traces", MemoryTrace, "PRIMARY KEY (trace_id)"))
        db.execute(records.ddl("trace_edges", Edge, "PRIMARY KEY (agent, src, dst, kind)", before=_AGENT_SQL))
        db.execute(records.ddl("trace_changes", Change, before=_AGENT_SQL))
        # The resident agents' memories, least recently folded first; the others are in the tables and files.
        self.memories: OrderedDict[str, AgentMemory] = OrderedDict()
        self._saved_index: dict[str, int] = {}  # resident agent -> index seq last written
        self.restored = 0  # memories read back from the tables and files (after a start or an eviction)
        self.evicted = 0  # memories let go after a checkpoint

    @property
    def embedder(self):
        return embedder_of(self.ctx.services)

    @property
    def resident_agents(self) -> int:
        config = self.ctx.services.get("config")
        return getattr(getattr(config, "ray", None), "shard_resident_agents", None) or DEFAULT_RESIDENT_AGENTS

    def _memory(self, agent: str) -> AgentMemory:
        if agent not in self.memories:
            self._restore([agent])
        self.memories.move_to_end(agent)  # most recently used
        return self.memories[agent]

    def apply(self, rec: Recorded) -> None:
        self._memory(rec.agent).apply_batch([rec], self._embed)

    def apply_batch(self, batch: list[Recorded]) -> None:
        by_agent: dict[str, list[Recorded]] = {}
        for rec in self.to_fold(batch):
            by_agent.setdefault(rec.agent, []).append(rec)
        missing = [agent for agent in by_agent if agent not in self.memories]
        if missing:
            self._restore(missing)  # one query for every agent of the batch that is not resident
        embed = self._embedded(by_agent)
        for agent, recs in by_agent.items():
            self._memory(agent).apply_batch(recs, embed)
        if batch:
            self.position = max(self.position, batch[-1].seq)

    def _embed(self, texts: list[str]):
        return self.embedder.embed(texts)

    def _embedded(self, by_agent: dict[str, list[Recorded]]):
        """An `embed` for the memories of `by_agent` whose vectors of the batch's new traces are computed in one call
        (the home's embedder is another process: a call per agent waited behind its other work, agent after agent)."""
        texts: dict[str, None] = {}
        for agent, recs in by_agent.items():
            mem = self.memories[agent]
            for r in recs:
                if isinstance(r.event, TraceEncoded) and r.event.trace_id not in mem.book.traces:
                    texts.update(dict.fromkeys(mem.embedded_parts(r.event.content, r.event.context)))
        if not texts:
            return self._embed
        vectors = dict(zip(texts, np.asarray(self._embed(list(texts)), dtype=np.float32)))

        def embed(wanted: list[str]) -> np.ndarray:
            missing = [t for t in wanted if t not in vectors]
            if missing:
                vectors.update(zip(missing, np.asarray(self._embed(missing), dtype=np.float32)))
            return np.stack([vectors[t] for t in wanted]) if wanted else np.zeros((0, self.embedder.dim), np.float32)

        return embed

    # ------------------------------------------------------------------ writing

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        """Every agent's changes in a few statements, whatever the number of agents (issue 27): one DELETE and one
        Arrow insert per table for all of them, not five statements per agent with changes (each a scan of its
        table: at 1,000 agents a checkpoint ran thousands). The rows inserted are those of the fold agent after
        agent, in the same order (agents sorted, each one's as before); the deletes come first, each keyed by its
        agent, so no agent's delete reaches another's rows."""
        gone: list[str] = []  # traces rewritten or forgotten (a trace id is the table's key)
        traces: list[MemoryTrace] = []
        forgotten_changes: dict[str, list[str]] = {"agent": [], "trace_id": []}
        removed: dict[str, list[str]] = {"agent": [], "src": [], "dst": [], "kind": []}
        edge_agents: list[str] = []
        edges: list[Edge] = []
        change_agents: list[str] = []
        changes: list[Change] = []
        for agent in sorted(self.memories):
            mem = self.memories[agent]
            agent_changes, dirty, forgotten, dirty_edges, removed_edges = mem.book.take_changes()
            gone += sorted(dirty | forgotten)
            traces += [mem.book.traces[t] for t in sorted(dirty) if t in mem.book.traces]
            for t in sorted(forgotten):
                forgotten_changes["agent"].append(agent)
                forgotten_changes["trace_id"].append(t)
            for s, d, k in sorted(dirty_edges | removed_edges):
                for column, value in zip(("agent", "src", "dst", "kind"), (agent, s, d, k)):
                    removed[column].append(value)
            kept = [mem.book.graph.edges[k] for k in sorted(dirty_edges) if k in mem.book.graph.edges]
            edges += kept
            edge_agents += [agent] * len(kept)
            changes += agent_changes
            change_agents += [agent] * len(agent_changes)
        if gone:
            records.delete_keys(db, "memory_traces", {"trace_id": gone})
        records.delete_keys(db, "trace_changes", forgotten_changes)
        records.delete_keys(db, "trace_edges", removed)
        records.insert_arrow(db, "memory_traces", records.arrow_table(MemoryTrace, traces))
        records.insert_arrow(db, "trace_edges", records.arrow_table(
            Edge, edges, before=[("agent", pa.string(), edge_agents)]))
        records.insert_arrow(db, "trace_changes", records.arrow_table(
            Change, changes, before=[("agent", pa.string(), change_agents)]))
        for agent in sorted(self.memories):
            mem = self.memories[agent]
            if self._saved_index.get(agent) != mem.index_seq:
                self._save_index(agent, mem)

    def _save_index(self, agent: str, mem: AgentMemory) -> None:
        folder = self.ctx.paths.agent_dir(agent)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{INDEX_FILE}.saving"
        mem.index.save(tmp)
        atomic_write(folder / INDEX_FILE, tmp.read_bytes())
        tmp.unlink()
        deleted = sorted(k for k in mem.index.ids if k not in mem.index)
        meta = {"model": self.embedder.name, "dim": mem.dim, "seq": mem.index_seq, "ids": mem.index.ids, "deleted": deleted,
                "deletions": [list(d) for d in mem.index.deletions], "text": mem.vector_text}
        atomic_write(folder / INDEX_META, (json.dumps(meta, sort_keys=True, separators=(",", ":")) + "\n").encode())
        self._saved_index[agent] = mem.index_seq

    def written(self) -> None:
        self._evict()

    def _evict(self) -> None:
        """Let go of the least recently used memories past `resident_agents`: the checkpoint just wrote all of
        them (rows committed, index files saved), so reading them back gives what is let go."""
        cap = self.resident_agents
        while len(self.memories) > cap:
            agent, _ = self.memories.popitem(last=False)
            self._saved_index.pop(agent, None)
            self.evicted += 1

    # ------------------------------------------------------------------ restart and eviction

    def _restore(self, agents: list[str]) -> None:
        """Make `agents` resident: each memory read back from its rows and index files as the last checkpoint
        wrote them (an agent with neither is new: an empty memory)."""
        db = self.ctx.db
        cursor = db.execute(
            f"SELECT {records.select_list(MemoryTrace)} FROM memory_traces WHERE agent IN (SELECT unnest(?)) "
            "ORDER BY last_seq, trace_id", [agents]
        )
        names = [d[0] for d in cursor.description]
        traces = records.from_rows(MemoryTrace, names, cursor.fetchall())
        edges: dict[str, list[Edge]] = {}
        if traces:
            cursor = db.execute(
                f"SELECT agent, {records.select_list(Edge)} FROM trace_edges "
                "WHERE agent IN (SELECT unnest(?)) ORDER BY agent, created_seq, src, dst, kind", [agents]
            )
            rows = cursor.fetchall()
            names = [d[0] for d in cursor.description]
            for row, edge in zip(rows, records.from_rows(Edge, names, rows)):
                edges.setdefault(row[0], []).append(edge)
        traces_by_agent: dict[str, list[MemoryTrace]] = {}
        for t in traces:
            # What is derived, as the fold derives it: whether it only asks; its validity from its encoding (closed again
            # by `close_validity` below, from the traces that contradict it).
            t.asks, t.valid_from_us, t.valid_to_us, t.superseded_by = asks(t.content), t.encoded_us, None, ""
            traces_by_agent.setdefault(t.agent, []).append(t)
        for agent in agents:
            self._restore_agent(agent, traces_by_agent.get(agent, []), edges.get(agent, []))
        self.restored += len(agents)

    def _restore_agent(self, agent: str, traces: list[MemoryTrace], edges: list[Edge]) -> None:
        meta_path = self.ctx.paths.agent_dir(agent) / INDEX_META
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
        if not traces and (meta is None or meta["ids"] or meta["seq"] > self.position):
            # A new agent; or index files the tables do not back: left from before the tables were dropped
            # (another version folds again from the start), or written by a checkpoint that did not commit.
            # (No rows with an empty index written at or before the position: every trace was forgotten.)
            self.memories[agent] = AgentMemory(agent, self.embedder.dim, track=True)
            return
        index = None
        if meta is not None and meta["ids"]:
            index = HnswIndex.load(self.ctx.paths.agent_dir(agent) / INDEX_FILE, meta["dim"], meta["ids"], set(meta["deleted"]),
                                   meta.get("deletions"))
        mem = self.memories[agent] = AgentMemory(agent, meta["dim"] if meta else self.embedder.dim, track=True, index=index)
        order = {tid: i for i, tid in enumerate(meta["ids"])} if meta else {}
        for t in sorted(traces, key=lambda t: (order.get(t.trace_id, len(order)), t.encoded_us, t.trace_id)):
            mem.book.traces[t.trace_id] = t
            if t.active:
                for name in t.entities:
                    from engram.memory.cognitive.memory import entity_key

                    mem.by_entity[entity_key(name)].append(t.trace_id)
                mem.last_in_stream[t.stream] = (t.trace_id, t.encoded_us)
            mem._link_answer(t)
            mem.book.last_seq = max(mem.book.last_seq, t.last_seq)
            mem.book.latest_encoded_us = max(mem.book.latest_encoded_us, t.encoded_us)
        for t in mem.book.traces.values():
            mem.book.close_validity(t)  # derived, as the fold derives it
        mem.restore_lexical()
        for e in edges:
            edge = mem.book.graph.add(e.src, e.dst, e.kind, e.weight, e.created_seq)
            if edge is not None:
                edge.updated_seq, edge.strengthened = e.updated_seq, e.strengthened
        if meta is not None:
            mem.index_seq = meta["seq"]
            self._saved_index[agent] = meta["seq"]

    # ------------------------------------------------------------------ SQL

    @classmethod
    def sql_views(cls, paths) -> dict[str, str]:
        return {
            "trace_strength": (
                "SELECT t.agent, t.trace_id, t.content, t.active, t.encoding_strength, t.stability_s, t.last_access, "
                "a.as_of, t.encoding_strength * exp(-greatest(0, epoch_us(a.as_of) - epoch_us(t.last_access)) / 1e6 "
                "/ t.stability_s) AS strength FROM memory_traces t JOIN (SELECT agent, max(ts) AS as_of FROM events "
                "GROUP BY agent) a USING (agent)"
            ),
            # What each trace says and when it was true (issue 24): `WHERE valid_from <= T AND (valid_to IS NULL OR
            # valid_to > T)` is what was true at T; `true_now` what recall answers by default.
            "trace_validity": (
                "SELECT agent, trace_id, content, category, encoded_at AS learned_at, valid_from, valid_to, superseded_by, "
                "valid_to IS NULL AS true_now, active, deleted_reason FROM memory_traces"
            ),
        }

