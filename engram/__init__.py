"""engram: long-term memory for AI agents, built as an event-sourced actor system.

The DuckDB event log is the only truth; every file and index is a projection of it.
"""

__version__ = "0.1.0"
