"""`engram mcp`: engram as an MCP server over stdio, for desktop agents (Claude Desktop, IDEs).

A client of the home's server like every command (started in the background when none runs, at the first
tool call); its key is $ENGRAM_API_KEY, else the server's instance token. The same tools are served over
streamable HTTP at `<server>/mcp`.
"""

from __future__ import annotations

from engram.cli.common import home_of


def register(sub) -> None:
    p = sub.add_parser("mcp", help="serve engram's MCP tools over stdio (for desktop agents)")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.kernel import logs
    from engram.client import Client
    from engram.mcp.backends import ClientBackend
    from engram.mcp.server import build

    logs.configure()  # stderr, one line per record (stdout carries the protocol)
    home = home_of(args)
    backend = ClientBackend(lambda: Client.for_home(home))
    build(lambda ctx: backend).run("stdio")
    return 0
