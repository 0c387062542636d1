"""The base of every configuration model: user-facing camelCase keys, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        validate_default=True,
    )

    def to_json_dict(self) -> dict:
        """The model as users write it (their keys), for files and SettingsChanged events."""
        return self.model_dump(by_alias=True, mode="json")
