"""The EventStore actor: one per shard, the only writer of the shard's DuckDB files."""

from __future__ import annotations

from typing import Sequence

import ray

from engram.events.envelope import Appended, Recorded, Write
from engram.shard.host import ShardHost

# Concurrent appends run on the actor's threads, where EventStore's group commit gathers them.
SHARD_ACTOR_CONCURRENCY = 64


@ray.remote(max_restarts=-1, max_task_retries=0)
class ShardActor:
    """Thin shell: every method delegates to ShardHost.

    A restart re-runs the constructor, which reopens the log and resumes the projections
    from their recorded positions. Ray retries no call (`max_task_retries=0`): the runtime
    retries what is idempotent (reads; appends whose every event carries an event id).
    """

    def __init__(
        self, log_path: str, projections_dir: str, shard: int, max_batch_events: int, max_payload_bytes: int,
        config_json: dict | None = None, embedder_actor: str | None = None,
    ):
        from engram.actors.services import actor_services
        from engram.config.service import ServiceConfig

        # Projections get the same services as policies (e.g. the home's embedder, which the trace index needs).
        config = ServiceConfig.model_validate(config_json) if config_json else None
        services = actor_services(config, embedder_actor) if config else None
        self._home = str(config.home) if config else ""
        self._embedder_actor = embedder_actor
        self.host = ShardHost(
            log_path,
            projections_dir,
            shard=shard,
            max_batch_events=max_batch_events,
            max_payload_bytes=max_payload_bytes,
            services=services,
            max_projection_lag=config.limits.max_projection_lag_events if config else 0,
        )

    def append_many(self, writes: Sequence[Write]) -> list[Appended]:
        return self.host.append_many(writes)

    def read(self, after: int = 0, **kwargs) -> list[Recorded]:
        return self.host.read(after, **kwargs)

    def read_rows(self, after: int = 0, **kwargs) -> list[tuple]:
        """`read` undecoded (`engram.events.store.decode_rows`): what consumers in other processes read."""
        return self.host.read_rows(after, **kwargs)

    def read_page(self, after: int, limit: int, to_seq: int | None = None) -> list[tuple]:
        return self.host.read_page(after, limit, to_seq)

    def head(self) -> int:
        return self.host.head()

    def wait(self, seq: int, timeout: float | None = None) -> bool:
        return self.host.wait(seq, timeout)

    def wait_for(self, seq: int, types: list[str] | None, timeout: float | None = None,
                 linger: float = 0.0, prompt: list[str] | None = None) -> tuple[bool, int]:
        """`wait` for a reader of `types` only: (whether one of them may be new, the head); `EventStore.wait_for`."""
        return self.host.wait_for(seq, types, timeout, linger, prompt)

    def wait_projections(self, seq: int, timeout: float | None = 30.0) -> bool:
        return self.host.wait_projections(seq, timeout)

    def projection_position(self) -> int:
        return self.host.projection_position()

    def query(self, sql: str, params: list | None = None) -> tuple[list[str], list[tuple]]:
        return self.host.query(sql, params)

    def expected_files(self, agent: str, discussion: str) -> tuple[bool, bool, bool]:
        return self.host.expected_files(agent, discussion)

    def sql(self, sql: str, params: list | None = None, agents: list[str] | None = None,
            timeout_s: float | None = None, max_rows: int | None = None):
        """Read-only, confined SQL (`engram.sql.run_readonly`); the API's entry point for user queries."""
        return self.host.sql(sql, params, agents=agents, timeout_s=timeout_s, max_rows=max_rows)

    def status(self) -> dict:
        return self.host.status()

    def progress(self) -> dict:
        return self.host.progress()

    def relations(self, names: list[str] | None, agents: Sequence[str] | None = None) -> dict:
        return self.host.relations(names, agents)

    def where(self) -> dict:
        from engram.actors.services import where

        return where()

    def replay_into(self, out_dir: str, to_seq: int | None = None, until_us: int | None = None) -> dict:
        return self.host.replay_into(out_dir, to_seq=to_seq, until_us=until_us)

    def forget(self, agent: str, discussion: str | None = None, reason: str = "") -> dict:
        return self.host.forget(agent, discussion, reason=reason)

    def begin_forget(self, agent: str, discussion: str | None = None, reason: str = "") -> tuple[int, list[str]]:
        return self.host.begin_forget(agent, discussion, reason=reason)

    def begin_delete_memory(self, agent: str, kind: str, memory_id: str, reason: str = "") -> tuple[int, list[str]]:
        return self.host.begin_delete_memory(agent, kind, memory_id, reason=reason)

    def complete_forget(self, marker_seq: int, streams: list[str]) -> tuple[dict, list[str]]:
        return self.host.complete_forget(marker_seq, streams)

    def streams(self) -> dict[tuple[str, str], int]:
        return self.host.store.streams()

    def export_agents(self, agents: Sequence[str], after: int = 0, limit: int = 50_000):
        return self.host.export_agents(agents, after, limit)

    def import_rows(self, table) -> int:
        return self.host.import_rows(table)

    def count_events(self, agents: Sequence[str]) -> int:
        return self.host.count_events(agents)

    def remove_agents(self, agents: Sequence[str]) -> dict:
        return self.host.remove_agents(agents)

    def export_parquet(self, out_dir: str) -> dict:
        return self.host.export_parquet(out_dir)

    def verify_replay(self) -> list[str]:
        return self.host.verify_replay()

    def rebuild(self) -> dict:
        return self.host.rebuild()

    def open_generation(self) -> dict:
        """A new generation of the projections, embedded by what the home's embedder actor prepared (`reindex`)."""
        from engram.actors.embedder import PreparedEmbedder

        if self._embedder_actor is None:
            raise RuntimeError("this shard actor has no embedder actor to build a new generation with")
        return self.host.open_generation(PreparedEmbedder(self._embedder_actor, self._home))

    def advance_generation(self, max_events: int, to_seq: int) -> dict:
        return self.host.advance_generation(max_events, to_seq)

    def finish_generation(self, key: str) -> dict:
        return self.host.finish_generation(key)

    def discard_generation(self) -> None:
        self.host.discard_generation()

    def close(self) -> bool:
        self.host.close()
        return True
