"""The request and response types of every API operation.

msgspec Structs, not pydantic models: the events are msgspec already; the types cost a few
milliseconds to import (the CLI and `engram.Client` import them, and a command must start in well
under half a second); one encoder/decoder pair per type is fast on the server's hot path; and
`msgspec.json.schema_components` gives the OpenAPI document its schemas. Only msgspec is imported
here, so any client can use these types.

Times on the wire are ISO-8601 strings with a zone (`2024-05-01T09:00:00Z`). Read models that the
domain already renders as JSON objects (a chunk memory record, an assembled context, a compaction)
travel as such objects inside typed envelopes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from engram.kernel.describe import doc
from engram.memory.cognitive.hit import HitShown
from engram.memory.discussion.lines import ChunkMemory, RollingSummary

# The id rules of engram.kernel.ids (letters, digits, '_', '-', '.'; 1–128 characters; no leading dot).
Id = Annotated[str, Meta(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$",
                         description="an agent or discussion id: letters, digits, '_', '-' and '.'")]
Unit = Annotated[float, Meta(ge=-1.0, le=1.0)]
# How many results a request may ask for: ranked hits (recall, search; REST and MCP alike), and rows of a listing
# (traces, consolidations, observations, memories).
MAX_RESULTS = 1000
MAX_ROWS = 1_000_000
Role = Literal["user", "assistant", "system", "tool"]
SearchMode = Literal["keyword", "semantic", "hybrid"]
# A user's labels on a memory: a flat object of text, at most 64 keys.
Metadata = Annotated[dict[Annotated[str, Meta(min_length=1, max_length=256)], Annotated[str, Meta(max_length=16_384)]],
                     Meta(max_length=64)]
Factor = Literal["strength", "similarity", "recency", "emotional", "activation", "importance"]


class Model(Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every type: keyword fields, unknown fields refused (a typo is an error, not a no-op)."""


# --------------------------------------------------------------------------- errors

class ErrorBody(Model, kw_only=True):
    code: Annotated[str, doc(
        "engram's stable error code (`engram.api.errors.CODES`: invalid_id, invalid_request, unknown_agent, "
        "not_found, …); a program branches on it.")]
    message: Annotated[str, doc("What was refused and what to fix, in one line.")]
    type: Annotated[str | None, doc(
        "In an HTTP answer: OpenAI's error type (invalid_request_error, server_error, …), for OpenAI "
        "clients.")] = None
    param: Annotated[str | None, doc(
        "In an HTTP answer refusing one request field: its name (OpenAI's `param`, e.g. `tools`).")] = None


class ErrorResponse(Model, kw_only=True):
    error: Annotated[ErrorBody, doc("The refusal: its code and message.")]


# --------------------------------------------------------------------------- system

class Health(Model, kw_only=True):
    """`GET /v1/health` (no key): the server is up. Nothing else: which home it serves and its instance token are
    never on an open route (a command recognises its server through the home's instance.json, `InstanceProof`)."""

    service: Annotated[Literal["engram"], doc("Always `engram`.")] = "engram"
    status: Annotated[Literal["up"], doc("Always `up`: the server answers.")] = "up"


class InstanceProof(Model, kw_only=True):
    """`GET /v1/instance?challenge=…` (no key): HMAC-SHA256 keyed with the server's instance token over the home and
    the caller's challenge (`engram.server.instance.proof`). Whoever can read the home's instance.json computes the
    same value and so knows that the server at that URL is the home's; nobody else learns anything from it."""

    proof: Annotated[str, doc("Hex HMAC-SHA256 of the home and the challenge, keyed with the server's instance token.")]


class ServerInfo(Model, kw_only=True):
    """`GET /v1/server` (a key for every agent): the home this server serves, its pid, version and runtime."""

    home: Annotated[str, doc("The home directory this server serves.")]
    pid: Annotated[int, doc("The server's process id.")]
    version: Annotated[str, doc("engram's version.")]
    runtime: Annotated[str, doc("What runs the actors: `ray` (local or a cluster) or the in-process runner.")]


class FoldFailure(Model, kw_only=True):
    seq: Annotated[int, doc("The log position of the event the projection could not fold.")]
    projection: Annotated[str, doc("The projection that left it out.")]
    type: Annotated[str, doc("The event's type tag.")]
    error: Annotated[str, doc("Why it could not be folded.")]


class UnfinishedForget(Model, kw_only=True):
    marker_seq: Annotated[int, doc("The log position of the forget's marker event.")]
    streams: Annotated[list[str], doc("The streams (discussions, `agent:<id>`) still to be erased.")]


class ShardStatus(Model, kw_only=True):
    shard: Annotated[int, doc("The shard's number.")]
    head: Annotated[int, doc("The shard's last log position (seq).")]
    streams: Annotated[int, doc("How many streams (discussions and agent streams) the shard's log holds.")]
    projections: Annotated[dict[str, int], doc("Each projection -> the log position it has folded up to.")]
    projection_lag: Annotated[int, doc("Events the slowest projection has still to fold (head minus its position).")]
    events_by_type: Annotated[dict[str, int], doc("Each event type -> how many events of it the log holds.")]
    consumers: Annotated[dict[str, int], doc(
        "Each policy (summarizer, observer, …) -> the log position it has reacted to.")] = {}
    consumer_errors: Annotated[dict[str, str], doc("Each policy -> its last error, when it failed.")] = {}
    projection_error: Annotated[str | None, doc("The projections' last error, if any.")] = None
    node: Annotated[str | None, doc("Where the shard's actor runs (and its files are).")] = None
    actors: Annotated[dict[str, str], doc("Each actor of the shard (the shard's, its policies') -> its node.")] = {}
    consumers_rebuilt: Annotated[dict[str, str], doc(
        "Policies whose snapshot was not restored (another state version, damaged) and rebuild from the log, and"
        " why.")] = {}
    fold_failed: Annotated[list[FoldFailure], doc(
        "Events a projection could not fold, left out of it (FoldFailed records; SQL: fold_failed).")] = []
    unfinished_forgets: Annotated[list[UnfinishedForget], doc(
        "Forgets recorded but not (completely) erased: completed when the shard next starts.")] = []
    recovered: Annotated[list[str], doc("What the shard's start found broken or unfinished, and did about it.")] = []
    resident_agents: Annotated[int | None, doc(
        "Agents whose cognitive memory the shard's traces projection holds now (at most "
        "`ray.shardResidentAgents`; the others are read back from their rows and index files when their events"
        " come).")] = None
    projection_timings: Annotated[dict[str, dict[str, float]], doc(
        "Seconds each projection spent folding and checkpointing since the shard started, and events folded.")] = {}


