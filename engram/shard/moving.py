"""Agents moving between shards: their rows out, rows in, agents removed (a part of `ShardHost`)."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from engram.kernel.gate import alone, shared
from engram.shard.base import ShardBase


class ShardMoves(ShardBase):
    """Agents moving between shards: their rows out, rows in, agents removed (a part of `ShardHost`)."""

    @shared
    def export_agents(self, agents: Sequence[str], after: int = 0, limit: int = 50_000) -> pa.Table:
        """The log rows of `agents` after `after` (an Arrow table, every column), in seq order."""
        return self.store.export_agents(agents, after, limit)

    @shared
    def count_events(self, agents: Sequence[str]) -> int:
        _, rows = self.store.query("SELECT count(*) FROM events WHERE agent IN (SELECT unnest(?))", [list(agents)])
        n: int = rows[0][0]
        return n

    @shared
    def import_rows(self, table: pa.Table) -> int:
        """Rows exported by the parent shard, appended at their own positions; the projections fold them."""
        n = self.store.import_rows(table)
        self._recount()
        return n

    @alone
    def remove_agents(self, agents: Sequence[str]) -> dict[str, Any]:
        """The agents moved to another shard: their events leave this log and the projections are rebuilt without
        them (their files now belong to the shard that holds them, so they are left in place)."""
        self.wait_projections(self.store.head(), timeout=None)
        removed = self.store.remove_agents(agents)
        self._recount()
        report = self.rebuild()
        return {"shard": self.shard, "agents": len(agents), "events_removed": removed, "head": self.store.head(),
                "rebuild": report}
