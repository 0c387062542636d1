"""The home as a whole: status, read-only SQL, forgetting, replay and verification (as jobs)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.errors import error
from engram.kernel.ids import validate_agent, validate_discussion
from engram.api.jobs import JobProgress
from engram.runtime.base import QueryError, Report

STATUS_KEYS = ("shard", "head", "streams", "projections", "projection_lag", "events_by_type", "consumers",
               "consumer_errors", "projection_error", "consumers_rebuilt", "fold_failed", "unfinished_forgets",
               "recovered", "node", "actors", "resident_agents", "projection_timings")


# Jobs that write files (replay into a directory, export) write under <home>/exports/ or server.exportRoot only.
EXPORTS_DIR = "exports"

# A user's query is stopped after this long, and shows at most this many rows.
SQL_TIMEOUT_S = 30.0
SQL_MAX_ROWS = 10_000


def parse_as_of(text: str | None) -> tuple[int | None, int | None]:
    """(to_seq, until_us) from a replay's `as_of`: a position, or an ISO-8601 event time."""
    from engram.events.envelope import to_us

    if text is None:
        return None, None
    if text.isdigit():
        return int(text), None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise error("invalid_request", f"as_of {text!r} is neither a position (an integer) nor an ISO-8601 time") from None
    return None, to_us(ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc))


def cell(value: Any) -> Any:
    """A SQL value as JSON shows it: times in ISO-8601, decimals as numbers, bytes as hex."""
    from datetime import date, datetime
    from decimal import Decimal

    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def replay_report(reports: list[Report], seconds: float, nodes: dict[int, str]) -> Report:
    """A replay's report: per shard its events, seconds, events/s and node; in total the events, the wall-clock
    time (the shards replay at once, each on its node) and the events/s of the whole home."""
    for r in reports:
        r["events_per_s"] = round(r["events"] / r["seconds"]) if r["seconds"] else None
        r["node"] = nodes.get(r["shard"])
    events = sum(r["events"] for r in reports)
    return {"shards": reports, "events": events, "seconds": round(seconds, 3),
            "events_per_s": round(events / seconds) if seconds else None}


def private_tree(root: Path) -> None:
    """Make what a job wrote its owner's alone: directories 0700, files 0600 (they hold every agent's messages)."""
    for path in [root, *root.rglob("*")]:
        try:
            os.chmod(path, 0o700 if path.is_dir() else 0o600, follow_symlinks=False)
        except (OSError, NotImplementedError):  # a vanished file, or a symlink on a system that cannot chmod one
            pass


