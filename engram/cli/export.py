"""`engram export --parquet DIR`: the log and the projections of every shard as Parquet, for plain DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

from engram.cli.common import client, wait_job


def register(sub) -> None:
    p = sub.add_parser("export", help="write the log and projections as Parquet files (read them with plain DuckDB)",
                       description="Writes DIR/log/shard-NNN.parquet (every event, every column), "
                       "DIR/projections/<table>/shard-NNN.parquet (every projection table) and the projection files "
                       "(DIR/projections/agents/...). Example: duckdb -c \"SELECT type, count(*) FROM "
                       "'DIR/log/*.parquet' GROUP BY type\"")
    p.add_argument("--parquet", required=True, metavar="DIR", help="a fresh directory to write into, under <home>/exports/ or server.exportRoot")
    p.add_argument("--json", action="store_true", help="print the job's report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    out = str(Path(args.parquet).expanduser().resolve())
    with client(args) as mem:
        result = wait_job(mem, mem.export(out), "export (shards)")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for r in result["shards"]:
        tables = ", ".join(f"{t} ({n})" for t, n in r["tables"].items())
        print(f"shard {r['shard']}: {r['events']} events, tables {tables}, {r['files']} projection file(s)")
    print(f"written to {result['out']} in {result['seconds']}s; e.g. duckdb -c \"{result['example']}\"")
    return 0