class ReembedCounts(Model, kw_only=True):
    traces: Annotated[int, doc("Memory traces to re-embed.")] = 0
    discussion_memories: Annotated[int, doc("Chunk and vector memories of discussions to re-embed.")] = 0


class EmbedderStatus(Model, kw_only=True):
    """The embedder the home serves with, and (when engram.json names another) what `engram reindex` re-embeds."""

    serving: Annotated[str, doc(
        "The embedder the home's vectors are made by (`engram.config.serving_embedder.embedder_key`).")]
    configured: Annotated[str, doc("The one engram.json names.")]
    reindex_needed: Annotated[bool, doc(
        "True when engram.json names another embedder than the one the vectors were made by: `engram reindex`"
        " (`POST /v1/reindex`) re-embeds.")] = False
    to_reembed: Annotated[dict[str, ReembedCounts], doc(
        "Per agent, what the configured embedder must re-embed before the home switches to it.")] = {}


class StatusResponse(Model, kw_only=True):
    home: Annotated[str, doc("The home directory.")]
    mode: Annotated[str, doc("How the server runs (embedded on a local Ray instance, or joined to a cluster).")]
    runtime: Annotated[str, doc("What runs the actors: `ray` or the in-process runner.")]
    shards: Annotated[list[ShardStatus], doc("Each shard's log head, projections and policies.")]
    jobs_running: Annotated[int, doc("Jobs (replay, forget, export, …) running now.")] = 0
    interrupted: Annotated[list[str], doc("Work a restart interrupted, with how to continue it.")] = []
    embedder: Annotated[EmbedderStatus | None, doc(
        "The embedder the home serves with, and what a reindex would re-embed.")] = None


class SqlRequest(Model, kw_only=True):
    query: Annotated[Annotated[str, Meta(min_length=1, max_length=100_000)], doc(
        "One read-only DuckDB SELECT over the log and the projections' views (no writes, attach or external access); "
        "`?` placeholders take `params`.")]
    params: Annotated[list[Any], doc("Values for the query's `?` placeholders, in order.")] = []


class SqlResponse(Model, kw_only=True):
    columns: Annotated[list[str], doc("The result's column names.")]
    rows: Annotated[list[list[Any]], doc("The result's rows, each a list in the order of `columns`.")]
    truncated: Annotated[bool, doc("The query had more rows than the limit; these are the first ones.")] = False


class Table(Model, kw_only=True):
    """Rows of a read model, column names first (what `engram sql`-style commands print)."""

    columns: Annotated[list[str], doc("Column names.")]
    rows: Annotated[list[list[Any]], doc("Rows, each a list in the order of `columns`.")]


# --------------------------------------------------------------------------- writing

class Message(Model, kw_only=True):
    role: Annotated[Role, doc("Who said it: user, assistant, system or tool.")]
    content: Annotated[Annotated[str, Meta(max_length=10_000_000)], doc("The message's text.")]
    ts: Annotated[datetime | None, doc("Event time; default: when the server receives it.")] = None
    name: Annotated[str | None, doc(
        "The speaker's name, when the role is not enough (a tool's name, a user's name).")] = None
    message_id: Annotated[Annotated[str, Meta(min_length=1, max_length=256)] | None, doc(
        "The client's id of the message: sending the same id with the same words again is a no-op (with other "
        "words: 409).")] = None
    metadata: Annotated[dict[str, str], doc("The user's labels on the message: a flat object of strings.")] = {}


class AppendRequest(Model, kw_only=True):
    messages: Annotated[Annotated[list[Message], Meta(min_length=1, max_length=100_000)], doc(
        "The messages to append, in the order they were said.")]


class Conversation(Model, kw_only=True):
    discussion: Annotated[Id, doc("The discussion the messages belong to.")]
    messages: Annotated[Annotated[list[Message], Meta(min_length=1, max_length=100_000)], doc(
        "Its messages, in the order they were said.")]


class AppendConversationsRequest(Model, kw_only=True):
    """Several discussions of one agent at once: they commit together, all or nothing (one file of `engram ingest`)."""

    conversations: Annotated[Annotated[list[Conversation], Meta(min_length=1, max_length=10_000)], doc(
        "Discussions of the agent, each with the messages to append to it.")]


