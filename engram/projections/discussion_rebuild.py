"""Rebuilding one discussion's three files from its events: replay for a single discussion.

The files depend only on the discussion's own events, so folding just those events with the
same projections gives the bytes a full replay gives (the `.db` row for row, its HNSW index
byte for byte). No LLM and no embedder is involved: every output is in the events.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import duckdb

from engram.config.home import ProjectionPaths
from engram.events.envelope import Recorded
from engram.memory.discussion.files import SUFFIXES
from engram.projections.base import ProjectionContext
from engram.projections.compare import differences

PROJECTIONS = ("engram.projections.discussion_files:DiscussionFiles", "engram.projections.vector_memory:VectorMemory")


@dataclass
class FileReport:
    path: Path
    # restored (was missing), identical, replaced (differed), differs (left as it was),
    # removed (the log says it must not exist), absent, untouched
    status: str
    size: int = 0


def render_discussion(records: Sequence[Recorded], out: ProjectionPaths) -> None:
    """Fold `records` (one discussion's events, in seq order) into files under `out`."""
    import importlib

    db = duckdb.connect()
    try:
        ctx = ProjectionContext(shard=0, paths=out, db=db)
        projections = []
        for spec in PROJECTIONS:
            module, _, name = spec.partition(":")
            projections.append(getattr(importlib.import_module(module), name)(ctx))
        for proj in projections:
            proj.apply_batch([r for r in records if proj.wants(r)])
            proj.checkpoint()
    finally:
        db.close()


def rebuild_discussion(records: Sequence[Recorded], live: ProjectionPaths, agent: str, discussion: str,
                       *, only_missing: bool = False, dry_run: bool = False) -> list[FileReport]:
    """Replace `discussion`'s live files with the ones its events give (or just compare them)."""
    scratch = Path(tempfile.mkdtemp(prefix="engram-rebuild-"))
    try:
        fresh = ProjectionPaths(scratch)
        render_discussion(records, fresh)
        reports = []
        for suffix in SUFFIXES:
            src = fresh.discussion_file(agent, discussion, suffix)
            dst = live.discussion_file(agent, discussion, suffix)
            if not src.exists():
                if dst.exists() and not only_missing:
                    if not dry_run:
                        dst.unlink()
                    reports.append(FileReport(dst, "removed"))
                else:
                    reports.append(FileReport(dst, "absent" if not dst.exists() else "untouched"))
                continue
            if not dst.exists():
                status = "restored"
            elif _same(src, dst):
                reports.append(FileReport(dst, "identical", dst.stat().st_size))
                continue
            elif only_missing:
                reports.append(FileReport(dst, "differs", dst.stat().st_size))
                continue
            else:
                status = "replaced"
            if not dry_run:
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(f".{dst.name}.rebuild")
                shutil.copyfile(src, tmp)
                os.replace(tmp, dst)
            reports.append(FileReport(dst, status, src.stat().st_size))
        return reports
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _same(a: Path, b: Path) -> bool:
    """Files equal as projections compare them: `.db` row for row, others byte for byte."""
    if a.name.endswith(".db"):
        with tempfile.TemporaryDirectory(prefix="engram-compare-") as tmp:
            left, right = Path(tmp) / "a", Path(tmp) / "b"
            left.mkdir()
            right.mkdir()
            shutil.copyfile(a, left / a.name)
            shutil.copyfile(b, right / a.name)
            return not differences(left, right)
    return a.read_bytes() == b.read_bytes()
