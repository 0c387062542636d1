"""engram: long-term memory for AI agents, built as an event-sourced actor system.

The DuckDB event log is the only truth; every file and index is a projection of it.

    from engram import Client          # talk to the home's server over HTTP (what the CLI does)
    from engram import AsyncClient     # the same, async
    from engram import Engram          # the API embedded in this process, over a runtime it owns

The names are imported on first use, so that `import engram.<anything>` stays cheap.
"""

__version__ = "0.1.0"

_LAZY = {"Client": "engram.client", "AsyncClient": "engram.client", "Engram": "engram.boot.embedded"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