class AdminOps(ApiCore):
    def output_dir(self, raw: str, what: str) -> Path:
        """Where a job may write `raw`: a fresh directory under `<home>/exports/` or `server.exportRoot` (symlinks and
        `..` resolved first), made now, 0700. Anywhere else is refused: the server writes with its user's rights, for
        whoever asks."""
        out = Path(raw).expanduser()
        if not out.is_absolute():
            raise error("invalid_request", f"{what} {raw!r} must be an absolute path (the server's working directory "
                        "is not yours)")
        roots = [self.home.root / EXPORTS_DIR] + ([Path(self.config.server.export_root)]
                                                  if self.config.server.export_root else [])
        real = Path(os.path.realpath(out))
        if not any(real != Path(os.path.realpath(r)) and real.is_relative_to(os.path.realpath(r)) for r in roots):
            raise error("invalid_request", f"{what} {raw!r} is not under {roots[0]}/ (or server.exportRoot in "
                        "engram.json, an absolute directory): jobs write their files there only")
        if real.exists() and (not real.is_dir() or any(real.iterdir())):
            raise error("conflict", f"{out} is not empty; a job writes into a fresh directory")
        for root in roots:
            if real.is_relative_to(os.path.realpath(root)):
                Path(root).mkdir(mode=0o700, parents=True, exist_ok=True)
        real.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(real, 0o700)
        return real

    def llm_check(self) -> t.LlmCheckResponse:
        """Call each configured LLM endpoint once: model, latency, JSON way, context window, or what to fix."""
        from engram.providers.llm.check import check_all
        from engram.providers.llm.routing import why_provider

        checks = [msgspec.convert({**msgspec.structs.asdict(c), "line": c.line()}, t.LlmEndpointCheck)
                  for c in check_all(self.config.llm)]
        return t.LlmCheckResponse(provider=why_provider(self.config.llm), endpoints=checks)

    def status(self) -> t.StatusResponse:
        """Per shard: log head, projection and consumer positions and lag, errors, event counts by type."""
        from engram.api.batch_regen import interrupted

        shards = [msgspec.convert({k: st[k] for k in STATUS_KEYS if k in st and st[k] is not None}, t.ShardStatus)
                  for st in self.rt.shard_status()]
        batch = interrupted(self.home)  # None while a job (of any replica) runs it
        return t.StatusResponse(home=str(self.home.root), mode="server", runtime=self.rt.description, shards=shards,
                                jobs_running=self.jobs.running(), interrupted=[batch] if batch else [],
                                embedder=self.embedder_status())

    def embedder_status(self) -> t.EmbedderStatus:
        from engram.config.serving_embedder import embedder_key

        change = self.rt.embedder_change()
        if change is None:
            key = embedder_key(self.rt.config.embedder)
            return t.EmbedderStatus(serving=key, configured=key)
        return t.EmbedderStatus(serving=change["serving"], configured=change["configured"], reindex_needed=True,
                                to_reembed={a: t.ReembedCounts(**n) for a, n in change["agents"].items()})

    def reindex(self) -> t.Job:
        """Re-embed the home with the embedder engram.json names and switch to it (a job; progress counts discussion
        memories re-embedded, then events folded into the new generation of the projections). The home keeps
        serving with its embedder, appends included, until the switch (`Runtime.reindex`)."""

        def work(progress: JobProgress) -> Report:
            try:
                report = self.rt.reindex(on_progress=progress.set)
            finally:
                self.config = self.rt.config  # the embedder now served with
                self._query_embedder = None
                self._files.clear()
            return report

        return self.jobs.start("reindex", 0, "discussion memories", work)

    def run_sql(self, req: t.SqlRequest, agents: list[str] | None = None) -> t.SqlResponse:
        """A user's SQL over the log and every projection: one read-only statement, confined
        (`engram.sql.run_readonly`: no file, network or extension access, locked configuration), stopped after
        `SQL_TIMEOUT_S`, at most `SQL_MAX_ROWS` rows (`truncated` says more existed). `agents`: the query sees
        only these agents' rows (an API key's agents)."""
        from engram.sql import SqlError

        if not req.query.strip():
            raise error("bad_query", "the query is empty")
        try:
            result = self.rt.user_sql(req.query, list(req.params), agents=agents, timeout_s=SQL_TIMEOUT_S,
                                      max_rows=SQL_MAX_ROWS)
        except (SqlError, QueryError) as exc:
            raise error("bad_query", str(exc)) from None
        return t.SqlResponse(columns=list(result.columns), rows=[[cell(v) for v in r] for r in result.rows],
                             truncated=result.truncated)

    # ------------------------------------------------------------------ forgetting

    def forget(self, agent: str, discussion: str | None, req: t.ForgetRequest) -> t.Job:
        """Erase a discussion (or the whole agent): DiscussionForgotten/AgentForgotten recorded, payloads purged
        from the log file, projections rebuilt. Checked before the job starts; the job does the erasing."""
        validate_agent(agent)
        if discussion is not None:
            self.discussion_agent(validate_discussion(discussion), agent)
        else:
            self.require_agent(agent)

        def work(progress: JobProgress) -> Report:
            try:
                with self.source_cache().changing():  # recall's cached source messages: none kept across the erasure
                    report = self.rt.forget(agent, discussion, req.reason)
            except LookupError as exc:
                raise error("unknown_discussion", str(exc)) from None
            finally:
                self.forget_streams()
                self.forget_histories()
                self._files.pop(agent, None)
            progress.set(1)
            return report

        return self.jobs.start("forget", 1, "erasures", work)

    # ------------------------------------------------------------------ replay

    def replay(self, req: t.ReplayRequest) -> t.Job:
        """Rebuild projections from the log (no LLM call): in place, into `out` (optionally as of a position or a
        time), or into scratch space to compare with the live ones (`verify`). Progress counts shards."""
        to_seq, until_us = parse_as_of(req.as_of)
        if to_seq is not None and self.config.shards > 1 and not req.agent:
            raise error("invalid_request", "positions are per shard: with several shards, give agent with as_of SEQ, "
                        "or use a time")
        if req.as_of and not req.out:
            raise error("invalid_request", "as_of needs out: the live projections always reflect the whole log")
        if req.verify and req.out:
            raise error("invalid_request", "verify compares in scratch space; it takes no out")
        shards = [self.rt.shard_of(req.agent)] if req.agent else self.rt.all_shards()
        if req.agent:
            self.require_agent(req.agent)
        out = self.output_dir(req.out, "out") if req.out else None

        if req.verify:
            def verify(progress: JobProgress) -> Report:
                diffs = self.rt.verify_replay(shards, on_shard=lambda _: progress.advance())
                return {"identical": not diffs, "differences": diffs}

            return self.jobs.start("verify", len(shards), "shards", verify)

        def replay(progress: JobProgress) -> Report:
            self.rt.wait_projections()
            started = time.perf_counter()
            if out is not None:
                try:
                    reports = self.rt.replay_into(shards, str(out), to_seq, until_us,
                                                  on_shard=lambda _: progress.advance())
                finally:
                    private_tree(out)
            else:
                reports = self.rt.rebuild(shards, on_shard=lambda _: progress.advance())
                self._files.clear()
            return replay_report(reports, time.perf_counter() - started, self.rt.shard_nodes())

        return self.jobs.start("replay" if out is not None else "rebuild", len(shards), "shards", replay)

    def replay_discussion(self, agent: str, discussion: str, req: t.DiscussionReplayRequest) -> t.Job:
        """A discussion's three memory files rebuilt from the log (or only compared, `verify`); no LLM call."""
        from engram.projections.discussion_rebuild import rebuild_discussion
        from engram.config.home import ProjectionPaths

        self.discussion_agent(discussion, agent)
        paths = ProjectionPaths(self.home.projections_dir)

        def work(progress: JobProgress) -> Report:
            self.rt.wait_projections()
            started = time.perf_counter()
            records = self.rt.read(agent, stream=discussion, limit=None)
            reports = rebuild_discussion(records, paths, agent, discussion, dry_run=req.verify)
            progress.set(1)
            self._files.pop(agent, None)
            return {"agent": agent, "discussion": discussion, "events": len(records), "verify": req.verify,
                    "seconds": round(time.perf_counter() - started, 3),
                    "files": [{"path": str(r.path), "status": r.status, "size": r.size} for r in reports]}

        return self.jobs.start("discussion-replay", 1, "discussions", work)

    # ------------------------------------------------------------------ across shards

    def reshard(self, req: t.ReshardRequest) -> t.Job:
        """Grow the home to `req.shards` shards (a job; progress counts events copied). Checked before it starts:
        only more shards than the home has, and on a cluster, a node for each new shard."""
        from engram.kernel.sharding import ReshardError

        have = self.config.shards
        if req.shards <= have:
            raise error("invalid_request", f"the home has {have} shard(s); re-sharding only adds shards "
                        f"(asked for {req.shards})")
        try:
            self.config.cluster.check(req.shards)
        except ValueError as exc:
            raise error("invalid_request", f"place the new shards in engram.json's cluster.nodes first: {exc}") from None

        def work(progress: JobProgress) -> Report:
            try:
                with self.source_cache().changing():  # moved messages get new seqs
                    report = self.rt.reshard(req.shards, on_progress=lambda done, total: progress.set(done, total))
            except ReshardError as exc:
                raise error("conflict", str(exc)) from None
            finally:
                self.forget_streams()
                self._files.clear()
            return report

        return self.jobs.start("reshard", 0, "events", work)

    def export(self, req: t.ExportRequest) -> t.Job:
        """Write the log and the projections of every shard as Parquet (and the projection files) into `req.out`
        (under `<home>/exports/` or `server.exportRoot`)."""
        out = self.output_dir(req.out, "out")
        shards = self.rt.all_shards()

        def work(progress: JobProgress) -> Report:
            started = time.perf_counter()
            try:
                reports = self.rt.export_parquet(shards, str(out), on_shard=lambda _: progress.advance())
            finally:
                private_tree(out)
            return {"out": str(out), "shards": reports, "seconds": round(time.perf_counter() - started, 3),
                    "example": f"SELECT type, count(*) FROM '{out}/log/*.parquet' GROUP BY type"}

        return self.jobs.start("export", len(shards), "shards", work)

    def job(self, job_id: str) -> t.Job:
        return self.jobs.get(job_id)

    def job_list(self) -> t.JobList:
        return self.jobs.list()
