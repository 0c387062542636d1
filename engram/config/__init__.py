"""Pydantic models of every configuration file, their loaders and defaults."""

from engram.config.agent import AGENT_CONFIG_FILE_NAME, AgentConfig
from engram.config.discussion import SETTINGS_FILE_NAME, DiscussionSettings
from engram.config.errors import ConfigError
from engram.config.loader import load, load_or_default, parse
from engram.config.service import ServiceConfig, load_service_config

__all__ = [
    "AGENT_CONFIG_FILE_NAME",
    "AgentConfig",
    "SETTINGS_FILE_NAME",
    "DiscussionSettings",
    "ConfigError",
    "load",
    "load_or_default",
    "parse",
    "ServiceConfig",
    "load_service_config",
]
