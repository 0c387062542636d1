"""The settings scopes the log records (`SettingsChanged`), and the check every fold relies on: a recorded settings
file parses with the model of its scope."""

from __future__ import annotations

import hashlib
import json

from engram.config.agent import AgentConfig
from engram.config.discussion import DiscussionSettings
from engram.config.loader import parse
from engram.config.base import ConfigModel


SCOPE_DISCUSSION = "discussion"  # WilmerAI: _DiscussionId-MemoryFile-Workflow-Settings.json
SCOPE_AGENT = "agent"  # Wunderland: agent.config.json
_MODELS: dict[str, type[ConfigModel]] = {SCOPE_DISCUSSION: DiscussionSettings, SCOPE_AGENT: AgentConfig}


def check_recorded_settings(scope: str, name: str, settings: dict) -> None:
    """Raise ValueError unless `settings` parse with the model of `scope`, as every fold will parse them."""
    model = _MODELS.get(scope)
    if model is None:
        raise ValueError(f"unknown settings scope {scope!r}; the scopes are {', '.join(sorted(_MODELS))}")
    parse(model, settings, name)


def content_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
