"""Replay, rebuild and verify a shard's projections; damaged files found at start."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from engram.config.home import ProjectionPaths
from engram.kernel.gate import alone, shared
from engram.memory.discussion.regenerate import mark_deleted_discussions
from engram.projections.base import ProjectionContext
from engram.projections.compare import differences
from engram.projections.registry import build_projections
from engram.projections.runner import ProjectionRunner
from engram.providers.search.hnsw import HnswIndex
from engram.shard.base import ShardBase
from engram.shard.forget import RecordingEmbedder

log = logging.getLogger(__name__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


def damaged_outputs(paths: ProjectionPaths, outputs: list[Path]) -> list[str]:
    """Projection files that do not read back (a JSON or JSON Lines file that does not parse, a DuckDB file that
    does not open, an HNSW index file that is not whole): what a crash or a disk error can leave. Checked at start, before anything folds into them."""
    found: list[str] = []
    files = [f for top in outputs for f in ([top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else [])]
    for f in files:
        if not f.is_file() or f.name.startswith("."):
            continue
        try:
            if f.suffix == ".json":
                json.loads(f.read_bytes())
            elif f.suffix == ".jsonl":
                for line in f.read_bytes().splitlines():
                    if line.strip():
                        json.loads(line)
            elif f.suffix == ".hnsw" and f.with_name(f.name + ".json").exists():
                # An agent's trace index: read back only when its agent's events come (the traces projection loads
                # nothing at start), so a damaged one is found here, against the ids its metadata lists.
                HnswIndex.check_file(f, len(json.loads(f.with_name(f.name + ".json").read_bytes())["ids"]))
            elif f.suffix == ".db":
                con = duckdb.connect(str(f), read_only=True)
                try:
                    for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                        con.execute(f'SELECT count(*) FROM "{table}"').fetchall()
                finally:
                    con.close()
        except Exception as exc:
            found.append(f"{f.relative_to(paths.root)}: {type(exc).__name__}: {_first_line(exc)}")
    return found


class ShardRepair(ShardBase):
    """Replay, rebuild and verify; damaged projections found at start; interrupted work finished (a part of
    `ShardHost`)."""

    def _open_checked(self) -> None:
        """Open the projections, checking their files first: damaged ones (truncated, corrupted) are detected
        here, and the shard's projections are rebuilt from the log (reported in `status`)."""
        mark_deleted_discussions(self.paths.shard_db(self.shard), self.paths)  # before files are rendered again
        damage = damaged_outputs(self.paths, self._outputs(self.paths))
        if not damage:
            try:
                self._open_projections()
                return
            except Exception as exc:
                damage = [f"{type(exc).__name__}: {_first_line(exc)}"]
                self._discard_open_projections()
        log.warning("shard %s: damaged projections (%s); rebuilding them from the log", self.shard, "; ".join(damage))
        for old in self._outputs(self.paths):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        self._open_projections()
        self.recovered.append(f"projections rebuilt from the log at start: {'; '.join(damage)[:500]}")

    @shared
    def replay_into(self, out_dir: str | Path, *, to_seq: int | None = None, until_us: int | None = None,
                    services: dict[str, Any] | None = None) -> dict[str, Any]:
        """Rebuild every projection of this shard from position 0 into `out_dir`. No LLM is called."""
        paths = ProjectionPaths(out_dir)
        paths.root.mkdir(parents=True, exist_ok=True)
        db = duckdb.connect(str(paths.shard_db(self.shard)))
        started = time.perf_counter()
        try:
            ctx = ProjectionContext(shard=self.shard, paths=paths, db=db, services=services or self.services)
            runner = ProjectionRunner(build_projections(ctx), self.store.read)
            try:
                events = runner.catch_up(to_seq=to_seq, until_us=until_us)
            finally:
                runner.close()
        finally:
            db.close()
        seconds = time.perf_counter() - started
        return {"shard": self.shard, "events": events, "seconds": round(seconds, 3), "out": str(paths.root)}

    @property
    def _rebuild_dir(self) -> Path:
        return self.paths.root.parent / f".{self.paths.root.name}.rebuild-{self.shard:03d}"

    @alone
    def rebuild(self, *, retain_cache: bool = False) -> dict[str, Any]:
        """Replay this shard's projections from scratch and swap them in for the live ones.

        The replay's directory stays until the swap is done: found at the next start, the rebuild is done
        again. `retain_cache`: afterwards, the embedding cache keeps only the vectors this replay used (after
        a forget: the vectors of forgotten texts go)."""
        # What rebuilds the projections (a forget, agents moving out) may have rewritten the log: a new generation
        # being built beside them (`engram reindex`) folded events that may be gone, and may not be finished.
        self._void_generation(f"shard {self.shard}'s projections were rebuilt (a forget, agents moving out or a "
                              "replay) while engram reindex built their new generation: run engram reindex again")
        tmp = self._rebuild_dir
        if tmp.exists():
            shutil.rmtree(tmp)
        embedder = self.services.get("embedder")
        recorder = RecordingEmbedder(embedder) if retain_cache and embedder is not None else None
        services = dict(self.services, embedder=recorder) if recorder is not None else self.services
        report = self.replay_into(tmp, services=services)
        self._close_projections()
        try:
            for old in self._outputs(self.paths):
                shutil.rmtree(old) if old.is_dir() else old.unlink()
            for new in self._outputs(ProjectionPaths(tmp)):
                target = self.paths.root / new.relative_to(tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(new, target)
            shutil.rmtree(tmp, ignore_errors=True)
        finally:
            self._open_projections()
        if recorder is not None:
            report["cache_entries_removed"] = recorder.retain()
        report["out"] = str(self.paths.root)
        return report

    def _finish_interrupted_work(self) -> None:
        """At start: complete a forget or a rebuild that a crash interrupted (recorded in `recovered`)."""
        for item in self.unfinished_forgets():
            log.warning("completing an interrupted forget (marker %s)", item["marker_seq"])
            if item["streams"]:
                self.complete_forget(item["marker_seq"], item["streams"])
            else:
                self.rebuild(retain_cache=True)
                self._journal.unlink(missing_ok=True)
            self.recovered.append(f"completed an interrupted forget (marker seq {item['marker_seq']})")
        if self._rebuild_dir.exists():
            log.warning("completing an interrupted rebuild of shard %s", self.shard)
            self.rebuild()
            self.recovered.append("completed an interrupted rebuild of the projections")

    @alone
    def verify_replay(self) -> list[str]:
        """Replay into a scratch directory and compare with the live projections.

        Returns the differences (none means replay reproduces the live state exactly: files byte
        for byte, tables row for row). Live projections pause while they are compared.
        """
        scratch = Path(tempfile.mkdtemp(prefix=f"engram-verify-{self.shard:03d}-"))
        try:
            self.replay_into(scratch)
            self._close_projections()
            try:
                within = sorted(
                    {p.relative_to(self.paths.root) for p in self._outputs(self.paths)}
                    | {p.relative_to(scratch) for p in self._outputs(ProjectionPaths(scratch))}
                )
                return differences(self.paths.root, scratch, within)
            finally:
                self._open_projections()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _outputs(self, paths: ProjectionPaths) -> list[Path]:
        """What this shard's projections own inside `paths`: its database, positions and agent folders."""
        db = paths.shard_db(self.shard)
        found = [p for p in (db, db.with_name(db.name + ".wal")) if p.exists()]
        found += sorted((paths.root / "_positions").glob(f"*.shard-{self.shard:03d}.json"))
        agents = {agent for agent, _ in self.store.streams()}
        found += [paths.agent_dir(a) for a in sorted(agents) if paths.agent_dir(a).exists()]
        return found
