"""Comparing two projection directories: files byte for byte, DuckDB tables row for row."""

from __future__ import annotations

from pathlib import Path

import duckdb

# DuckDB files are not byte-stable (page layout depends on write history); their rows are.
_DB_SUFFIXES = (".duckdb", ".duckdb.wal", ".db", ".db.wal")


def _files(root: Path, within: list[Path] | None) -> dict[str, Path]:
    tops = [root] if within is None else [root / w for w in within]
    found = {}
    for top in tops:
        candidates = [top] if top.is_file() else sorted(top.rglob("*")) if top.exists() else []
        for p in candidates:
            if (p.is_file() and not p.name.startswith(".") and not p.name.endswith(".wal")
                    and "_positions" not in p.relative_to(root).parts):
                # (a .wal is DuckDB's write-ahead state of the file beside it, read with it in `_tables`)
                found[str(p.relative_to(root))] = p
    return found


def _tables(path: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY table_name").fetchall()]
        out = {}
        for name in names:
            if name == "projection_positions":
                continue  # positions depend on where a replay stopped, not on the state
            out[name] = sorted(con.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
        return out
    finally:
        con.close()


def differences(left: Path, right: Path, within: list[Path] | None = None) -> list[str]:
    """What differs between two projection directories (empty when they hold the same state).

    `within`: relative paths (files or folders) to compare instead of everything.
    """
    a, b = _files(Path(left), within), _files(Path(right), within)
    diffs = [f"only in {left}: {k}" for k in sorted(a.keys() - b.keys())]
    diffs += [f"only in {right}: {k}" for k in sorted(b.keys() - a.keys())]
    for key in sorted(a.keys() & b.keys()):
        if key.endswith(_DB_SUFFIXES):
            if key.endswith(".wal"):
                continue
            ta, tb = _tables(a[key]), _tables(b[key])
            for table in sorted(ta.keys() | tb.keys()):
                if ta.get(table) != tb.get(table):
                    diffs.append(f"{key}: table {table} differs")
        elif a[key].read_bytes() != b[key].read_bytes():
            diffs.append(f"{key}: bytes differ")
    return diffs
