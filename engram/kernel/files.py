"""Files that survive a crash: an atomic replace, and a DuckDB file rewritten compact (after an erasure, so that erased
payloads leave the file too)."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb


def compact_database(path: str | Path) -> None:
    """Rewrite a closed DuckDB file table by table, so freed blocks (e.g. purged payloads)
    are not carried over. The file is replaced atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".compact")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{_quote(path)}' AS old (READ_ONLY)")
        con.execute(f"ATTACH '{_quote(tmp)}' AS fresh")
        con.execute("COPY FROM DATABASE old TO fresh")
        con.execute("DETACH old")
        con.execute("DETACH fresh")
    finally:
        con.close()
    os.replace(tmp, path)
    Path(str(path) + ".wal").unlink(missing_ok=True)


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
