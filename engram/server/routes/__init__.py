"""One router module per area; `ROUTERS` is what the app mounts."""

from engram.server import openai
from engram.server.routes import cluster, cognitive, discussions, inspect, listing, messages, system

ROUTERS = [system.router, messages.router, discussions.router, cognitive.router, openai.router, cluster.router,
           inspect.router, listing.router]
