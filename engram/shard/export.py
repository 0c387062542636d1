"""A shard's log and projection tables as Parquet."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from engram.config.home import ProjectionPaths
from engram.kernel.gate import shared
from engram.shard.base import ShardBase


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


class ShardExport(ShardBase):
    """The shard as Parquet (a part of `ShardHost`)."""

    @shared
    def export_parquet(self, out_dir: str | Path) -> dict[str, Any]:
        """This shard's log and projection tables as Parquet under `out_dir` (`log/shard-NNN.parquet`,
        `projections/<table>/shard-NNN.parquet`), its agents' projection files copied beside them: a home that
        plain DuckDB reads with globs over every shard (`SELECT ... FROM '<out>/log/*.parquet'`)."""
        self.wait_projections(self.store.head(), timeout=None)
        out = Path(out_dir)
        name = f"shard-{self.shard:03d}.parquet"
        (out / "log").mkdir(parents=True, exist_ok=True)
        report: dict[str, Any] = {"shard": self.shard, "events": 0, "tables": {}, "files": 0}
        cur = self.store.cursor()
        try:
            catalog = cur.execute("SELECT current_database()").fetchall()[0][0]
            report["events"] = cur.execute(f'SELECT count(*) FROM "{catalog}".main.events').fetchall()[0][0]
            cur.execute(f'COPY (SELECT * FROM "{catalog}".main.events ORDER BY seq) TO {_literal(out / "log" / name)} '
                        "(FORMAT parquet)")
            tables = [t for (t,) in cur.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'proj' ORDER BY table_name").fetchall()]
            for table in tables:
                (out / "projections" / table).mkdir(parents=True, exist_ok=True)
                report["tables"][table] = cur.execute(f'SELECT count(*) FROM proj.main."{table}"').fetchall()[0][0]
                cur.execute(f'COPY proj.main."{table}" TO {_literal(out / "projections" / table / name)} (FORMAT parquet)')
        finally:
            cur.close()
        agents = sorted({agent for agent, _ in self.store.streams()})
        for agent in agents:
            src = self.paths.agent_dir(agent)
            if src.exists():
                dst = ProjectionPaths(out / "projections").agent_dir(agent)
                shutil.copytree(src, dst, dirs_exist_ok=True)
                report["files"] += sum(1 for p in dst.rglob("*") if p.is_file())
        return report
