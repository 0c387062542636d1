"""Entry point of the `engram` command.

Each command lives in its own module of this package and exposes
`register(subparsers) -> None`, which adds its parser and sets `func(args) -> int`.
Every command is a client of the home's server (started in the background by the first command).
Exit codes: 0 success, 1 failure, 2 bad input or a problem the user can fix (invalid id, malformed
file, bad settings, a lock held by another process, a server that did not start); always one line
on stderr, never a traceback.

Module imports here and in the command modules stay light (no Ray, DuckDB, numpy, pydantic), so that
a command answers in a fraction of a second when the server is up.
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
    "costs",
    "status",
    "replay",
    "reshard",
    "reindex",
    "export",
    "serve",
    "down",
    "keys",
    "mcp",
    "forget",
    "embed",
    "workflow",
    "memories",
    "summary",
    "search",
    "regenerate",
    "recall",
    "traces",
    "memory",
    "working_memory",
    "mood",
    "init",
    "chat",
    "compactions",
    "context",
    "observations",
    "consolidations",
    "inspect",
    "llm",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    parser.add_argument("--home", help="engram home directory (default: $ENGRAM_HOME or ~/.engram)")
    parser.add_argument("--address", help="Ray cluster for a server this command starts (default: $RAY_ADDRESS, "
                                          "else a local Ray instance)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"engram.cli.{name}").register(sub)
    return parser


def one_line(text) -> str:
    """A message as one line (several problems joined with "; ")."""
    return "; ".join(" ".join(line.split()) for line in str(text).strip().splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    from engram.api.errors import ApiError
    from engram.kernel.ids import InvalidIdError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, InvalidIdError) as exc:
        print(f"engram: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except ApiError as exc:
        print(f"engram: error: {one_line(exc.message)}", file=sys.stderr)
        return 1 if exc.code == "internal" else 2
    except BrokenPipeError:  # `engram sql ... | head`: the reader has gone; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except ConnectionError as exc:
        from engram.server.instance import home_path, log_path

        print(f"engram: error: the engram server stopped answering ({exc.__class__.__name__}); "
              f"see {log_path(home_path(args.home))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: still one line (the server log has the server's side)
        if os.environ.get("ENGRAM_DEBUG"):
            raise
        print(f"engram: error: {type(exc).__name__}: {one_line(exc)} (ENGRAM_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
