"""One memory at a time: a user's edit of a memory, and its deletion.

A memory is a trace (a fact auto-ingest kept is a trace too), a chunk memory (a line of `<id>_memories.jsonl`)
or a vector memory (a row of `<id>_vector_memory.db`). Both events go to the stream the memory lives in (its
discussion, or `agent:<agent>` for an agent-wide trace), so forgetting that discussion forgets its edits too.

- `MemoryEdited` supersedes the memory's text (a vector memory's title, and its metadata): every fold of the memory shows the new form
  from here on; the old form stays in the log, and replay folds both in order.
- `MemoryDeleted` is a forget marker, like `DiscussionForgotten`: it holds nothing but the memory's kind and id.
  The shard erases the memory's events (its creation, its edits, what they caused, agent-wide events quoting
  its text) from the log file and rebuilds every projection (`engram.events.erasure.plan_memory`).
"""

from __future__ import annotations

from engram.events.base import Event

MEMORY_KINDS = ("trace", "chunk", "vector")
# What `metadata` may hold: a flat object of text to text, this many characters in all.
MAX_MEMORY_METADATA_CHARS = 16_384
MAX_MEMORY_TEXT_CHARS = 100_000
MAX_MEMORY_TITLE_CHARS = 1_000


def check_metadata(metadata: dict[str, str]) -> None:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("metadata must map text to text (a flat JSON object of strings)")
    size = sum(len(k) + len(v) for k, v in metadata.items())
    if size > MAX_MEMORY_METADATA_CHARS:
        raise ValueError(f"metadata of {size} characters, over the limit of {MAX_MEMORY_METADATA_CHARS}")


class MemoryEdited(Event, tag="MemoryEdited", frozen=True):
    """A user's new form of one memory: `content` replaces its text, `metadata` (when not None) its metadata."""

    kind: str  # trace | chunk | vector
    memory_id: str
    content: str | None = None  # None: the text stays
    title: str | None = None  # a vector memory's new title; None: the title stays
    metadata: dict[str, str] | None = None  # None: the metadata stays
    # A vector memory's new embedding (as `VectorMemoryStored.embedding`), recorded so replay needs no embedder.
    embedding: str = ""
    embedding_model: str = ""
    # A vector memory said again from edited messages (the Summarizer's): its new entities and key phrases (with the
    # title above; None: they stay).
    entities: tuple[str, ...] | None = None
    key_phrases: tuple[str, ...] | None = None

    def check(self) -> None:
        if self.kind not in MEMORY_KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(MEMORY_KINDS)}")
        if not self.memory_id:
            raise ValueError("memory_id is empty")
        if self.content is not None and not self.content.strip():
            raise ValueError("content is empty")
        if self.content is not None and len(self.content) > MAX_MEMORY_TEXT_CHARS:
            raise ValueError(f"content of {len(self.content)} characters, over the limit of {MAX_MEMORY_TEXT_CHARS}")
        if self.title is not None and (self.kind != "vector" or not self.title.strip()):
            raise ValueError("title is a vector memory's, and not empty" if self.kind == "vector"
                             else f"a {self.kind} memory has no title (a vector memory has)")
        if self.title is not None and len(self.title) > MAX_MEMORY_TITLE_CHARS:
            raise ValueError(f"title of {len(self.title)} characters, over the limit of {MAX_MEMORY_TITLE_CHARS}")
        if self.metadata is not None:
            check_metadata(self.metadata)


class MemoryDeleted(Event, tag="MemoryDeleted", frozen=True):
    """One memory forgotten: its text is erased from the log and every projection (a forget marker)."""

    kind: str
    memory_id: str
    reason: str = ""

    def check(self) -> None:
        if self.kind not in MEMORY_KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(MEMORY_KINDS)}")
        if not self.memory_id:
            raise ValueError("memory_id is empty")
