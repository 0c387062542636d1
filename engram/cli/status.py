"""`engram status`: log head per shard, each consumer's position and lag, event counts by type."""

from __future__ import annotations

import json

from engram.cli.common import config_from, joined_address, open_engram
from engram.home import Home, ProjectionPaths


def register(sub) -> None:
    p = sub.add_parser("status", help="log heads, consumer positions and lag, event counts")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def offline_status(config) -> list[dict]:
    """Status read from the files, when no engram process is running for this home."""
    import duckdb

    from engram.projections.registry import projection_classes

    home = Home(config.home, config.shards)
    paths = ProjectionPaths(home.projections_dir)
    out = []
    for shard in range(config.shards):
        entry: dict = {"shard": shard, "head": 0, "streams": 0, "projections": {}, "events_by_type": {}}
        log_path = home.log_path(shard)
        if log_path.exists():
            con = duckdb.connect(str(log_path), read_only=True)
            entry["head"] = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
            entry["streams"] = con.execute("SELECT count(DISTINCT stream) FROM events").fetchone()[0]
            entry["events_by_type"] = dict(
                con.execute("SELECT type, count(*) FROM events GROUP BY type ORDER BY type").fetchall()
            )
            con.close()
            from engram.shard import unfinished_forgets_in

            entry["unfinished_forgets"] = unfinished_forgets_in(log_path)
        positions = {cls.name: 0 for cls in projection_classes()}
        db_path = paths.shard_db(shard)
        if db_path.exists():
            con = duckdb.connect(str(db_path), read_only=True)
            try:
                positions.update(dict(con.execute("SELECT projection, position FROM projection_positions").fetchall()))
                entry["fold_failed"] = [dict(zip(("seq", "projection", "type", "error"), row)) for row in con.execute(
                    "SELECT seq, projection, type, error FROM fold_failed ORDER BY seq, projection").fetchall()]
            except duckdb.CatalogException:
                pass
            con.close()
        for cls in projection_classes():
            pos_file = paths.position_file(cls.name, shard)
            if pos_file.exists():
                positions[cls.name] = json.loads(pos_file.read_text())["position"]
        entry["projections"] = positions
        entry["projection_lag"] = entry["head"] - min(positions.values(), default=entry["head"])
        consumers = {}
        for pos_file in sorted((home.root / "state").glob(f"*.shard-{shard:03d}.*.position.json")):
            info = json.loads(pos_file.read_text())
            name = info["policy"] if info["members"] == 1 else f"{info['policy']}#{info['member']}"
            consumers[name] = info["position"]
        if consumers:
            entry["consumers"] = consumers
        out.append(entry)
    return out


def run(args) -> int:
    config = config_from(args)
    if joined_address(args, config):
        with open_engram(args, config) as mem:
            shards = mem.status()
        mode = "running instance"
    else:
        shards = offline_status(config)
        mode = "files (no engram process running)"
    if args.json:
        print(json.dumps({"home": str(config.home), "mode": mode, "shards": shards}, indent=1, default=str))
        return 0
    print(f"home  {config.home}   ({mode})")
    for st in shards:
        print(f"shard {st['shard']}: head {st['head']}, {st['streams']} stream(s)")
        for name, pos in sorted(st["projections"].items()):
            print(f"  projection {name:<24} position {pos:<10} lag {st['head'] - pos}")
        for name, pos in sorted(st.get("consumers", {}).items()):
            print(f"  consumer   {name:<24} position {pos:<10} lag {st['head'] - pos}")
        for t, n in st["events_by_type"].items():
            print(f"  {t:<32} {n}")
        for item in st.get("unfinished_forgets", []):
            print(f"  UNFINISHED FORGET (marker seq {item['marker_seq']}, {', '.join(item['streams']) or '?'}): "
                  "completed when the shard next starts")
        for item in st.get("fold_failed", []):
            print(f"  quarantined event {item['seq']} ({item['type']}) for projection {item['projection']}: {item['error']}")
        for line in st.get("recovered", []):
            print(f"  recovered at start: {line}")
    return 0
