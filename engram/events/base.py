"""What an event is: a frozen msgspec Struct with a stable tag and a schema version.

Every concrete event type subclasses `Event` with an explicit tag:

    class MessageAppended(Event, tag="MessageAppended", frozen=True):
        SCHEMA_VERSION: ClassVar[int] = 1
        ...

(`frozen=True` is inherited from `Event`; a subclass with fields says it again, or mypy reads it as a mutable
dataclass inheriting from a frozen one.)

Tags are stored in the log and must never change. New fields get defaults; renames and
type changes bump SCHEMA_VERSION and register an upcaster (see `upcasters.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event type."""

    SCHEMA_VERSION: ClassVar[int] = 1

    @classmethod
    def tag(cls) -> str:
        return cls.__struct_config__.tag  # type: ignore[return-value]

    def check(self) -> None:
        """Raise ValueError for what the folds of this type cannot use (field types are checked already).

        Called before the event is acknowledged (`engram.events.validation`); override to add checks."""

    def identity(self) -> tuple[Any, ...] | None:
        """What an event appended again under the same event id must match to be a repeat of this one (the log
        acknowledges a repeat without writing it; a different event under the id is refused: `EventIdConflict`).
        None, the default: repeats are not compared; the first stands (a policy's decision recorded again after a
        restart may come out differently, e.g. another LLM answer). Types whose ids come from clients override it."""
        return None

    def id_label(self, event_id: str) -> str:
        """How an error names this event's id."""
        return f"{self.tag()} id {event_id!r}"


class UnknownEventType(KeyError):
    pass


_registry: dict[str, type[Event]] = {}
_seen_classes = 0


def _walk(cls: type) -> list[type]:
    out: list[type] = []
    sub: type
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_walk(sub))
    return out


def registry() -> dict[str, type[Event]]:
    """Every event type by tag. Built from the subclasses of Event; duplicate tags are an error."""
    global _seen_classes
    classes = _walk(Event)
    if len(classes) != _seen_classes:
        found = index_by_tag(classes)
        _registry.clear()
        _registry.update(found)
        _seen_classes = len(classes)
    return _registry


def index_by_tag(classes: list[type]) -> dict[str, type]:
    """Classes by their explicit string tag; two classes with one tag is an error."""
    found: dict[str, type] = {}
    for cls in classes:
        tag = cls.__struct_config__.tag  # type: ignore[attr-defined]  # a msgspec Struct class
        if tag is None:
            continue  # an abstract intermediate class
        if not isinstance(tag, str):
            raise TypeError(f"{cls.__name__}: event tags must be explicit strings")
        if tag in found and found[tag] is not cls:
            raise TypeError(f"event tag {tag!r} used by both {found[tag].__name__} and {cls.__name__}")
        found[tag] = cls
    return found


def event_class(tag: str) -> type[Event]:
    try:
        return registry()[tag]
    except KeyError:
        raise UnknownEventType(f"unknown event type {tag!r}") from None