class AppendResult(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion appended to.")]
    appended: Annotated[int, doc("New messages.")]
    duplicates: Annotated[int, doc("Already recorded (recognised by message id).")]
    seqs: Annotated[list[int], doc("The log positions of the messages appended.")]


class AppendResponse(Model, kw_only=True):
    agent: Annotated[str, doc("The agent written to.")]
    results: Annotated[list[AppendResult], doc("What each discussion's append recorded.")]
    settings_recorded: Annotated[int, doc("SettingsChanged events appended because the settings files changed.")] = 0
    position: Annotated[str | None, doc(
        "Where the write is in the log (engram.api.positions): pass it as `after` to a read that must see it.")] = None


class SettingsRecorded(Model, kw_only=True):
    agent: Annotated[str, doc("The agent whose settings files were read.")]
    recorded: Annotated[int, doc("SettingsChanged events appended (0: the files match what the log holds).")]


class ToolFailureRequest(Model, kw_only=True):
    tool: Annotated[Annotated[str, Meta(min_length=1, max_length=256)], doc("The tool that failed (its name).")]
    error: Annotated[Annotated[str, Meta(max_length=100_000)], doc("The error it answered.")]
    arguments: Annotated[Annotated[str, Meta(max_length=100_000)], doc(
        "The arguments it was called with, as text.")] = ""
    call_id: Annotated[Annotated[str, Meta(min_length=1, max_length=256)] | None, doc(
        "The tool call's id, when the model gave one.")] = None
    ts: Annotated[datetime | None, doc(
        "Event time of the failure (ISO 8601); default: when the server receives it.")] = None


class EventResponse(Model, kw_only=True):
    seq: Annotated[int, doc("The log position of the event recorded.")]
    duplicate: Annotated[bool, doc("True when the log held this event already (nothing appended).")] = False
    position: Annotated[str | None, doc(
        "Pass as `after` to a read that must see this write (engram.api.positions).")] = None


class MessageEdit(Model, kw_only=True):
    """A message's new words (`MessageEdited`): every memory made from the old ones is superseded."""

    content: Annotated[Annotated[str, Meta(min_length=1, max_length=1_000_000)], doc(
        "The message's new words (held to limits.maxMessageChars like a new message).")]


class MessageChanged(Model, kw_only=True):
    """A message edited or removed: the event that says so (the old words stay in the log for replay)."""

    discussion: Annotated[str, doc("The discussion the message belongs to.")]
    message_id: Annotated[str, doc("The message's id.")]
    change: Annotated[Literal["edited", "removed"], doc("What happened to the message.")]
    content: Annotated[str | None, doc("The message's words now; null when it was removed.")] = None
    seq: Annotated[int, doc("The log position of the MessageEdited / MessageRemoved event.")]
    duplicate: Annotated[bool, doc("True when the same change was recorded already (nothing new appended).")] = False
    position: Annotated[str | None, doc(
        "Pass as `after` to a read that must see this change (a read-your-writes position token).")] = None


# --------------------------------------------------------------------------- discussion memory

class SearchRequest(Model, kw_only=True):
    keywords: Annotated[Annotated[str, Meta(max_length=10_000)], doc("Separated by \";\" (OR logic).")]
    mode: Annotated[SearchMode, doc(
        "keyword (exact words), semantic (meaning) or hybrid (both, ranked together).")] = "hybrid"
    limit: Annotated[Annotated[int, Meta(ge=1, le=MAX_RESULTS)], doc("How many memories to return, best first.")] = 5
    # Filters (ranked among the memories that pass): the time its messages were said overlaps [since, until); each
    # metadata pair equal in the memory's metadata (`PATCH …/memories/vector/{id}`).
    since: Annotated[datetime | None, doc(
        "Only memories whose messages were said at or after this time (ISO 8601).")] = None
    until: Annotated[datetime | None, doc("Only memories whose messages were said before this time (ISO 8601).")] = None
    metadata: Annotated[Metadata | None, doc(
        "Only memories whose metadata holds each of these key/value pairs.")] = None


class SearchResponse(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion searched.")]
    agent: Annotated[str, doc("The agent whose discussion it is.")]
    mode: Annotated[str, doc("The search mode used.")]
    keywords: Annotated[list[str], doc("The keywords searched for, split at ';'.")]
    limit: Annotated[int, doc("How many hits were asked for.")]
    warnings: Annotated[list[str], doc("What the search could not do as asked (e.g. no vector index yet), in words.")]
    reason: Annotated[str | None, doc("Why there are no hits, when there are none.")]
    hits: Annotated[list[dict[str, Any]], doc("Rank, score, keyword_rank, semantic_rank and the memory's fields.")]
    ms: Annotated[float, doc("How long the search took, in milliseconds.")]


class MemoriesResponse(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion.")]
    agent: Annotated[str, doc("The agent whose discussion it is.")]
    path: Annotated[str, doc("The file the chunk memories are in (`<id>_memories.jsonl`).")]
    exists: Annotated[bool, doc("Whether that file exists yet (no chunk memory before the first chunk closes).")]
    total: Annotated[int, doc("Chunk memories in the file.")]
    memories: Annotated[list[ChunkMemory], doc("The file's records (the last `last` of them when asked).")]


class SummaryResponse(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion.")]
    agent: Annotated[str, doc("The agent whose discussion it is.")]
    path: Annotated[str, doc("The file the rolling summary is in (`<id>_summary.jsonl`).")]
    summary: Annotated[RollingSummary | None, doc("The `<id>_summary.jsonl` record; null before the first one.")]


class DiscussionResponse(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion.")]
    agent: Annotated[str, doc("The agent it belongs to.")]


class CompactionsResponse(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion.")]
    agent: Annotated[str, doc("The agent whose discussion it is.")]
    compactions: Annotated[list[dict[str, Any]], doc(
        "The discussion's compactions (infinite context), oldest first, each as its JSON record.")]
    chain: Annotated[dict[str, Any], doc(
        "The compaction chain: which compaction summarises which, and what the context holds now.")]
    tree: Annotated[list[str], doc("The chain drawn as text lines, one compaction a line.")]


class ContextResponse(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion.")]
    agent: Annotated[str, doc("The agent whose discussion it is.")]
    context: Annotated[dict[str, Any], doc(
        "The assembled context (`engram.memory.context.assemble`'s JSON form): blocks, budgets, turns.")]
    rendered: Annotated[str, doc("The context as a model is given it, as text.")]


class WorkflowRequest(Model, kw_only=True):
    """A WilmerAI workflow: `nodes` (the JSON list), `text` (a workflow file's JSON-with-comments text) or
    `name` (a file in <home>/workflows/): exactly one of them."""

    nodes: Annotated[list[dict[str, Any]] | None, doc(
        "The workflow's nodes (WilmerAI's node objects), when not given as `text` or by `name`.")] = None
    text: Annotated[Annotated[str, Meta(max_length=10_000_000)] | None, doc(
        "The workflow file's text (JSON with comments), when not given as `nodes` or by `name`.")] = None
    name: Annotated[Id | None, doc("A workflow of the home by name, when not given as `nodes` or `text`.")] = None
    source: Annotated[str | None, doc("Where the nodes came from, for messages (a file name).")] = None
    discussion: Annotated[Id | None, doc(
        "The discussion the workflow runs on (its memory nodes read and write it).")] = None
    messages: Annotated[list[Message], doc("Appended to the discussion first.")] = []


class WorkflowNodeResult(Model, kw_only=True):
    index: Annotated[int, doc("The node's position in the workflow (0 first).")]
    id: Annotated[str | None, doc("The node's id, when it has one.")]
    type: Annotated[str, doc("The node's type (QualityMemory, VectorMemorySearch, GetCurrentSummaryFromFile, …).")]
    output: Annotated[str, doc("What the node answered.")]
    info: Annotated[str, doc("What the node did, in words.")]
    ms: Annotated[float, doc("How long the node took, in milliseconds.")]
    background: Annotated[bool, doc("True when the node's work runs behind the answer (memory creation).")]


class WorkflowResponse(Model, kw_only=True):
    discussion: Annotated[str | None, doc("The discussion the workflow ran on, if any.")]
    agent: Annotated[str, doc("The agent it ran for.")]
    appended: Annotated[int, doc("Messages appended to the discussion first.")]
    response: Annotated[str, doc("The workflow's answer (its responder node's output).")]
    response_node: Annotated[str | None, doc("The id of the node that gave the answer.")]
    response_ms: Annotated[float, doc("Milliseconds until the answer.")]
    total_ms: Annotated[float, doc("Milliseconds of the whole run.")]
    nodes: Annotated[list[WorkflowNodeResult], doc("Every node's result, in order.")]


class RegenerateRequest(Model, kw_only=True):
    settings: Annotated[dict[str, Any] | None, doc(
        "The new settings: a _DiscussionId-MemoryFile-Workflow-Settings.json's content (default: the discussion's "
        "settings file).")] = None
    settings_name: Annotated[str, doc(
        "The settings' file name, for messages and the SettingsChanged record.")] = "settings.json"


class BatchRegenerateRequest(Model, kw_only=True):
    """Regenerate discussion memory through the Message Batches API: the whole home, one agent's discussions or
    one discussion, in one job; or resume the job a restart interrupted (`resume`: nothing else may be given)."""

    agent: Annotated[str | None, doc("Only this agent's discussions (default: every agent's).")] = None
    discussion: Annotated[str | None, doc("Only this discussion (with `agent`).")] = None
    resume: Annotated[bool, doc("Continue the batch a restart interrupted instead of starting a new one.")] = False


# --------------------------------------------------------------------------- cognitive memory

class RecallRequest(Model, kw_only=True):
    query: Annotated[Annotated[str, Meta(min_length=1, max_length=100_000)], doc(
        "The question or topic, in plain words.")]
    discussion: Annotated[Id | None, doc(
        "Only memories of this discussion (default: every discussion of the agent).")] = None
    limit: Annotated[Annotated[int, Meta(ge=1, le=MAX_RESULTS)] | None, doc(
        "How many memories to return, best first (default: the agent's retrieval setting).")] = None
    weights: Annotated[dict[Factor, Annotated[float, Meta(ge=0.0, le=1000.0)]] | None, doc(
        "Weights of the ranking's factors (strength, similarity, recency, emotional, activation, importance), "
        "replacing the agent's settings for this recall.")] = None
    hyde: Annotated[bool | None, doc(
        "Use HyDE retrieval (a hypothetical memory embedded with the query) when the plain search finds too "
        "little; default: the agent's setting.")] = None
    similarity: Annotated[Literal["hybrid", "embedding"] | None, doc(
        "How similarity is measured: hybrid (embedding and keywords) or embedding only; default: the agent's "
        "setting.")] = None
    at: Annotated[datetime | None, doc("Event time of the question; default now.")] = None
    as_of: Annotated[datetime | None, doc(
        "What was true at this time: facts valid then (superseded since or not), none learned later; default: "
        "true now.")] = None
    mood: Annotated[tuple[Unit, Unit, Unit] | None, doc(
        "The mood (PAD: pleasure/valence, arousal, dominance, each -1..1) to recall in, instead of the agent's"
        " current mood.")] = None
    sources: Annotated[bool, doc("Include the source messages of every hit.")] = True
    record: Annotated[bool, doc(
        "False: a look that leaves memory as it was (no TraceRetrieved, nothing reinforced).")] = True
    # Filters every candidate passes (inside the search, not a cut of its top): a trace's type (episodic, semantic,
    # procedural, prospective, relational) or category (a fact's, "lesson", "observation", …); encoded at or after
    # `since` and before `until`; each metadata pair equal in the trace's metadata (`PATCH …/memories/trace/{id}`).
    kinds: Annotated[Annotated[list[Annotated[str, Meta(min_length=1, max_length=64)]], Meta(max_length=32)] | None,
                     doc(
        "Only traces of these types (episodic, semantic, procedural, prospective, relational) or categories (a"
        " fact's, \"lesson\", \"observation\", …).")] = None
    since: Annotated[datetime | None, doc("Only memories encoded at or after this time (ISO 8601).")] = None
    until: Annotated[datetime | None, doc("Only memories encoded before this time (ISO 8601).")] = None
    metadata: Annotated[Metadata | None, doc(
        "Only memories whose metadata holds each of these key/value pairs.")] = None


class SourceMessage(Model, kw_only=True):
    seq: Annotated[int, doc("The message's log position.")]
    discussion: Annotated[str, doc("The discussion it was said in.")]
    message_id: Annotated[str, doc("The message's id.")]
    role: Annotated[str, doc("Who said it: user, assistant, system or tool.")]
    name: Annotated[str | None, doc("The speaker's name, if given.")]
    content: Annotated[str, doc("The message's text.")]
    ts: Annotated[str, doc("When it was said (ISO 8601).")]


class RecallHit(HitShown, Model, kw_only=True):
    """One memory recall found: the core's hit as it is (`HitShown`, declared once in
    engram.memory.cognitive.retrieval) and what the API computes from the core's own fields."""

    score: Annotated[float, doc("The composite score the hits are ranked by.")]
    factors: Annotated[dict[str, float], doc(
        "Each factor of the ranking (strength, similarity, recency, emotional, activation, importance) -> its value "
        "for this memory (0..1).")]
    similarity_parts: Annotated[dict[str, float], doc(
        "Cosine, lexical (to the query), feedback (to the feedback query).")]
    contributions: Annotated[dict[str, float], doc("Each factor -> its weighted share of the score.")]
    sources: Annotated[list[SourceMessage], doc("The messages it was made from (with `sources`: true).")] = []
    pruned_at: Annotated[str | None, doc(
        "For a dormant hit (via `dormant`): when the decay sweep pruned the trace.")] = None
    # Validity in time: true from `valid_from` until `valid_to` (None: still true), when `superseded_by` replaced it.
    valid_from: Annotated[str | None, doc("True from this time on (ISO 8601), when known.")] = None
    valid_to: Annotated[str | None, doc("True until this time (ISO 8601); null: still true.")] = None


class Feedback(Model, kw_only=True):
    """Pseudo-relevance feedback: the traces the feedback query was made of and the terms it added;
    similarity = (1 − share) · similarity to the query + share · similarity to the feedback query."""

    share: Annotated[float, doc("The feedback query's share of the similarity.")]
    traces: Annotated[list[str], doc("The memories the feedback came from (recalled and used before).")] = []
    terms: Annotated[list[str], doc("The words the feedback query added.")] = []


class HydeMatch(Model, kw_only=True):
    trace_id: Annotated[str, doc("The memory trace's id.")]
    cosine: Annotated[float, doc("Its cosine to the HyDE vector.")]


class Hyde(Model, kw_only=True):
    text: Annotated[str, doc("The hypothetical memory written for the query.")]
    threshold: Annotated[float, doc("The cosine a trace needed to count as a match.")]
    tried: Annotated[list[float], doc("The thresholds tried, in order (lowered until enough matched).")]
    hits: Annotated[int, doc("How many traces matched.")]
    matches: Annotated[list[HydeMatch], doc(
        "The traces near the HyDE vector (query and hypothetical memory, averaged), above the threshold.")] = []


class Mood(Model, kw_only=True):
    valence: Annotated[float, doc("Pleasure (PAD's P), -1..1.")]
    arousal: Annotated[float, doc("Arousal (PAD's A), -1..1.")]
    dominance: Annotated[float, doc("Dominance (PAD's D), -1..1.")]


class RecallResponse(Model, kw_only=True):
    query: Annotated[str, doc("The question recalled for.")]
    agent: Annotated[str, doc("The agent whose memory it is.")]
    discussion: Annotated[str | None, doc("The discussion the recall was limited to, if any.")]
    now_us: Annotated[int, doc("The event time the recall was made at (µs since the epoch).")]
    candidates: Annotated[int, doc("How many memories were ranked.")]
    similarity: Annotated[str, doc("How similarity was measured (hybrid or embedding).")]
    weights: Annotated[dict[str, float], doc("The weights of the ranking's factors used.")]
    mood: Annotated[Mood, doc("The mood the memories were recalled in (it colours the emotional factor).")]
    hyde: Annotated[Hyde | None, doc("What HyDE retrieval did, when it ran.")]
    hits: Annotated[list[RecallHit], doc("The memories found, best first.")]
    keyword_share: Annotated[float, doc(
        "Hybrid similarity: the keyword match's share (the cosine has the rest).")] = 0.0
    focus: Annotated[str, doc("The query as embedded: without the words most of the agent's memories hold.")] = ""
    feedback: Annotated[Feedback | None, doc("What earlier recalls fed back into this one, if anything.")] = None


class WorkingMemoryResponse(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    slots: Annotated[list[dict[str, Any]], doc(
        "What is in focus now (7±2 slots): each slot's trace, content and activation.")]
    path: Annotated[str, doc("The file the persistent notes are in.")]
    markdown: Annotated[str, doc("The persistent notes, as markdown.")]


class WorkingMemoryWrite(Model, kw_only=True):
    markdown: Annotated[Annotated[str, Meta(max_length=1_000_000)], doc(
        "The whole new notes, as markdown (cut to their budget).")]
    ts: Annotated[datetime | None, doc(
        "Event time of the write (ISO 8601); default: when the server receives it.")] = None


class WorkingMemoryWritten(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    seq: Annotated[int, doc("The write's log position.")]
    characters: Annotated[int, doc("Characters of the notes kept.")]
    truncated: Annotated[bool, doc("True when the notes were cut to their budget.")]
    budget_tokens: Annotated[int, doc("The notes' budget in tokens (5% of the context window).")]
    position: Annotated[str | None, doc(
        "Pass as `after` to a read that must see this write (engram.api.positions).")] = None


class MoodRequest(Model, kw_only=True):
    valence: Annotated[Unit, doc("Pleasure (PAD's P), -1..1.")]
    arousal: Annotated[Unit, doc("Arousal (PAD's A), -1..1.")]
    dominance: Annotated[Unit, doc("Dominance (PAD's D), -1..1.")]
    reason: Annotated[Annotated[str, Meta(max_length=10_000)], doc("Why the mood changes, for the record.")] = "set"
    ts: Annotated[datetime | None, doc(
        "Event time of the change (ISO 8601); default: when the server receives it.")] = None


class ObservationLogResponse(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussion: Annotated[str, doc("The discussion observed.")]
    path: Annotated[str | None, doc("The observation log's file, if there is one yet.")]
    markdown: Annotated[str | None, doc("The observation log as markdown, if there is one yet.")]


class RecentObservations(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussion: Annotated[str, doc("The discussion observed.")]
    notes: Annotated[int, doc("How many observation notes there are.")]
    markdown: Annotated[str, doc("The notes as the observation log renders them (Date: headings, bullets).")]


class ConsolidationsResponse(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    runs: Annotated[Table, doc("Each consolidation run (pruned, merged, strengthened, …), one row a run.")]
    totals: Annotated[dict[str, Any], doc("The runs' counts summed.")]


# --------------------------------------------------------------------------- chat

class ChatRequest(Model, kw_only=True):
    message: Annotated[Annotated[str, Meta(min_length=1, max_length=1_000_000)], doc("What the user says.")]
    memory: Annotated[bool, doc("Recall memories for the reply (messages are recorded either way).")] = True


class ChatResponse(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussion: Annotated[str, doc("The discussion the turn was written to.")]
    reply: Annotated[str, doc("The reply.")]
    responder: Annotated[str, doc("Provider/model; the offline responder says it is not a language model.")]
    user_seq: Annotated[int | None, doc("The log position of the user's message.")]
    reply_seq: Annotated[int | None, doc("The log position of the reply.")]
    position: Annotated[str | None, doc(
        "Pass as `after` to a read that must see this turn (engram.api.positions).")] = None


class ChatInfo(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussion: Annotated[str, doc("The discussion the chat writes to.")]
    messages: Annotated[int, doc("Messages the discussion holds.")]
    responder: Annotated[str, doc(
        "Who replies: provider/model (the offline responder says it is not a language model).")]


# --------------------------------------------------------------------------- the OpenAI-compatible proxy

class ChatTurn(Model, kw_only=True):
    """One message of a front-end's chat history (the proxy turns OpenAI's message objects into these)."""

    role: Annotated[Role, doc("Who said it: user, assistant, system or tool.")]
    content: Annotated[Annotated[str, Meta(max_length=10_000_000)], doc("What was said.")]
    name: Annotated[str | None, doc("The speaker's name, if given.")] = None
    images: Annotated[list[Annotated[str, Meta(max_length=20_000_000)]], Meta(max_length=64), doc(
        "Base64 images with the message (the Ollama door's `images`): they go to the model with the turn it "
        "answers.")] = []


class Samplers(Model, kw_only=True):
    """The front end's own sampler values (None: not sent, the route's preset or the server decides). They win over
    the routed preset's unless the preset says `"frontEndSamplers": "override"`."""

    temperature: Annotated[Annotated[float, Meta(ge=0, le=100)] | None, doc("Sampling temperature.")] = None
    top_p: Annotated[Annotated[float, Meta(ge=0, le=1)] | None, doc(
        "Nucleus sampling: the probability mass to sample from.")] = None
    top_k: Annotated[Annotated[int, Meta(ge=0, le=1_000_000)] | None, doc("Sample from the k likeliest tokens.")] = None
    max_tokens: Annotated[Annotated[int, Meta(ge=1, le=1_000_000)] | None, doc(
        "The most tokens the reply may have.")] = None
    stop: Annotated[Annotated[list[Annotated[str, Meta(max_length=1_000)]], Meta(max_length=64)], doc(
        "Texts that end the reply.")] = []
    seed: Annotated[int | None, doc("A seed for reproducible sampling, where the model supports it.")] = None


class CompletionRequest(Model, kw_only=True):
    """A chat completion: the whole history as the front-end sends it. A `[DiscussionId]…[/DiscussionId]` tag in
    any message switches memory on for that discussion; without one the request is answered without memory.

    `text_prompt`: the request is a text completion (`/v1/completions`, `/api/generate`): its one user message is
    the prompt the front end wrote. Without a tag it goes to the model as it is (a text-completion endpoint gets
    it untouched); with one it is the discussion's next user turn, appended after what the log holds (a text
    front end resends no history to align with)."""

    messages: Annotated[Annotated[list[ChatTurn], Meta(min_length=1, max_length=100_000)], doc(
        "The conversation as the front-end sends it (its whole history each turn).")]
    max_tokens: Annotated[Annotated[int, Meta(ge=1, le=1_000_000)] | None, doc(
        "The most tokens the reply may have.")] = None
    sampling: Annotated[Samplers | None, doc("Sampling settings passed to the model.")] = None
    text_prompt: Annotated[bool, doc("True for a text completion (one prompt) rather than a chat.")] = False
    # What the reply's upstream cannot do is refused (400), never dropped.
    format: Annotated[str | dict[str, Any] | None, doc(
        "The Ollama door's `format`: \"json\" or a JSON schema; the reply in JSON, asked the strongest way the "
        "upstream takes.")] = None
    keep_alive: Annotated[str | float | None, doc(
        "The Ollama door's `keep_alive`, passed to an Ollama upstream.")] = None
    options: Annotated[dict[str, Any], doc(
        "The Ollama door's options beyond the samplers (num_ctx among them), for the reply's call.")] = {}


class CompletionResponse(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussion: Annotated[str | None, doc(
        "The discussion the request named (`[DiscussionId]`); null: no tag, no memory.")]
    reply: Annotated[str, doc("The model's reply.")]
    responder: Annotated[str, doc("Provider/model; the offline responder says it is not a language model.")]
    appended: Annotated[int, doc("Messages of the request the log did not hold yet (the reply not counted).")]
    reply_seq: Annotated[int | None, doc("The log position of the reply, when it was recorded.")]
    memory_ms: Annotated[float, doc(
        "engram's own work in the request: appending, the workflow's readers, the reply's append.")]
    llm_ms: Annotated[float, doc("The model's answer.")]
    input_tokens: Annotated[int, doc("Tokens of the prompt, as the model counted them.")] = 0
    output_tokens: Annotated[int, doc("Tokens of the reply, as the model counted them.")] = 0
    position: Annotated[str | None, doc(
        "Where the request's messages and the reply are in the log (engram.api.positions): pass it as `after` to a "
        "read that must see them; null when nothing was recorded.")] = None


# --------------------------------------------------------------------------- forgetting and jobs

# --------------------------------------------------------------------------- one memory at a time

# A fact is a trace (auto-ingest keeps facts as traces): "fact" reads and edits the trace of that id.
MemoryKind = Literal["trace", "fact", "chunk", "vector"]


class MemoryItem(Model, kw_only=True):
    """One memory as it is now (after every edit): `GET /v1/agents/{agent}/memories/{kind}/{memory_id}`."""

    kind: Annotated[MemoryKind, doc(
        "What the memory is: trace, fact (a trace), chunk (a chunk memory) or vector (a vector memory).")]
    memory_id: Annotated[str, doc("The memory's id.")]
    agent: Annotated[str, doc("The agent whose memory it is.")]
    discussion: Annotated[str | None, doc("The discussion it was made from; null for an agent-wide trace.")]
    content: Annotated[str, doc("Its text (a chunk memory's summary, a vector memory's summary, a trace's content).")]
    title: Annotated[str | None, doc("A vector memory's title.")] = None
    metadata: Annotated[dict[str, str], doc("The user's labels on it: a flat object of strings.")] = {}
    category: Annotated[str, doc("A trace's category (\"fact\" categories of auto-ingest, \"lesson\", …).")] = ""
    created: Annotated[str, doc("Event time it was made.")]
    active: Annotated[bool, doc("A trace still active (not pruned or superseded).")] = True
    seq: Annotated[int, doc("The log position of its latest change.")]


class MemoryEdit(Model, kw_only=True):
    """A new form of one memory: its text, its title (a vector memory's), its metadata (what is not given stays)."""

    content: Annotated[Annotated[str, Meta(min_length=1, max_length=100_000)] | None, doc(
        "The memory's new text (default: keep the text).")] = None
    title: Annotated[Annotated[str, Meta(min_length=1, max_length=1_000)] | None, doc(
        "A vector memory's new title (default: keep it); other kinds have none.")] = None
    metadata: Annotated[Metadata | None, doc(
        "Labels to set: a flat object of strings, replacing the old ones (default: keep them; {} clears them).")] = None


class MemoryEdited(Model, kw_only=True):
    memory: Annotated[MemoryItem, doc("The memory as it is after the edit.")]
    seq: Annotated[int, doc("The MemoryEdited event's position.")]


class ForgetRequest(Model, kw_only=True):
    reason: Annotated[Annotated[str, Meta(max_length=10_000)], doc("Why, for the record.")] = ""


class ReplayRequest(Model, kw_only=True):
    out: Annotated[str | None, doc("A fresh directory (on the server's machine); null: rebuild in place.")] = None
    as_of: Annotated[str | None, doc("A position (SEQ) or an ISO-8601 event time; needs `out`.")] = None
    agent: Annotated[Id | None, doc("Only the shard of this agent (needed with as_of SEQ on several shards).")] = None
    verify: Annotated[bool, doc("Replay into scratch space and compare with the live projections.")] = False


class ReshardRequest(Model, kw_only=True):
    shards: Annotated[int, Meta(ge=2, le=1024), doc("The new shard count (more than the home has).")]


class ExportRequest(Model, kw_only=True):
    out: Annotated[str, doc(
        "A fresh directory on the server's machine (under the home's exports/ or `server.exportRoot`): "
        "<out>/log/, <out>/projections/ as Parquet.")]


class DiscussionReplayRequest(Model, kw_only=True):
    verify: Annotated[bool, doc("Only compare the rebuilt files with the live ones (nothing replaced).")] = False


JobKind = Literal["replay", "verify", "rebuild", "discussion-replay", "regenerate", "forget", "reshard", "export",
                  "reindex"]
JobState = Literal["queued", "running", "succeeded", "failed"]


class Progress(Model, kw_only=True):
    done: Annotated[int, doc("Units done.")]
    total: Annotated[int, doc("Units in all.")]
    unit: Annotated[str, doc("What a unit is (events, streams, erasures, …).")]


class Job(Model, kw_only=True):
    id: Annotated[str, doc("The job's id (`GET /v1/jobs/{id}`).")]
    kind: Annotated[JobKind, doc("What the job does.")]
    state: Annotated[JobState, doc("queued, running, succeeded or failed.")]
    progress: Annotated[Progress, doc("How far it is.")]
    created: Annotated[str, doc("When it was started (ISO 8601).")]
    finished: Annotated[str | None, doc("When it ended (ISO 8601); null while it runs.")] = None
    result: Annotated[dict[str, Any] | None, doc("What it did, when it succeeded (a report of its kind).")] = None
    error: Annotated[ErrorBody | None, doc("Why it failed, when it did.")] = None


class JobList(Model, kw_only=True):
    jobs: Annotated[list[Job], doc("The jobs, most recent first.")]


# --------------------------------------------------------------------------- listing and paging (engram.api.listing)

MAX_PAGE = 1000  # rows a page holds at most
# What a listing lists (plural: a route segment, `GET /v1/agents/{agent}/memories?kind=traces`); one memory's kind
# is `MemoryKind` above. (Both were named MemoryKind: the second replaced the first, and `MemoryItem.kind`'s schema
# listed the plural kinds its answers never carry.)
ListedKind = Literal["traces", "chunks", "vectors", "observations"]
PageOrder = Literal["oldest", "newest"]


class AgentSummary(Model, kw_only=True):
    agent: Annotated[str, doc("The agent's id.")]
    discussions: Annotated[int, doc("How many discussions it has.")]
    messages: Annotated[int, doc("How many messages its discussions hold.")]
    traces: Annotated[int, doc("Active memory traces.")]
    first_activity: Annotated[str | None, doc("The first message's time (ISO 8601, UTC); null before any message.")]
    last_activity: Annotated[str | None, doc("The last message's time.")]


class AgentList(Model, kw_only=True):
    agents: Annotated[list[AgentSummary], doc("The agents the key may see, with their counts and last activity.")]


class DiscussionSummary(Model, kw_only=True):
    discussion: Annotated[str, doc("The discussion's id.")]
    messages: Annotated[int, doc("How many messages it holds.")]
    tokens: Annotated[int, doc("Its messages' estimated tokens.")]
    first_activity: Annotated[str | None, doc("Its first message's time (ISO 8601, UTC).")]
    last_activity: Annotated[str | None, doc("Its last message's time (ISO 8601, UTC).")]
    last_seq: Annotated[int, doc("The log position of its last event.")]


class DiscussionList(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussions: Annotated[list[DiscussionSummary], doc("This page's discussions.")]
    next_cursor: Annotated[str | None, doc("Pass as `cursor` for the next page; null: this was the last page.")] = None


class StoredMessage(Model, kw_only=True):
    seq: Annotated[int, doc("Its position in the agent's shard.")]
    message_id: Annotated[str, doc("The message's id.")]
    role: Annotated[str, doc("Who said it: user, assistant, system or tool.")]
    name: Annotated[str | None, doc("The speaker's name, if given.")]
    content: Annotated[str, doc("The message's text.")]
    ts: Annotated[str, doc("When it was said (ISO 8601).")]
    metadata: Annotated[dict[str, str], doc("The user's labels on the message.")] = {}


class MessagePage(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    discussion: Annotated[str, doc("The discussion.")]
    order: Annotated[PageOrder, doc("oldest (first said first) or newest (last said first).")]
    messages: Annotated[list[StoredMessage], doc("This page's messages.")]
    next_cursor: Annotated[str | None, doc("Pass as `cursor` for the next page; null: no more (now).")] = None


class MemoryPage(Model, kw_only=True):
    agent: Annotated[str, doc("The agent.")]
    kind: Annotated[ListedKind, doc("The kind listed: traces, chunks, vectors or observations.")]
    discussion: Annotated[str | None, doc("The discussion the list was limited to, if any.")]
    memories: Annotated[list[dict[str, Any]], doc(
        "This page's memories, each as its row (its id, text, metadata and times).")]
    next_cursor: Annotated[str | None, doc("Pass as `cursor` for the next page; null: this was the last page.")] = None


def schema_components(types: list[type]) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """JSON Schemas of `types` for an OpenAPI document (refs under #/components/schemas/)."""
    return msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")


# --------------------------------------------------------------------------- LLM endpoints

class LlmEndpointCheck(Model, kw_only=True):
    """One configured LLM endpoint, called once (`engram llm check`)."""

    endpoint: Annotated[str, doc("The endpoint's name in engram.json.")]
    api_type: Annotated[str, doc("Its API (openai, anthropic, ollama, koboldcpp, …).")]
    url: Annotated[str, doc("Its base URL.")]
    ok: Annotated[bool, doc("True when it answered as expected.")]
    model: Annotated[str | None, doc("What the server answered as (or lists).")] = None
    latency_ms: Annotated[float | None, doc("How long its answer took, in milliseconds.")] = None
    structured: Annotated[str | None, doc(
        "How JSON answers work there (\"json_schema\", \"grammar\", ...); None: not constrained.")] = None
    context_window: Annotated[int | None, doc("Its context window in tokens, when known.")] = None
    context_source: Annotated[str | None, doc(
        "Where the context window came from (the server, the settings, a default).")] = None
    embedding_dim: Annotated[int | None, doc("The dimension of its embeddings, for an embedding endpoint.")] = None
    local: Annotated[bool, doc("A server the user runs: cost 0.")] = False
    problem: Annotated[str | None, doc("One line: what is wrong and what to fix.")] = None
    notes: Annotated[list[str], doc("What else the check found, in words.")] = []
    line: Annotated[str, doc("The whole check as one line, as the CLI prints it.")] = ""


class LlmCheckResponse(Model, kw_only=True):
    provider: Annotated[str, doc("The line saying which provider answers memory tasks, and why.")]
    endpoints: Annotated[list[LlmEndpointCheck], doc("Each configured endpoint's check.")]
