"""Loading configuration files into their pydantic models."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from engram.config import jsonc
from engram.config.errors import ConfigError, explain

M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: object, source: str) -> M:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise explain(exc, model, source) from None


def load(model: type[M], path: str | Path) -> M:
    """Read `path` (JSON with comments) into `model`; every problem is a ConfigError naming the file."""
    path = Path(path)
    return parse(model, jsonc.load(path, ConfigError), str(path))


def load_or_default(model: type[M], path: str | Path) -> M:
    path = Path(path)
    return load(model, path) if path.exists() else model()
