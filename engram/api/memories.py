"""One memory at a time: get, edit and delete a single trace (or fact), chunk memory or vector memory.

An edit is a `MemoryEdited` event in the memory's stream: every fold shows the new form from its position on (recall
finds the new text; replay folds the same). A delete is a forget (`engram.shard.forget.forget` with a memory): a
`MemoryDeleted` marker, then the memory's events are erased from the log file, the projections rebuilt and the
embedding cache and policy state cleared of its text, with the guarantees of forgetting a discussion.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.clock import iso, now_us
from engram.api.errors import error
from engram.events.envelope import NewEvent, Write
from engram.kernel.ids import validate_agent, validate_id

if TYPE_CHECKING:
    from engram.api.jobs import JobProgress

# How long an edit waits for the projections to show it before answering (they fold in milliseconds).
EDIT_VISIBLE_S = 30.0

_QUERIES = {
    "trace": ("SELECT trace_id, stream, scope, scope_id, content, NULL, metadata, category, epoch_us(encoded_at), "
              "active, last_seq FROM memory_traces WHERE agent = ? AND trace_id = ?"),
    "chunk": ("SELECT memory_id, discussion_id, 'discussion', discussion_id, summary, NULL, "
              "(line::JSON->'metadata')::VARCHAR, '', epoch_us((line::JSON->>'created_at')::TIMESTAMPTZ), true, "
              "created_seq FROM discussion_memories WHERE agent = ? AND memory_id = ?"),
    "vector": ("SELECT memory_id, discussion_id, 'discussion', discussion_id, summary, title, metadata, '', "
               "epoch_us(created_ts), true, created_seq FROM vector_memories WHERE agent = ? AND memory_id = ?"),
}


def event_kind(kind: str) -> str:
    """The kind the log records: a fact is a trace."""
    return "trace" if kind == "fact" else kind


class MemoryOps(ApiCore):
    def memory(self, agent: str, kind: str, memory_id: str) -> t.MemoryItem:
        """One memory of `agent` as it is now; 404 `not_found` when it has none of that kind and id."""
        self.require_agent(agent)
        kind = self._memory_kind(kind)
        validate_id(memory_id, "memory id")
        _, rows = self.sql_rows(_QUERIES[event_kind(kind)], [agent, memory_id])
        if not rows:
            raise error("not_found", f"agent {agent!r} has no {kind} memory {memory_id!r}")
        mid, stream, scope, scope_id, content, title, metadata, category, created_us, active, seq = rows[0]
        return t.MemoryItem(
            kind=kind, memory_id=mid, agent=agent, discussion=scope_id if scope == "discussion" else None,
            content=content, title=title, metadata=json.loads(metadata) if metadata else {}, category=category or "",
            created=iso(created_us) if created_us is not None else "", active=bool(active), seq=seq)

    def edit_memory(self, agent: str, kind: str, memory_id: str, req: t.MemoryEdit) -> t.MemoryEdited:
        """A new text and/or metadata for one memory, recorded as `MemoryEdited` in its stream; answers once the
        projections show it (recall and search find the new form from then on)."""
        from engram.events.memory_edits import MemoryEdited

        if req.content is None and req.metadata is None and req.title is None:
            raise error("invalid_request", "an edit needs `content`, `title` (a vector memory's), `metadata` or more")
        if req.content is not None and not req.content.strip():
            raise error("invalid_request", "`content` is empty")
        if req.title is not None and event_kind(kind) != "vector":
            raise error("invalid_request", f"`title`: a {kind} memory has no title (a vector memory has)")
        before = self.memory(agent, kind, memory_id)
        stream = self._memory_stream(agent, event_kind(before.kind), memory_id)
        embedding = model = ""
        if (req.content is not None or req.title is not None) and event_kind(kind) == "vector":
            embedding, model = self._vector_embedding(agent, memory_id, req.title or before.title or "",
                                                      req.content if req.content is not None else before.content)
        event = MemoryEdited(kind=event_kind(kind), memory_id=memory_id, content=req.content, title=req.title,
                             metadata=dict(req.metadata) if req.metadata is not None else None, embedding=embedding,
                             embedding_model=model)
        try:
            event.check()
        except ValueError as exc:
            raise error("invalid_request", str(exc)) from None
        (appended,) = self.rt.append([Write(stream=stream, agent=agent, events=(NewEvent(event=event, ts_us=now_us()),))])
        seq = appended.seqs[-1]
        self.note_streams([Write(stream=stream, agent=agent, events=())])
        self._wait_folded(agent, seq)
        return t.MemoryEdited(memory=self.memory(agent, kind, memory_id), seq=seq)

    def delete_memory(self, agent: str, kind: str, memory_id: str, req: t.ForgetRequest) -> t.Job:
        """Erase one memory (a forget): `MemoryDeleted` recorded, its events erased from the log file, every
        projection rebuilt without it. Checked before the job starts; the job does the erasing."""
        self.memory(agent, kind, memory_id)  # 404 before anything is recorded
        target = (event_kind(kind), memory_id)

        def work(progress: JobProgress) -> dict[str, Any]:
            try:
                with self.source_cache().changing():
                    report = self.rt.forget(agent, None, req.reason, memory=target)
            except LookupError as exc:
                raise error("not_found", str(exc)) from None
            finally:
                self.forget_histories()
                self._files.pop(agent, None)
            progress.set(1)
            return report

        return self.jobs.start("forget", 1, "erasures", work)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _memory_kind(kind: str) -> t.MemoryKind:
        if kind not in ("trace", "fact", "chunk", "vector"):
            raise error("invalid_request", f"unknown memory kind {kind!r}: use trace, fact, chunk or vector")
        return cast(t.MemoryKind, kind)  # one of them: checked above

    def _memory_stream(self, agent: str, kind: str, memory_id: str) -> str:
        """The stream the memory's events live in (where its edits go): the stream of the event that made it."""
        from engram.events.erasure import MEMORY_CREATED

        created, field = MEMORY_CREATED[kind]
        _, rows = self.sql_rows(
            f"SELECT stream FROM events WHERE agent = ? AND type = ? AND json_extract_string(payload, '$.{field}') = ? "
            "ORDER BY seq LIMIT 1", [agent, created, memory_id])
        if not rows:
            raise error("not_found", f"agent {agent!r} has no {kind} memory {memory_id!r}")
        return str(rows[0][0])

    def _vector_embedding(self, agent: str, memory_id: str, title: str, summary: str) -> tuple[str, str]:
        """The vector of a vector memory's new form, made as the Summarizer makes one (its title, summary and key
        phrases: `embedding_text`), recorded with the edit so that replay embeds nothing."""
        from engram.memory.discussion.summarizer import embedding_text
        from engram.memory.discussion.vectors import encode_vector
        from engram.providers.llm.types import StructuredMemory

        _, rows = self.sql_rows("SELECT key_phrases FROM vector_memories WHERE agent = ? AND memory_id = ?",
                                [agent, memory_id])
        phrases = tuple(rows[0][0] or ()) if rows else ()
        text = embedding_text(StructuredMemory(title=title, summary=summary, key_phrases=phrases))
        embedder = self.query_embedder()
        return encode_vector(embedder.embed([text])[0]), embedder.name

    def _wait_folded(self, agent: str, seq: int) -> None:
        """Until the agent's shard's projections have folded `seq` (read-your-writes for the edit's answer)."""
        self.rt.settle()
        if not self.rt.shard_call(self.rt.shard_of(validate_agent(agent)), "wait_projections", seq, EDIT_VISIBLE_S):
            raise error("runtime_unavailable", f"the projections have not folded the edit at seq {seq} after "
                        f"{EDIT_VISIBLE_S:.0f}s; it is recorded and will show")
