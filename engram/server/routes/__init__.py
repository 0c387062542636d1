"""One router module per area; `ROUTERS` is what the app mounts."""

from engram.server.routes import cognitive, discussions, inspect, messages, system

ROUTERS = [system.router, messages.router, discussions.router, cognitive.router, inspect.router]
