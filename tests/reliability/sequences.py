"""Generated sequences of operations on one home (several agents and discussions interleaved, retries, duplicate
message ids, restarts, stale snapshots, forgets), run on the plain classes, and the checks that must hold after
any of them. Used by tests/reliability/test_properties.py (a few cases) and bench/soak.py (many)."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from engram.memory.ingest.messages import IncomingMessage, discussion_write
from engram.projections.compare import differences

T0 = 1_714_557_600_000_000
MINUTE = 60_000_000
WORDS = ("Lisbon", "budget", "Carla", "seafood", "Sintra", "report", "Friday", "churn", "region", "train", "hotel",
         "peanuts", "museum", "deadline", "Priya", "dashboard", "tickets", "sunset", "river", "tram")

# An operation is a tuple: ("say", agent, discussion, texts, with_ids, reuse_ids) | ("retry",) | ("restart", stale)
# | ("settle",) | ("forget", agent, discussion) | ("mark",)
AGENTS = st.sampled_from(["a0", "a1"])
sentence = st.lists(st.sampled_from(WORDS), min_size=3, max_size=12).map(lambda ws: " ".join(ws) + ".")
say = st.tuples(st.just("say"), AGENTS, st.integers(0, 2), st.lists(sentence, min_size=1, max_size=7), st.booleans(),
                st.booleans())
operation = st.one_of(say, say, say, st.just(("retry",)), st.tuples(st.just("restart"), st.booleans()),
                      st.just(("settle",)), st.tuples(st.just("forget"), AGENTS, st.integers(0, 2)), st.just(("mark",)))
operations = st.lists(operation, min_size=2, max_size=14)


@dataclass
class Outcome:
    replay_differences: list[str] = field(default_factory=list)
    as_of_differences: list[str] = field(default_factory=list)
    rehandled_appends: int = 0  # events appended by policies re-handling what they had handled (must be 0)
    retry_added: int = 0  # events a retried append added (must be 0)
    events: int = 0
    restarts: int = 0
    forgets: int = 0


class SequenceRun:
    """Runs `ops` on a fresh home under `root` with the policy `groups` (a LocalHome), checking as it goes."""

    def __init__(self, root: Path, groups: list[str]):
        from tests.reliability.harness import LocalHome

        self.root, self.groups = root, groups
        (root / "home").mkdir(parents=True)
        (root / "home" / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}}))
        self._open = lambda: LocalHome(root / "home", groups=groups)
        self.local = self._open()
        self.clock = T0
        self.last_write = None
        self.ids: dict[str, list[str]] = {}
        self.marks: list[tuple[int, Path]] = []
        self.stale_state: Path | None = None
        self.outcome = Outcome()

    def run(self, ops) -> Outcome:
        try:
            for op in ops:
                getattr(self, f"_{op[0]}")(*op[1:])
            self.local.settle()
            self.outcome.replay_differences = self.local.shard.verify_replay()
            for head, copy in self.marks:
                with tempfile.TemporaryDirectory() as scratch:
                    self.local.shard.replay_into(scratch, to_seq=head)
                    self.outcome.as_of_differences += [f"as of {head}: {d}" for d in differences(copy, Path(scratch))]
            self.outcome.events = self.local.shard.head()
        finally:
            self.local.close()
        return self.outcome

    def _say(self, agent: str, discussion: int, texts: list[str], with_ids: bool, reuse_ids: bool) -> None:
        stream = f"{agent}-d{discussion}"
        known = self.ids.setdefault(stream, [])
        msgs = []
        for i, text in enumerate(texts):
            self.clock += MINUTE
            message_id = None
            if with_ids:
                message_id = known[i % len(known)] if reuse_ids and known else f"m{len(known) + i}-{self.clock}"
            msgs.append(IncomingMessage(role="user" if i % 2 == 0 else "assistant", content=text, ts_us=self.clock,
                                        message_id=message_id, name="Ana" if i % 2 == 0 else None))
        self.local.sync_settings(agent, msgs[0].ts_us)
        write = discussion_write(agent, stream, msgs, max_message_chars=100_000)
        if write is not None:
            self.local.append([write])
            known += [e.event.message_id for e in write.events]
            self.last_write = write

    def _retry(self) -> None:
        if self.last_write is not None:
            [result] = self.local.append([self.last_write])
            self.outcome.retry_added += len(self.last_write.events) - result.duplicates

    def _settle(self) -> None:
        self.local.settle()

    def _restart(self, stale: bool) -> None:
        self.local.settle()
        head = self.local.shard.head()
        state = self.root / "home" / "state"
        keep = self.stale_state
        self.local.close()
        if stale and keep is not None:  # a crash lost the latest snapshots: the older ones are what a restart finds
            shutil.rmtree(state, ignore_errors=True)
            shutil.copytree(keep, state)
        if state.exists():
            self.stale_state = self.root / f"state-{self.outcome.restarts}"
            shutil.copytree(state, self.stale_state)
        self.local = self._open()
        self.outcome.restarts += 1
        for host in self.local.hosts.values():
            host.run_until_caught_up()
        if stale and keep is not None:
            # Policies handled again what they had handled: their decisions are in the log already.
            self.outcome.rehandled_appends += self.local.shard.head() - head

    def _forget(self, agent: str, discussion: int) -> None:
        stream = f"{agent}-d{discussion}"
        if (agent, stream) not in self.local.shard.store.streams():
            return
        self.local.settle()
        self.local.forget(agent, stream)
        if self.last_write is not None and self.last_write.stream == stream:
            self.last_write = None  # sent again after the forget, it would be new: that is not a retry
        self.marks = []  # the log before the forget no longer exists: earlier positions cannot be replayed
        self.outcome.forgets += 1

    def _mark(self) -> None:
        """Remember what is live now, to compare with a replay up to this position at the end."""
        self.local.settle()
        copy = self.root / f"mark-{len(self.marks)}-{self.local.shard.head()}"
        self.local.shard.catch_up()
        shutil.copytree(self.local.home.projections_dir, copy)
        self.marks.append((self.local.shard.head(), copy))
