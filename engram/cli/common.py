"""What the commands share: opening a home, choosing embedded or joined mode, printing."""

from __future__ import annotations

import csv
import json
import sys
import time
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Iterable

from engram.config.service import ServiceConfig, load_service_config
from engram.home import Home, HomeLayoutError, ProjectionPaths


def config_from(args) -> ServiceConfig:
    return load_service_config(getattr(args, "home", None))


def joined_address(args, config: ServiceConfig) -> str | None:
    """The Ray address to join: --address, RAY_ADDRESS, or a running `engram serve` of this home."""
    from engram.actors.runtime import running_instance

    return getattr(args, "address", None) or config.ray.address or running_instance(Home(config.home, config.shards))


def open_engram(args, config: ServiceConfig | None = None):
    from engram.cli.errors import UsageError
    from engram.client import Engram
    from engram.actors.runtime import Runtime

    config = config or config_from(args)
    try:
        runtime = Runtime(config, address=getattr(args, "address", None))
    except HomeLayoutError as exc:
        raise UsageError(str(exc)) from None
    return Engram(config, runtime.start())


def readonly_session(config: ServiceConfig):
    """SQL over the home's files without starting anything (nobody else may be writing them)."""
    from engram import sqlviews

    home = Home(config.home, config.shards)
    return sqlviews.open_readonly(
        {s: home.log_path(s) for s in range(config.shards)}, ProjectionPaths(home.projections_dir)
    )


def _cell(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def print_rows(names: list[str], rows: Iterable[tuple], fmt: str = "table", out=None) -> None:
    out = out or sys.stdout
    rows = [tuple(_cell(v) for v in r) for r in rows]
    if fmt == "json":
        out.write(json.dumps([dict(zip(names, r)) for r in rows], ensure_ascii=False, default=str, indent=1) + "\n")
        return
    if fmt == "csv":
        w = csv.writer(out)
        w.writerow(names)
        w.writerows(rows)
        return
    text = [[("" if v is None else str(v)).replace("\n", " ") for v in r] for r in rows]
    widths = [min(60, max([len(n)] + [len(r[i]) for r in text])) for i, n in enumerate(names)]
    clip = lambda s, w: s if len(s) <= w else s[: w - 1] + "…"
    out.write("  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in text:
        out.write("  ".join(clip(v, w).ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


class Progress:
    """Progress on stderr: on a terminal, a one-line bar redrawn at most ten times a second; into a file or
    a pipe, a plain line at most every five seconds (a log gets lines, not carriage returns)."""

    def __init__(self, label: str, total: int, stream=None):
        self.label, self.total, self.stream = label, max(total, 1), stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())
        self._last = 0.0 if self.terminal else time.monotonic()

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.1 if self.terminal else 5.0):
            return
        self._last = now
        if self.terminal:
            bar = "#" * int(min(1.0, done / self.total) * 30)
            self.stream.write(f"\r{self.label} [{bar:<30}] {done}/{self.total}")
        else:
            self.stream.write(f"{self.label}: {done}/{self.total}\n")
        self.stream.flush()

    def finish(self, done: int | None = None) -> None:
        self.update(self.total if done is None else done, force=True)
        if self.terminal:
            self.stream.write("\n")
        self.stream.flush()
