"""One router module per area; `ROUTERS` is what the app mounts."""

from engram.server import ollama, openai
from engram.server.routes import cluster, cognitive, discussions, events, inspect, listing, memories, messages, system

ROUTERS = [system.router, messages.router, discussions.router, cognitive.router, memories.router, events.router,
           openai.router, ollama.router, cluster.router, inspect.router, listing.router]
