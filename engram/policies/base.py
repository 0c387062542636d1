"""What a policy is: a consumer that reads events and decides on new ones.

A policy's decisions depend only on the events it has seen (and, for LLM work, on the
memory-task service, whose output it records in the event it appends). It keeps its state
in memory, updating it as soon as it decides (so it never decides the same thing twice
while its own event is on its way), and gives every event it appends a deterministic
`event_id`: when a restart re-reads events it had already handled, the log refuses the
duplicate appends. At-least-once handling plus idempotent appends: exactly-once effect.

Policies hold no Ray and no wall clock: time is the event time of what they read.

Snapshots carry what they are: a header (policy name, class, `STATE_VERSION`, position, checksum)
before the pickled state. A snapshot whose header does not match the running policy exactly (another
version, another class, a legacy file without a header, a checksum that fails) is never unpickled:
the policy starts from position 0 and rebuilds its state from the log, its repeated decisions
refused by the log as duplicates. The state itself is unpickled with a restricted unpickler that
only builds engram's own classes, numpy arrays and plain containers.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import pickle
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import msgspec

from engram.config.home import Home
from engram.events.envelope import Appended, Recorded, Write

SNAPSHOT_MAGIC = b"engram-policy-snapshot\n"


class IncompatibleSnapshot(ValueError):
    """A snapshot that must not be restored (and was not unpickled); the message says why."""


class SnapshotHeader(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    policy: str
    cls: str  # "module:QualifiedName" of the policy class that wrote it
    state_version: int
    position: int
    size: int  # bytes of the pickled state after the header
    sha256: str  # of those bytes


_header_decoder = msgspec.json.Decoder(SnapshotHeader)
# What a policy's state may be made of besides engram's own classes.
_SAFE_BUILTINS = frozenset({"set", "frozenset", "dict", "list", "tuple", "bytearray", "bytes", "complex", "float",
                            "int", "str", "bool", "slice", "range", "object"})
_SAFE_GLOBALS = {("collections", "deque"), ("collections", "defaultdict"), ("collections", "OrderedDict"),
                 ("collections", "Counter"), ("copyreg", "_reconstructor"), ("datetime", "datetime"),
                 ("datetime", "timezone"), ("datetime", "timedelta"), ("_codecs", "encode"),
                 ("msgspec._utils", "rebuild")}  # msgspec Structs: rebuild(cls, fields), the class checked on its own


# numpy arrays and scalars pickle through these.
_NUMPY_NAMES = frozenset({"_reconstruct", "dtype", "ndarray", "_frombuffer", "scalar"})


# Where engram's modules went when they moved into layers (issue 26), relative to `engram.`: a snapshot written
# before names the old paths, and restores through this table instead of being rebuilt from the log (a rebuild asks
# the LLM again for every message whose facts were extracted). Longest prefix first; a path that still imports is
# never looked up here. Written without the `engram.` prefix so that the script that rewrites module paths in
# branches merged after the move (`restructure.py --rewrite-only`) leaves it alone.
MOVED_MODULES = {
    "ids": "kernel.ids", "tokens": "kernel.tokens", "timing": "kernel.timing", "filelock": "kernel.filelock",
    "flow": "kernel.flow", "placement": "kernel.placement", "gate": "kernel.gate", "events.shards": "kernel.sharding",
    "api.idle": "kernel.idle", "logs": "kernel.logs", "private": "kernel.private", "home": "config.home",
    "llm": "providers.llm", "embeddings": "providers.embeddings", "search": "providers.search",
    "services": "providers.services",
    "cognitive": "memory.cognitive", "discussion.rebuild": "projections.discussion_rebuild",
    "discussion": "memory.discussion", "background": "memory.background", "context": "memory.context",
    "ingest": "memory.ingest", "settings": "memory.settings",
    "shard": "shard.host", "forgetting": "shard.forget", "sqlviews": "sql.views", "gathered_sql": "sql.gathered",
    "api.runtime": "runtime.base", "boot": "boot.serve", "embedded": "boot.embedded", "runtime.serve": "boot.ray_serve",
}
# Classes that moved out of their module (old module, name) -> the module they live in now.
MOVED_NAMES = {("cognitive.personality", "IngestRules"): "memory.cognitive.ingest"}


def moved_module(module: str, name: str) -> str | None:
    """Where `module.name` of a snapshot written before the move lives now (None: it did not move)."""
    rel = module.removeprefix("engram.")
    if (rel, name) in MOVED_NAMES:
        return "engram." + MOVED_NAMES[(rel, name)]
    parts = rel.split(".")
    for i in range(len(parts), 0, -1):
        new = MOVED_MODULES.get(".".join(parts[:i]))
        if new is not None:
            return "engram." + ".".join([new, *parts[i:]])
    return None


class _StateUnpickler(pickle.Unpickler):
    """Builds engram's classes, numpy arrays and plain containers; any other global (a function a
    damaged or foreign pickle would call) is refused. A class of a module that moved is found where it went
    (`MOVED_MODULES`)."""

    def find_class(self, module: str, name: str):
        if module == "builtins" and name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        top = module.split(".")[0]
        if (module, name) in _SAFE_GLOBALS or (top == "numpy" and name in _NUMPY_NAMES):
            return super().find_class(module, name)
        if top == "engram":
            try:
                found = super().find_class(module, name)
            except (ImportError, AttributeError):
                moved = moved_module(module, name)
                if moved is None:
                    raise
                module, found = moved, super().find_class(moved, name)
            if isinstance(found, type) or _is_factory(found, module):
                return found
        raise pickle.UnpicklingError(f"a policy state does not contain {module}.{name}")


# Domain packages whose argument-less functions (a defaultdict's factory, say) a state may refer to.
_FACTORY_PACKAGES = ("engram.memory.cognitive", "engram.memory.background", "engram.memory.discussion", "engram.memory.context",
                     "engram.policies", "engram.providers.search", "engram.events")


def _is_factory(fn, module: str) -> bool:
    """A function of a domain package that takes no parameters at all: unpickling can only make it, or call
    it with nothing (e.g. `defaultdict(_neighbour_map)`)."""
    import inspect

    if not inspect.isfunction(fn) or not module.startswith(_FACTORY_PACKAGES):
        return False
    return not inspect.signature(fn).parameters


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


@dataclass
class PolicyContext:
    shard: int
    home: Home
    services: dict[str, Any] = field(default_factory=dict)  # e.g. "tasks" (memory tasks), "embedder"
    member: int = 0  # index of this host within its pool
    members: int = 1  # pool size; logical actors are placed by consistent hashing
    # The shard's log, for policies that read history back (e.g. a regeneration re-reads a
    # discussion) or save long work as they go (appends need deterministic event ids).
    read: Callable[..., list[Recorded]] | None = None
    append: Callable[[list[Write]], list[Appended]] | None = None

    @property
    def tasks(self) -> Any:
        """The memory tasks: the service's, else made once from the configured (or default) LLM settings.

        Seen through `WaitOutOutages`: memory creation does not keep an offline fallback made during an
        LLM outage; the policy's batch fails, and is handled again once the endpoint answers."""
        tasks = self.services.get("tasks")
        if tasks is None:
            from engram.providers.llm.factory import make_tasks

            config = self.services.get("config")
            tasks = self.services["tasks"] = make_tasks(config.llm if config is not None else None,
                                                          home=config.home if config is not None else None)
        return WaitOutOutages(tasks)


