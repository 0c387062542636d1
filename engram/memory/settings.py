"""Settings as recorded events: policies use the settings the log says were in force.

A settings file on disk is read by the shell (CLI, API) and, when its content differs from
what the log last recorded, appended as `SettingsChanged`. Policies fold those events with
`SettingsView`, so replay and regeneration see exactly the settings that were used.

Streams: agent-wide settings go to `agent:<agent>`; a discussion's own settings (e.g.
`engram regenerate --settings FILE`) go to the discussion's stream and override them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar, cast

from engram.config.agent import AgentConfig
from engram.config.discussion import DiscussionSettings
from engram.config.home import Home
from engram.config.llm import LlmConfig
from engram.config.loader import load, parse
from engram.config.recorded import SCOPE_AGENT, SCOPE_DISCUSSION, content_hash
from engram.events.control import SettingsChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.kernel.ids import agent_stream
from engram.providers.llm.routing import check_discussion_settings


def settings_event(scope: str, name: str, model: DiscussionSettings | AgentConfig) -> SettingsChanged:
    data = model.to_json_dict()
    return SettingsChanged(scope=scope, name=name, settings=data, content_hash=content_hash(data))


def current_files(home: Home, agent: str, llm: LlmConfig | None = None) -> dict[str, SettingsChanged]:
    """The settings files in force for `agent` now (defaults where a file is absent), validated;
    with `llm` (the LlmConfig in use), the endpoints and presets they name are checked too."""
    out: dict[str, SettingsChanged] = {}
    disc_path = home.settings_path
    disc = load(DiscussionSettings, disc_path) if disc_path.exists() else DiscussionSettings()
    if llm is not None:
        check_discussion_settings(disc, llm, str(disc_path))
    out[SCOPE_DISCUSSION] = settings_event(SCOPE_DISCUSSION, disc_path.name, disc)
    agent_path = home.agent_config_path(agent)
    cfg = load(AgentConfig, agent_path) if agent_path.exists() else AgentConfig()
    out[SCOPE_AGENT] = settings_event(SCOPE_AGENT, agent_path.name, cfg)
    return out


def sync_writes(home: Home, agent: str, recorded: dict[str, str], ts_us: int, llm: LlmConfig | None = None) -> list[Write]:
    """SettingsChanged writes for each scope whose file content differs from `recorded` (scope -> hash).
    `llm`: check the endpoints and presets the files name against it (see `current_files`)."""
    events = [
        NewEvent(event=ev, ts_us=ts_us, event_id=f"settings:{scope}:{ev.content_hash}:{recorded.get(scope, '-')}")
        for scope, ev in current_files(home, agent, llm).items()
        if recorded.get(scope) != ev.content_hash
    ]
    return [Write(stream=agent_stream(agent), agent=agent, events=tuple(events))] if events else []


def discussion_settings_event(path: str | Path, llm: LlmConfig | None = None) -> SettingsChanged:
    """A settings file given explicitly (e.g. for regeneration), validated (its routes against `llm`)."""
    path = Path(path)
    settings = load(DiscussionSettings, path)
    if llm is not None:
        check_discussion_settings(settings, llm, str(path))
    return settings_event(SCOPE_DISCUSSION, path.name, settings)


_DEFAULTS: dict[type, object] = {}
_Model = TypeVar("_Model", DiscussionSettings, AgentConfig)


def _default(model: type[_Model]) -> _Model:
    """The defaults of a (frozen) settings model, built once per process."""
    found = _DEFAULTS.get(model)
    if found is None:
        found = _DEFAULTS[model] = model()
    return cast(_Model, found)


class SettingsView:
    """Fold of SettingsChanged events: the settings in force for each agent and discussion."""

    interests = frozenset({"SettingsChanged"})

    def __init__(self) -> None:
        self._agent: dict[tuple[str, str], SettingsChanged] = {}
        self._discussion: dict[tuple[str, str, str], SettingsChanged] = {}  # (agent, discussion, scope)
        self._parsed: dict[tuple[type, int], tuple[SettingsChanged, object]] = {}
        # One event per content (scope, file name, hash): a thousand agents on the default files record a thousand
        # equal events, and each policy process would keep every one decoded (and parsed, `_parsed`), ~20 KB an
        # agent per policy. Equal frozen events are interchangeable, so the first one stands for the others.
        self._by_content: dict[tuple[str, str, str], SettingsChanged] = {}

    def _parse(self, model: type[_Model], ev: SettingsChanged) -> _Model:
        """`ev`'s settings as `model`, validated once per content: policies ask for the settings in force at
        every message, and validating a whole AgentConfig each time cost more than deciding on the message.
        The models are frozen, so one parsed value serves every caller. Keyed by the event itself (kept
        alive beside its value, so its id is never another event's)."""
        cache: dict[tuple[type, int], tuple[SettingsChanged, object]] = self.__dict__.setdefault("_parsed", {})  # a view unpickled from before the cache has none
        key = (model, id(ev))
        found = cache.get(key)
        if found is None or found[0] is not ev:
            found = cache[key] = (ev, parse(model, ev.settings, ev.name))
        return cast(_Model, found[1])  # parsed as `model` (the key's first half)

    def _shared(self, ev: SettingsChanged) -> SettingsChanged:
        """The event of this content the view already holds (equal in every field), else `ev`, now held."""
        shared: dict[tuple[str, str, str], SettingsChanged] = self.__dict__.setdefault("_by_content", {})  # unpickled from before
        key = (ev.scope, ev.name, ev.content_hash)
        found = shared.get(key)
        if found is not None and found == ev:
            return found
        shared[key] = ev
        return ev

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if not isinstance(ev, SettingsChanged):
            return
        ev = self._shared(ev)
        if rec.stream.startswith("agent:"):
            self._agent[(rec.agent, ev.scope)] = ev
        else:
            self._discussion[(rec.agent, rec.stream, ev.scope)] = ev  # a discussion id is unique within its agent

    def recorded_hashes(self, agent: str) -> dict[str, str]:
        found = ((scope, self._agent.get((agent, scope))) for scope in (SCOPE_DISCUSSION, SCOPE_AGENT))
        return {scope: ev.content_hash for scope, ev in found if ev is not None}

    def discussion_settings(self, agent: str, discussion: str | None = None) -> DiscussionSettings:
        ev = (discussion and self._discussion.get((agent, discussion, SCOPE_DISCUSSION))) or self._agent.get(
            (agent, SCOPE_DISCUSSION)
        )
        return self._parse(DiscussionSettings, ev) if ev else _default(DiscussionSettings)

    def agent_config(self, agent: str) -> AgentConfig:
        ev = self._agent.get((agent, SCOPE_AGENT))
        return self._parse(AgentConfig, ev) if ev else _default(AgentConfig)

    def state(self) -> tuple[dict[tuple[str, str], SettingsChanged], dict[tuple[str, str, str], SettingsChanged]]:
        return self._agent, self._discussion

    def restore(self, state: tuple[dict[tuple[str, str], SettingsChanged], dict[tuple[str, str, str], SettingsChanged]]
                ) -> None:
        agent, discussion = state
        if any(len(key) != 3 for key in discussion):  # a snapshot keyed by discussion id alone (before ids per agent)
            raise ValueError("discussion settings keyed without their agent: rebuild from the log")
        self._by_content = {}
        self._agent = {key: self._shared(ev) for key, ev in agent.items()}
        self._discussion = {key: self._shared(ev) for key, ev in discussion.items()}
