"""Entry point of the `engram` command.

Each command lives in its own module of this package and exposes
`register(subparsers) -> None`, which adds its parser and sets `func(args) -> int`.
Exit codes: 0 success, 1 failure, 2 bad input (invalid id, malformed file, bad settings).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from engram.cli.errors import UsageError  # re-exported: command modules may import it from here

# Command modules, in the order `engram --help` lists them.
COMMANDS = [
    "demo",
    "ingest",
    "sql",
    "status",
    "replay",
    "serve",
    "forget",
    "embed",
    "workflow",
    "memories",
    "summary",
    "search",
    "regenerate",
    "recall",
    "traces",
    "working_memory",
    "mood",
    "init",
    "chat",
    "compactions",
    "context",
    "observations",
    "consolidations",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    parser.add_argument("--home", help="engram home directory (default: $ENGRAM_HOME or ~/.engram)")
    parser.add_argument("--address", help="Ray cluster address to join (default: $RAY_ADDRESS, else start locally)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"engram.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from engram.config.errors import ConfigError
    from engram.ids import InvalidIdError
    from engram.settings import UnknownAgent

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, InvalidIdError, ConfigError, UnknownAgent) as exc:
        print(f"engram: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `engram sql ... | head`: the reader has gone; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