class LlmUnavailable(RuntimeError):
    """A memory task met an LLM outage: the policy handles its events again later (its host backs off)."""


class WaitOutOutages:
    """Memory tasks that raise `LlmUnavailable` on an outage instead of returning the labelled fallback.

    A fallback stays what it is for failures that are the input's fault (an answer that stays invalid after a
    repair, a request the endpoint refuses): recorded, labelled, and memory creation moves on."""

    def __init__(self, tasks: Any):
        self.inner = tasks

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def call(*args, **kwargs):
            result = attr(*args, **kwargs)
            if getattr(result, "transient", False) and result.failed:
                raise LlmUnavailable(f"{name}: {result.llm.error}")
            return result

        return call


class Policy(ABC):
    name: ClassVar[str]
    # Event types this policy reads; None means all.
    interests: ClassVar[frozenset[str] | None] = None
    # Of those, types that need not wake the policy's actor at once: read with the next events, within the actor's
    # UNREAD_LINGER_S (e.g. a recall's TraceRetrieved, for policies that only fold it). In log order all the same, so
    # what the policy decides is the same; only when changes.
    unhurried: ClassVar[frozenset[str]] = frozenset()
    # The shape of `state()`: bump it when the shape changes, and snapshots of the old shape are rebuilt
    # from the log instead of restored into the new code.
    STATE_VERSION: ClassVar[int] = 1

    def __init__(self, ctx: PolicyContext):
        self.ctx = ctx
        self.position = 0

    @abstractmethod
    def handle(self, batch: list[Recorded]) -> list[Write]:
        """React to `batch` (events after `position`, of the types of interest, in seq order)."""

    def state(self) -> Any:
        """What must survive a restart besides the position (pickled)."""
        return None

    def restore(self, state: Any) -> None:
        pass

    _handle_batch: int | None = None

    @property
    def handle_batch(self) -> int | None:
        """At most this many events per `handle` call (None: a host's whole batch): the writes of each part are
        appended, and the policy's position moves past it, before the next part is decided (`PolicyHost`). A policy
        may compute it (the Summarizer), or it is set (a host's tests, a policy's constructor)."""
        return self._handle_batch

    @handle_batch.setter
    def handle_batch(self, events: int | None) -> None:
        self._handle_batch = events

    def snapshot(self) -> bytes | None:
        """The state, pickled behind its header; None: nothing to keep (the host writes no file)."""
        body = pickle.dumps(self.state(), protocol=pickle.HIGHEST_PROTOCOL)
        header = SnapshotHeader(policy=self.name, cls=_class_name(type(self)), state_version=self.STATE_VERSION,
                                position=self.position, size=len(body), sha256=hashlib.sha256(body).hexdigest())
        return SNAPSHOT_MAGIC + msgspec.json.encode(header) + b"\n" + body

    def load_snapshot(self, data: bytes) -> None:
        """Restore a snapshot this very policy wrote; IncompatibleSnapshot (nothing unpickled) otherwise."""
        header, body = read_snapshot_header(data)
        wanted = (self.name, _class_name(type(self)), self.STATE_VERSION)
        found = (header.policy, header.cls, header.state_version)
        if found != wanted:
            raise IncompatibleSnapshot(f"written by {found[1]} v{found[2]} ({found[0]}), this is {wanted[1]} v{wanted[2]}")
        try:
            state = _StateUnpickler(io.BytesIO(body)).load()
        except Exception as exc:
            raise IncompatibleSnapshot(f"the state does not load: {exc}") from None
        self.position = header.position
        self.restore(state)


def read_snapshot_header(data: bytes) -> tuple[SnapshotHeader, bytes]:
    """The header of a snapshot and its body, checked (magic, size, checksum) without unpickling anything."""
    if not data.startswith(SNAPSHOT_MAGIC):
        raise IncompatibleSnapshot("no snapshot header (written by an older engram)")
    line_end = data.find(b"\n", len(SNAPSHOT_MAGIC))
    if line_end < 0:
        raise IncompatibleSnapshot("the header is cut off")
    try:
        header = _header_decoder.decode(data[len(SNAPSHOT_MAGIC):line_end])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise IncompatibleSnapshot(f"the header does not read: {exc}") from None
    body = data[line_end + 1:]
    if len(body) != header.size or hashlib.sha256(body).hexdigest() != header.sha256:
        raise IncompatibleSnapshot(f"the state is damaged ({len(body)} of {header.size} bytes, checksum "
                                   f"{'matches' if hashlib.sha256(body).hexdigest() == header.sha256 else 'differs'})")
    return header, body
