"""Kill -9 trials: a process appends to a shard's log with group commits (and folds its projections) and is
killed at a random moment; then the log is checked. Used by tests/reliability/test_crashes.py and bench/soak.py.

Children are forked from a forkserver that has engram imported, so a trial costs the work, not a Python start.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

_ctx = None


def context():
    global _ctx
    if _ctx is None:
        _ctx = multiprocessing.get_context("forkserver")
        _ctx.set_forkserver_preload(["engram.shard.host", "engram.events.store", "tests.reliability.crash"])
    return _ctx


class Ack(msgspec.Struct, array_like=True):
    write: str
    seqs: list[int]


def _append_child(root: str, seed: int, with_projections: bool, writers: int) -> None:
    """Append forever from `writers` threads; every acknowledged write is recorded in acks.log."""
    from engram.events.envelope import NewEvent, Write
    from engram.events.messages import MessageAppended
    from engram.events.store import EventStore
    from engram.shard.host import ShardHost

    root_path = Path(root)
    if with_projections:
        host = ShardHost(root_path / "log" / "shard-000.duckdb", root_path / "projections")
        append = host.append_many
    else:
        store = EventStore(root_path / "log" / "shard-000.duckdb")
        append = store.append_many
    acks = os.open(root_path / "acks.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    encoder = msgspec.json.Encoder()
    (root_path / "ready").touch()

    def writer(t: int) -> None:
        rng = random.Random(seed * 100 + t)
        n = 0
        while True:
            n += 1
            size = 80 if rng.random() < 0.05 else rng.randint(1, 5)  # now and then a large (Arrow) commit
            name = f"t{t}-w{n}"
            events = tuple(
                NewEvent(MessageAppended(role="user", content=f"{name} event {i} " + "x" * rng.randint(0, 200),
                                         message_id=f"{name}-e{i}", token_estimate=3),
                         ts_us=1_700_000_000_000_000 + n * 1000 + i, event_id=f"{name}-e{i}")
                for i in range(size)
            )
            result = append([Write(stream=f"s{t}-{n % 3}", agent=f"a{t % 2}", events=events)])[0]
            os.write(acks, encoder.encode(Ack(write=f"{name}/{size}", seqs=list(result.seqs))) + b"\n")

    threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


@dataclass
class TrialResult:
    acked_writes: int = 0
    events: int = 0
    problems: list[str] = field(default_factory=list)
    replay_differences: list[str] = field(default_factory=list)


def kill_during_appends(root: Path, seed: int, *, with_projections: bool = False, writers: int = 4,
                        after_s: tuple[float, float] = (0.05, 0.4)) -> TrialResult:
    """One trial: start appending, kill -9 after a random time, then check everything that must hold."""
    root.mkdir(parents=True, exist_ok=True)
    proc = context().Process(target=_append_child, args=(str(root), seed, with_projections, writers), daemon=True)
    proc.start()
    deadline = time.monotonic() + 60
    while not (root / "ready").exists():
        if not proc.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the appending child did not start (exit code {proc.exitcode})")
        time.sleep(0.005)
    time.sleep(random.Random(seed).uniform(*after_s))
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    (root / "ready").unlink()
    return check_log(root, with_projections=with_projections)


def check_log(root: Path, *, with_projections: bool) -> TrialResult:
    from engram.events.store import EventStore
    from engram.shard.host import ShardHost

    result = TrialResult()
    acked = []
    if (root / "acks.log").exists():
        for line in (root / "acks.log").read_bytes().splitlines():
            acked.append(msgspec.json.decode(line, type=Ack))
    result.acked_writes = len(acked)
    log_path = root / "log" / "shard-000.duckdb"
    store = EventStore(log_path)  # opening at all: no stale lock
    try:
        rows = store.query("SELECT seq, event_id FROM events ORDER BY seq")[1]
    finally:
        store.close()
    result.events = len(rows)
    seqs = [r[0] for r in rows]
    if seqs != list(range(1, len(seqs) + 1)):
        result.problems.append(f"seq not gap-free: {len(seqs)} events, max {max(seqs, default=0)}")
    by_write: dict[str, list[int]] = {}
    for seq, event_id in rows:
        by_write.setdefault(event_id.rsplit("-e", 1)[0], []).append(seq)
    for ack in acked:
        name, size = ack.write.split("/")
        if by_write.get(name) != ack.seqs:
            result.problems.append(f"acknowledged write {name} missing or changed: {by_write.get(name)} != {ack.seqs}")
    sizes = {}
    for seq, event_id in rows:
        name = event_id.rsplit("-e", 1)[0]
        sizes[name] = max(sizes.get(name, 0), int(event_id.rsplit("-e", 1)[1]) + 1)
    for name, seq_list in by_write.items():
        if len(seq_list) != sizes[name]:
            result.problems.append(f"write {name} half-written: {len(seq_list)} of {sizes[name]} events")
    if with_projections:
        host = ShardHost(log_path, root / "projections", background=False)
        try:
            host.catch_up()
            result.replay_differences = host.verify_replay()
        finally:
            host.close()
    return result


# ---------------------------------------------------------------------- a forget killed half-way

FORGET_STAGES = {
    # the log's payloads are erased (committed), the file not rewritten yet
    "erased": ("engram.shard.forget", "compact_database", None),
    # the projections are half swapped: the old ones deleted, the first rebuilt one being moved in
    "swapping": ("os", "replace", ".projections.rebuild-"),
    # the shard is done; the policies' snapshots are deleted and not written again yet
    "scrubbing": ("engram.policies.host:PolicyHost", "scrub", None),
}


def _forget_child(root: str, stage: str, agent: str, discussion: str) -> None:
    import importlib

    from tests.reliability.harness import LocalHome

    target, attr, only_if = FORGET_STAGES[stage]
    module, _, cls = target.partition(":")
    owner = importlib.import_module(module)
    owner = getattr(owner, cls) if cls else owner
    original = getattr(owner, attr)

    def block(*args, **kwargs):
        if only_if is not None and not (only_if in str(args[0]) and only_if not in str(args[1])):
            return original(*args, **kwargs)  # (for "swapping": only a move out of the rebuild directory)
        Path(root, "blocked").touch()
        time.sleep(3600)

    setattr(owner, attr, block)
    with LocalHome(Path(root) / "home") as local:
        local.forget(agent, discussion)


def kill_during_forget(root: Path, stage: str, agent: str, discussion: str) -> None:
    """Start forgetting in a child process over the home at root/home, kill -9 it at `stage`."""
    proc = context().Process(target=_forget_child, args=(str(root), stage, agent, discussion), daemon=True)
    proc.start()
    deadline = time.monotonic() + 120
    while not (root / "blocked").exists():
        if not proc.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the forgetting child did not reach {stage} (exit code {proc.exitcode})")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()


# ---------------------------------------------------------------------- a policy killed mid-LLM-call


def llm_home_config(url: str, timeout_s: float) -> dict:
    return {"embedder": {"name": "hashing"},
            "llm": {"provider": "anthropic", "endpoints": {"default": {
                "model": "claude-sonnet-5-5", "baseUrl": url, "timeoutSeconds": timeout_s, "maxRetries": 1,
                "retryInitialDelaySeconds": 0.001, "retryMaxDelaySeconds": 0.005}}}}


def _llm_child(home: str, count: int) -> None:
    from tests.memory.discussion.engine import LocalEngine
    from tests.memory.discussion.conftest import ingest, messages

    os.environ["ANTHROPIC_API_KEY"] = "test-key"
    with LocalEngine(home) as engine:
        ingest(engine, "d", messages(count))


def kill_during_llm_call(home: Path, api, count: int = 14) -> int:
    """Run a Summarizer (in a child) whose LLM answers slowly; kill -9 it while a call is in flight.
    Returns how many requests the LLM had received."""
    proc = context().Process(target=_llm_child, args=(str(home), count), daemon=True)
    proc.start()
    deadline = time.monotonic() + 120
    while len(api.requests) < 2:  # mid-way: a memory made, the next call in flight
        if not proc.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the child never called the LLM (exit code {proc.exitcode})")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    return len(api.requests)


# ---------------------------------------------------------------------- a disk that fills up


def _fill_child(root: str, home: str, file_limit: int | None) -> None:
    """Append until the disk is full, then try to fold; every acknowledged write is in acks.log (elsewhere)."""
    import resource

    from engram.events.envelope import NewEvent, Write
    from engram.events.messages import MessageAppended
    from engram.events.store import AppendError
    from engram.shard.host import ShardHost

    if file_limit is not None:  # no room past this size in any file; EFBIG instead of a signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    acks = os.open(Path(root) / "acks.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    errors = os.open(Path(root) / "errors.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    host = ShardHost(Path(home) / "log" / "shard-000.duckdb", Path(home) / "projections", background=False)
    failures, n = 0, 0
    while failures < 3:
        n += 1
        name = f"w{n}"
        events = tuple(NewEvent(MessageAppended(role="user", content=f"{name} event {i} " + "y" * 400,
                                                message_id=f"{name}-e{i}", token_estimate=100),
                                ts_us=1_700_000_000_000_000 + n * 1000 + i, event_id=f"{name}-e{i}") for i in range(20))
        try:
            result = host.append_many([Write(stream=f"d{n % 4}", agent="a", events=events)])[0]
            os.write(acks, msgspec.json.encode(Ack(write=f"{name}/20", seqs=list(result.seqs))) + b"\n")
        except AppendError as exc:
            failures += 1
            os.write(errors, f"append: {exc}\n".encode())
    try:
        host.catch_up()
    except Exception as exc:  # the projections cannot be written either
        os.write(errors, f"fold: {type(exc).__name__}: {exc}\n".encode())
    os._exit(0)  # like a process the disk stopped: no clean close


def fill_the_disk(root: Path, home: Path, file_limit: int | None = None) -> list[str]:
    proc = context().Process(target=_fill_child, args=(str(root), str(home), file_limit), daemon=True)
    proc.start()
    proc.join(300)
    if proc.exitcode != 0:
        raise RuntimeError(f"the filling child ended with {proc.exitcode}")
    return (root / "errors.log").read_text().splitlines()
