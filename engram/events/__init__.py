"""Event types, their codec, and the DuckDB event log.

Importing this package registers the whole catalogue.
"""

from engram.events import background, cognitive, control, discussion, llm, memory_edits, messages  # noqa: F401
from engram.events.base import Event, event_class, registry
from engram.events.envelope import Appended, NewEvent, Recorded, Write

__all__ = ["Event", "event_class", "registry", "Appended", "NewEvent", "Recorded", "Write"]
