"""engram over MCP (the official `mcp` SDK): `engram mcp` (stdio, for desktop agents) and `/mcp` in the server.

An interface like the CLI: tools and resources call `engram.api` (in the server) or `engram.Client` (over
stdio, a client of the home's server), never Ray or the actors.
"""
