"""`engram serve`: run the home's server in the foreground (other commands use it while it runs).

The server owns the home's Ray instance and DuckDB files and serves HTTP on loopback (`--host/--port`,
or `server.host/server.port` in engram.json); its URL is printed and recorded in `<home>/instance.json`.
Without `engram serve`, the first command of any kind starts the same server in the background.
"""

from __future__ import annotations

import os

from engram.cli.common import home_of
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the home's server in the foreground (HTTP on loopback); Ctrl-C stops it")
    p.add_argument("--host", help="address to listen on (default: server.host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: server.port; 0 picks a free one)")
    p.add_argument("--backend", choices=("uvicorn", "ray-serve"), help="default: server.backend (uvicorn)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Become the server process (the composition root `engram.boot.serve`): the CLI itself never loads Ray."""
    import sys

    from engram.server.instance import server_command

    home = home_of(args)
    if args.port is not None and not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port number")
    cmd = server_command(home, started_by_command=False, host=args.host, port=args.port, address=args.address)
    if args.backend:
        cmd += ["--backend", args.backend]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cmd[0], cmd)
    return 0  # not reached
