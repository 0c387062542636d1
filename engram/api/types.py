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
# A user's labels on a memory: a flat object of text, at most 64 keys.
Metadata = Annotated[dict[Annotated[str, Meta(min_length=1, max_length=256)], Annotated[str, Meta(max_length=16_384)]],
                     Meta(max_length=64)]
Factor = Literal["strength", "similarity", "recency", "emotional", "activation", "importance"]


class Model(Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every type: keyword fields, unknown fields refused (a typo is an error, not a no-op)."""


# --------------------------------------------------------------------------- errors

class ErrorBody(Model, kw_only=True):
    code: str  # engram's stable code (engram.api.errors.CODES)
    message: str  # what to fix
    type: str | None = None  # in an HTTP answer: OpenAI's error type (invalid_request_error, server_error, …)


class ErrorResponse(Model, kw_only=True):
    error: ErrorBody


# --------------------------------------------------------------------------- system

class Health(Model, kw_only=True):
    """`GET /v1/health` (no key): the server is up. Nothing else: which home it serves and its instance token are
    never on an open route (a command recognises its server through the home's instance.json, `InstanceProof`)."""

    service: Literal["engram"] = "engram"
    status: Literal["up"] = "up"


class InstanceProof(Model, kw_only=True):
    """`GET /v1/instance?challenge=…` (no key): HMAC-SHA256 keyed with the server's instance token over the home and
    the caller's challenge (`engram.server.instance.proof`). Whoever can read the home's instance.json computes the
    same value and so knows that the server at that URL is the home's; nobody else learns anything from it."""

    proof: str


class ServerInfo(Model, kw_only=True):
    """`GET /v1/server` (a key for every agent): the home this server serves, its pid, version and runtime."""

    home: str
    pid: int
    version: str
    runtime: str


class FoldFailure(Model, kw_only=True):
    seq: int
    projection: str
    type: str
    error: str


class UnfinishedForget(Model, kw_only=True):
    marker_seq: int
    streams: list[str]


class ShardStatus(Model, kw_only=True):
    shard: int
    head: int
    streams: int
    projections: dict[str, int]
    projection_lag: int
    events_by_type: dict[str, int]
    consumers: dict[str, int] = {}
    consumer_errors: dict[str, str] = {}
    projection_error: str | None = None
    node: str | None = None  # where the shard's actor runs (and its files are)
    actors: dict[str, str] = {}  # each actor of the shard (the shard's, its policies') -> its node
    # Policies whose snapshot was not restored (another state version, damaged) and rebuild from the log, and why.
    consumers_rebuilt: dict[str, str] = {}
    # Events a projection could not fold, left out of it (FoldFailed records; SQL: fold_failed).
    fold_failed: list[FoldFailure] = []
    # Forgets recorded but not (completely) erased: completed when the shard next starts.
    unfinished_forgets: list[UnfinishedForget] = []
    # What the shard's start found broken or unfinished, and did about it.
    recovered: list[str] = []
    # Agents whose cognitive memory the shard's traces projection holds now (at most `ray.shardResidentAgents`; the
    # others are read back from their rows and index files when their events come).
    resident_agents: int | None = None
    # Seconds each projection spent folding and checkpointing since the shard started, and events folded.
    projection_timings: dict[str, dict[str, float]] = {}


class ReembedCounts(Model, kw_only=True):
    traces: int = 0
    discussion_memories: int = 0


class EmbedderStatus(Model, kw_only=True):
    """The embedder the home serves with, and (when engram.json names another) what `engram reindex` re-embeds."""

    serving: str  # the embedder the home's vectors are made by (`engram.config.serving_embedder.embedder_key`)
    configured: str  # the one engram.json names
    reindex_needed: bool = False
    # Per agent, what the configured embedder must re-embed before the home switches to it.
    to_reembed: dict[str, ReembedCounts] = {}


class StatusResponse(Model, kw_only=True):
    home: str
    mode: str
    runtime: str
    shards: list[ShardStatus]
    jobs_running: int = 0
    interrupted: list[str] = []  # work a restart interrupted, with how to continue it
    embedder: EmbedderStatus | None = None


class SqlRequest(Model, kw_only=True):
    query: Annotated[str, Meta(min_length=1, max_length=100_000)]
    params: list[Any] = []


class SqlResponse(Model, kw_only=True):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = False  # the query had more rows than the limit; these are the first ones


class Table(Model, kw_only=True):
    """Rows of a read model, column names first (what `engram sql`-style commands print)."""

    columns: list[str]
    rows: list[list[Any]]


# --------------------------------------------------------------------------- writing

class Message(Model, kw_only=True):
    role: Role
    content: Annotated[str, Meta(max_length=10_000_000)]
    ts: datetime | None = None  # event time; default: when the server receives it
    name: str | None = None
    message_id: Annotated[str, Meta(min_length=1, max_length=256)] | None = None
    metadata: dict[str, str] = {}


class AppendRequest(Model, kw_only=True):
    messages: Annotated[list[Message], Meta(min_length=1, max_length=100_000)]


class Conversation(Model, kw_only=True):
    discussion: Id
    messages: Annotated[list[Message], Meta(min_length=1, max_length=100_000)]


class AppendConversationsRequest(Model, kw_only=True):
    """Several discussions of one agent at once: they commit together, all or nothing (one file of `engram ingest`)."""

    conversations: Annotated[list[Conversation], Meta(min_length=1, max_length=10_000)]


class AppendResult(Model, kw_only=True):
    discussion: str
    appended: int  # new messages
    duplicates: int  # already recorded (recognised by message id)
    seqs: list[int]


class AppendResponse(Model, kw_only=True):
    agent: str
    results: list[AppendResult]
    settings_recorded: int = 0  # SettingsChanged events appended because the settings files changed
    # Where the write is in the log (engram.api.positions): pass it as `after` to a read that must see it.
    position: str | None = None


class SettingsRecorded(Model, kw_only=True):
    agent: str
    recorded: int  # SettingsChanged events appended (0: the files match what the log holds)


class ToolFailureRequest(Model, kw_only=True):
    tool: Annotated[str, Meta(min_length=1, max_length=256)]
    error: Annotated[str, Meta(max_length=100_000)]
    arguments: Annotated[str, Meta(max_length=100_000)] = ""
    call_id: Annotated[str, Meta(min_length=1, max_length=256)] | None = None
    ts: datetime | None = None


class EventResponse(Model, kw_only=True):
    seq: int
    duplicate: bool = False
    position: str | None = None  # pass as `after` to a read that must see this write (engram.api.positions)


class MessageEdit(Model, kw_only=True):
    """A message's new words (`MessageEdited`): every memory made from the old ones is superseded."""

    content: Annotated[str, Meta(min_length=1, max_length=1_000_000)]


class MessageChanged(Model, kw_only=True):
    """A message edited or removed: the event that says so (the old words stay in the log for replay)."""

    discussion: str
    message_id: str
    change: Literal["edited", "removed"]
    content: str | None = None  # the message's words now (None: removed)
    seq: int  # the MessageEdited / MessageRemoved event's position
    duplicate: bool = False  # the same change was recorded already
    position: str | None = None  # pass as `after` to a read that must see this change (engram.api.positions)


# --------------------------------------------------------------------------- discussion memory

class SearchRequest(Model, kw_only=True):
    keywords: Annotated[str, Meta(max_length=10_000)]  # separated by ";" (OR logic)
    mode: Literal["keyword", "semantic", "hybrid"] = "hybrid"
    limit: Annotated[int, Meta(ge=1, le=MAX_RESULTS)] = 5
    # Filters (ranked among the memories that pass): the time its messages were said overlaps [since, until); each
    # metadata pair equal in the memory's metadata (`PATCH …/memories/vector/{id}`).
    since: datetime | None = None
    until: datetime | None = None
    metadata: Metadata | None = None


class SearchResponse(Model, kw_only=True):
    discussion: str
    agent: str
    mode: str
    keywords: list[str]
    limit: int
    warnings: list[str]
    reason: str | None
    hits: list[dict[str, Any]]  # rank, score, keyword_rank, semantic_rank and the memory's fields
    ms: float


class MemoriesResponse(Model, kw_only=True):
    discussion: str
    agent: str
    path: str
    exists: bool
    total: int  # chunk memories in the file
    memories: list[ChunkMemory]  # the file's records (the last `last` of them when asked)


class SummaryResponse(Model, kw_only=True):
    discussion: str
    agent: str
    path: str
    summary: RollingSummary | None  # the `<id>_summary.jsonl` record; None before the first one


class DiscussionResponse(Model, kw_only=True):
    discussion: str
    agent: str


class CompactionsResponse(Model, kw_only=True):
    discussion: str
    agent: str
    compactions: list[dict[str, Any]]
    chain: dict[str, Any]
    tree: list[str]


class ContextResponse(Model, kw_only=True):
    discussion: str
    agent: str
    context: dict[str, Any]  # engram.memory.context.assemble's JSON form: blocks, budgets, turns
    rendered: str


class WorkflowRequest(Model, kw_only=True):
    """A WilmerAI workflow: `nodes` (the JSON list), `text` (a workflow file's JSON-with-comments text) or
    `name` (a file in <home>/workflows/): exactly one of them."""

    nodes: list[dict[str, Any]] | None = None
    text: Annotated[str, Meta(max_length=10_000_000)] | None = None
    name: Id | None = None
    source: str | None = None  # where the nodes came from, for messages (a file name)
    discussion: Id | None = None
    messages: list[Message] = []  # appended to the discussion first


class WorkflowNodeResult(Model, kw_only=True):
    index: int
    id: str | None
    type: str
    output: str
    info: str
    ms: float
    background: bool


class WorkflowResponse(Model, kw_only=True):
    discussion: str | None
    agent: str
    appended: int
    response: str
    response_node: str | None
    response_ms: float
    total_ms: float
    nodes: list[WorkflowNodeResult]


class RegenerateRequest(Model, kw_only=True):
    settings: dict[str, Any] | None = None  # a _DiscussionId-MemoryFile-Workflow-Settings.json's content
    settings_name: str = "settings.json"  # its file name, for messages and the SettingsChanged record


class BatchRegenerateRequest(Model, kw_only=True):
    """Regenerate discussion memory through the Message Batches API: the whole home, one agent's discussions or
    one discussion, in one job; or resume the job a restart interrupted (`resume`: nothing else may be given)."""

    agent: str | None = None
    discussion: str | None = None
    resume: bool = False


# --------------------------------------------------------------------------- cognitive memory

class RecallRequest(Model, kw_only=True):
    query: Annotated[str, Meta(min_length=1, max_length=100_000)]
    discussion: Id | None = None
    limit: Annotated[int, Meta(ge=1, le=MAX_RESULTS)] | None = None
    weights: dict[Factor, Annotated[float, Meta(ge=0.0, le=1000.0)]] | None = None
    hyde: bool | None = None
    similarity: Literal["hybrid", "embedding"] | None = None
    at: datetime | None = None  # event time of the question; default now
    # What was true at this time: facts valid then (superseded since or not), none learned later; default: true now.
    as_of: datetime | None = None
    mood: tuple[Unit, Unit, Unit] | None = None
    sources: bool = True  # include the source messages of every hit
    record: bool = True  # False: a look that leaves memory as it was (no TraceRetrieved, nothing reinforced)
    # Filters every candidate passes (inside the search, not a cut of its top): a trace's type (episodic, semantic,
    # procedural, prospective, relational) or category (a fact's, "lesson", "observation", …); encoded at or after
    # `since` and before `until`; each metadata pair equal in the trace's metadata (`PATCH …/memories/trace/{id}`).
    kinds: Annotated[list[Annotated[str, Meta(min_length=1, max_length=64)]], Meta(max_length=32)] | None = None
    since: datetime | None = None
    until: datetime | None = None
    metadata: Metadata | None = None


class SourceMessage(Model, kw_only=True):
    seq: int
    discussion: str
    message_id: str
    role: str
    name: str | None
    content: str
    ts: str


class RecallHit(HitShown, Model, kw_only=True):
    """One memory recall found: the core's hit as it is (`HitShown`, declared once in
    engram.memory.cognitive.retrieval) and what the API computes from the core's own fields."""

    score: float
    factors: dict[str, float]
    similarity_parts: dict[str, float]  # cosine, lexical (to the query), feedback (to the feedback query)
    contributions: dict[str, float]
    sources: list[SourceMessage] = []
    pruned_at: str | None = None  # a dormant hit: when the decay sweep pruned it
    # Validity in time: true from `valid_from` until `valid_to` (None: still true), when `superseded_by` replaced it.
    valid_from: str | None = None
    valid_to: str | None = None


class Feedback(Model, kw_only=True):
    """Pseudo-relevance feedback: the traces the feedback query was made of and the terms it added;
    similarity = (1 − share) · similarity to the query + share · similarity to the feedback query."""

    share: float
    traces: list[str] = []
    terms: list[str] = []


class HydeMatch(Model, kw_only=True):
    trace_id: str
    cosine: float


class Hyde(Model, kw_only=True):
    text: str
    threshold: float
    tried: list[float]
    hits: int
    matches: list[HydeMatch] = []  # the traces near the HyDE vector (query and hypothetical memory, averaged), above the threshold


class Mood(Model, kw_only=True):
    valence: float
    arousal: float
    dominance: float


class RecallResponse(Model, kw_only=True):
    query: str
    agent: str
    discussion: str | None
    now_us: int  # the event time the recall was made at (µs since the epoch)
    candidates: int
    similarity: str
    weights: dict[str, float]
    mood: Mood
    hyde: Hyde | None
    hits: list[RecallHit]
    keyword_share: float = 0.0  # hybrid similarity: the keyword match's share (the cosine has the rest)
    focus: str = ""  # the query as embedded: without the words most of the agent's memories hold
    feedback: Feedback | None = None


class WorkingMemoryResponse(Model, kw_only=True):
    agent: str
    slots: list[dict[str, Any]]
    path: str
    markdown: str


class WorkingMemoryWrite(Model, kw_only=True):
    markdown: Annotated[str, Meta(max_length=1_000_000)]
    ts: datetime | None = None


class WorkingMemoryWritten(Model, kw_only=True):
    agent: str
    seq: int
    characters: int
    truncated: bool
    budget_tokens: int
    position: str | None = None  # pass as `after` to a read that must see this write (engram.api.positions)


class MoodRequest(Model, kw_only=True):
    valence: Unit
    arousal: Unit
    dominance: Unit
    reason: Annotated[str, Meta(max_length=10_000)] = "set"
    ts: datetime | None = None


class ObservationLogResponse(Model, kw_only=True):
    agent: str
    discussion: str
    path: str | None
    markdown: str | None


class RecentObservations(Model, kw_only=True):
    agent: str
    discussion: str
    notes: int
    markdown: str  # the notes as the observation log renders them (Date: headings, bullets)


class ConsolidationsResponse(Model, kw_only=True):
    agent: str
    runs: Table
    totals: dict[str, Any]


# --------------------------------------------------------------------------- chat

class ChatRequest(Model, kw_only=True):
    message: Annotated[str, Meta(min_length=1, max_length=1_000_000)]
    memory: bool = True  # recall memories for the reply (messages are recorded either way)


class ChatResponse(Model, kw_only=True):
    agent: str
    discussion: str
    reply: str
    responder: str  # provider/model; the offline responder says it is not a language model
    user_seq: int | None
    reply_seq: int | None
    position: str | None = None  # pass as `after` to a read that must see this turn (engram.api.positions)


class ChatInfo(Model, kw_only=True):
    agent: str
    discussion: str
    messages: int
    responder: str


# --------------------------------------------------------------------------- the OpenAI-compatible proxy

class ChatTurn(Model, kw_only=True):
    """One message of a front-end's chat history (the proxy turns OpenAI's message objects into these)."""

    role: Role
    content: Annotated[str, Meta(max_length=10_000_000)]
    name: str | None = None


class Samplers(Model, kw_only=True):
    """The front end's own sampler values (None: not sent, the route's preset or the server decides). They win over
    the routed preset's unless the preset says `"frontEndSamplers": "override"`."""

    temperature: Annotated[float, Meta(ge=0, le=100)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    top_k: Annotated[int, Meta(ge=0, le=1_000_000)] | None = None
    max_tokens: Annotated[int, Meta(ge=1, le=1_000_000)] | None = None
    stop: Annotated[list[Annotated[str, Meta(max_length=1_000)]], Meta(max_length=64)] = []
    seed: int | None = None


class CompletionRequest(Model, kw_only=True):
    """A chat completion: the whole history as the front-end sends it. A `[DiscussionId]…[/DiscussionId]` tag in
    any message switches memory on for that discussion; without one the request is answered without memory.

    `text_prompt`: the request is a text completion (`/v1/completions`, `/api/generate`): its one user message is
    the prompt the front end wrote. Without a tag it goes to the model as it is (a text-completion endpoint gets
    it untouched); with one it is the discussion's next user turn, appended after what the log holds (a text
    front end resends no history to align with)."""

    messages: Annotated[list[ChatTurn], Meta(min_length=1, max_length=100_000)]
    max_tokens: Annotated[int, Meta(ge=1, le=1_000_000)] | None = None
    sampling: Samplers | None = None
    text_prompt: bool = False


class CompletionResponse(Model, kw_only=True):
    agent: str
    discussion: str | None  # None: no tag, no memory
    reply: str
    responder: str  # provider/model; the offline responder says it is not a language model
    appended: int  # messages of the request the log did not hold yet (the reply not counted)
    reply_seq: int | None
    memory_ms: float  # engram's own work in the request: appending, the workflow's readers, the reply's append
    llm_ms: float  # the model's answer
    input_tokens: int = 0
    output_tokens: int = 0


# --------------------------------------------------------------------------- forgetting and jobs

# --------------------------------------------------------------------------- one memory at a time

# A fact is a trace (auto-ingest keeps facts as traces): "fact" reads and edits the trace of that id.
MemoryKind = Literal["trace", "fact", "chunk", "vector"]


class MemoryItem(Model, kw_only=True):
    """One memory as it is now (after every edit): `GET /v1/agents/{agent}/memories/{kind}/{memory_id}`."""

    kind: MemoryKind
    memory_id: str
    agent: str
    discussion: str | None  # the discussion it was made from; None for an agent-wide trace
    content: str  # its text (a chunk memory's summary, a vector memory's summary, a trace's content)
    title: str | None = None  # a vector memory's title
    metadata: dict[str, str] = {}
    category: str = ""  # a trace's category ("fact" categories of auto-ingest, "lesson", …)
    created: str  # event time it was made
    active: bool = True  # a trace still active (not pruned or superseded)
    seq: int  # the log position of its latest change


class MemoryEdit(Model, kw_only=True):
    """A new form of one memory: its text, its metadata, or both (what is not given stays)."""

    content: Annotated[str, Meta(min_length=1, max_length=100_000)] | None = None
    metadata: Metadata | None = None


class MemoryEdited(Model, kw_only=True):
    memory: MemoryItem
    seq: int  # the MemoryEdited event's position


class ForgetRequest(Model, kw_only=True):
    reason: Annotated[str, Meta(max_length=10_000)] = ""


class ReplayRequest(Model, kw_only=True):
    out: str | None = None  # a fresh directory (on the server's machine); None: rebuild in place
    as_of: str | None = None  # a position (SEQ) or an ISO-8601 event time; needs `out`
    agent: Id | None = None  # only the shard of this agent (needed with as_of SEQ on several shards)
    verify: bool = False  # replay into scratch space and compare with the live projections


class ReshardRequest(Model, kw_only=True):
    shards: Annotated[int, Meta(ge=2, le=1024)]  # the new shard count (more than the home has)


class ExportRequest(Model, kw_only=True):
    out: str  # a fresh directory on the server's machine: <out>/log/, <out>/projections/ as Parquet


class DiscussionReplayRequest(Model, kw_only=True):
    verify: bool = False  # compare only


JobKind = Literal["replay", "verify", "rebuild", "discussion-replay", "regenerate", "forget", "reshard", "export",
                  "reindex"]
JobState = Literal["queued", "running", "succeeded", "failed"]


class Progress(Model, kw_only=True):
    done: int
    total: int
    unit: str


class Job(Model, kw_only=True):
    id: str
    kind: JobKind
    state: JobState
    progress: Progress
    created: str
    finished: str | None = None
    result: dict[str, Any] | None = None
    error: ErrorBody | None = None


class JobList(Model, kw_only=True):
    jobs: list[Job]


# --------------------------------------------------------------------------- listing and paging (engram.api.listing)

MAX_PAGE = 1000  # rows a page holds at most
# What a listing lists (plural: a route segment, `GET /v1/agents/{agent}/memories?kind=traces`); one memory's kind
# is `MemoryKind` above. (Both were named MemoryKind: the second replaced the first, and `MemoryItem.kind`'s schema
# listed the plural kinds its answers never carry.)
ListedKind = Literal["traces", "chunks", "vectors", "observations"]
PageOrder = Literal["oldest", "newest"]


class AgentSummary(Model, kw_only=True):
    agent: str
    discussions: int
    messages: int
    traces: int  # active memory traces
    first_activity: str | None  # the first message's time (ISO 8601, UTC); None before any message
    last_activity: str | None  # the last message's time


class AgentList(Model, kw_only=True):
    agents: list[AgentSummary]


class DiscussionSummary(Model, kw_only=True):
    discussion: str
    messages: int
    tokens: int
    first_activity: str | None
    last_activity: str | None
    last_seq: int


class DiscussionList(Model, kw_only=True):
    agent: str
    discussions: list[DiscussionSummary]
    next_cursor: str | None = None  # pass as `cursor` for the next page; None: this was the last page


class StoredMessage(Model, kw_only=True):
    seq: int  # its position in the agent's shard
    message_id: str
    role: str
    name: str | None
    content: str
    ts: str
    metadata: dict[str, str] = {}


class MessagePage(Model, kw_only=True):
    agent: str
    discussion: str
    order: PageOrder
    messages: list[StoredMessage]
    next_cursor: str | None = None  # pass as `cursor` for the next page; None: no more (now)


class MemoryPage(Model, kw_only=True):
    agent: str
    kind: ListedKind
    discussion: str | None
    memories: list[dict[str, Any]]
    next_cursor: str | None = None


def schema_components(types: list[type]) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """JSON Schemas of `types` for an OpenAPI document (refs under #/components/schemas/)."""
    return msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")


# --------------------------------------------------------------------------- LLM endpoints

class LlmEndpointCheck(Model, kw_only=True):
    """One configured LLM endpoint, called once (`engram llm check`)."""

    endpoint: str
    api_type: str
    url: str
    ok: bool
    model: str | None = None  # what the server answered as (or lists)
    latency_ms: float | None = None
    structured: str | None = None  # how JSON answers work there ("json_schema", "grammar", ...); None: not constrained
    context_window: int | None = None
    context_source: str | None = None
    embedding_dim: int | None = None
    local: bool = False  # a server the user runs: cost 0
    problem: str | None = None  # one line: what is wrong and what to fix
    notes: list[str] = []
    line: str = ""  # the whole check as one line, as the CLI prints it


class LlmCheckResponse(Model, kw_only=True):
    provider: str  # the line saying which provider answers memory tasks, and why
    endpoints: list[LlmEndpointCheck]
