"""One router module per area; `ROUTERS` is what the app mounts (the inspector will add its own)."""

from engram.server import openai
from engram.server.routes import cluster, cognitive, discussions, messages, system

ROUTERS = [system.router, messages.router, discussions.router, cognitive.router, openai.router, cluster.router]
