"""What the commands share: the home's server (started when none runs), printing, progress.

Every command is a client of the home's server (`engram.Client` over HTTP): the first command
starts one in the background and later ones reuse it. This module imports nothing heavy, so a
command answers in a fraction of a second when the server is up.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from engram.cli.errors import UsageError


def count(maximum: int):
    """An argparse `type` for a count from 1 to `maximum`: argparse's refusal names the option as the user typed
    it among its spellings (`argument -k/--limit: …`), which a check after parsing cannot."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {maximum}, got {text!r}") from None
        if not 1 <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be a number from 1 to {maximum}, got {value}")
        return value

    parse.__name__ = "count"
    return parse


def home_of(args) -> Path:
    from engram.server.instance import home_path

    return home_path(getattr(args, "home", None))


def validate_settings(home: Path):
    """engram.json checked before anything starts (a typo costs milliseconds, not a Ray start)."""
    from engram.config.errors import ConfigError
    from engram.config.service import load_service_config

    try:
        return load_service_config(home)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def client(args):
    """The client of the home's server; a server is started in the background when none runs."""
    from engram.client import Client
    from engram.server.instance import ServerStartError, live_server, log_path, start_server

    home = home_of(args)
    info = live_server(home)
    if info is None:
        config = validate_settings(home)
        started = time.perf_counter()

        def announce() -> None:
            print(f"engram: starting a server for {home} (in the background; logs in {log_path(home)}; "
                  "`engram down` stops it)…", file=sys.stderr, flush=True)

        try:
            info = start_server(home, timeout=config.server.start_timeout_seconds, address=getattr(args, "address", None),
                                on_spawn=announce)
        except ServerStartError as exc:
            raise UsageError(str(exc)) from None
        if info.get("started_now"):
            print(f"engram: server ready at {info['url']} in {time.perf_counter() - started:.1f}s", file=sys.stderr,
                  flush=True)
    return Client(info["url"], api_key=os.environ.get("ENGRAM_API_KEY") or info.get("token"))


def _cell(value: Any) -> Any:
    return value


def row_formats(p) -> None:
    """`--json` / `--csv` (default: a table) for a command that prints rows with `print_rows(…, args.fmt)`."""
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv")
    p.set_defaults(fmt="table")


def print_rows(names: list[str], rows: Iterable, fmt: str = "table", out=None) -> None:
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


def print_table(table, fmt: str = "table", out=None) -> None:
    print_rows(table.columns, table.rows, fmt, out)


def to_json(value) -> str:
    """An API response as indented JSON (what --json prints)."""
    import msgspec

    return json.dumps(msgspec.to_builtins(value), indent=1, ensure_ascii=False, default=str)


def discussion_agent(mem, discussion: str, agent: str | None) -> str:
    """The agent owning `discussion`: as given, else from the log (refused when several agents have a discussion of
    that id: then `--agent` names it)."""
    return agent if agent is not None else mem.discussion(discussion).agent


def wait_job(mem, job, label: str, *, stages: bool = False):
    """Wait for a job, with a progress bar on stderr; its result, or its error as a UsageError-like failure.
    `stages`: the job counts another unit at each stage (reindex): the bar names the unit it counts."""
    from engram.api.errors import ApiError

    bar = Progress(label, max(job.progress.total, 1))
    def show(j) -> None:
        bar.total = max(j.progress.total, 1)  # a job may learn its total as it goes (re-sharding counts events)
        if stages:
            bar.note = j.progress.unit
        bar.update(j.progress.done)

    done = mem.wait_job(job.id, on_progress=show)
    bar.finish(done.progress.done)
    if done.state == "failed":
        raise ApiError(400 if done.error.code != "internal" else 500, done.error.code, done.error.message)
    return done.result


class Progress:
    """Progress on stderr: on a terminal, a one-line bar redrawn at most ten times a second; into a file or
    a pipe, a plain line at most every five seconds (a log gets lines, not carriage returns)."""

    def __init__(self, label: str, total: int, stream=None):
        self.label, self.total, self.stream = label, max(total, 1), stream or sys.stderr
        self.note = ""  # shown after the counts, e.g. what the work waits for
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())
        self._last = 0.0 if self.terminal else time.monotonic()
        self._width = 0

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.1 if self.terminal else 5.0):
            return
        self._last = now
        note = f" ({self.note})" if self.note else ""
        if self.terminal:
            bar = "#" * int(min(1.0, done / self.total) * 30)
            line = f"{self.label} [{bar:<30}] {done}/{self.total}{note}"
            # Padded to the previous line's width: a shorter line (a note gone) leaves nothing of it behind.
            self.stream.write(f"\r{line:<{self._width}}")
            self._width = len(line)
        else:
            self.stream.write(f"{self.label}: {done}/{self.total}{note}\n")
        self.stream.flush()

    def finish(self, done: int | None = None) -> None:
        self.update(self.total if done is None else done, force=True)
        if self.terminal:
            self.stream.write("\n")
        self.stream.flush()
