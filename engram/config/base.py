"""The base of every configuration model: user-facing camelCase keys, unknown keys refused."""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel


def _is_bool(annotation) -> bool:
    if annotation is bool:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return bool in typing.get_args(annotation)
    return False


class ConfigModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        validate_default=True,
        allow_inf_nan=False,  # a setting of Infinity or NaN is a typo, and would reach the log as null
    )

    @field_validator("*", mode="before")
    @classmethod
    def _booleans_are_booleans(cls, value, info: ValidationInfo):
        """A switch is `true` or `false`: "false", "no" or 0 (which pydantic would take) are refused."""
        field = cls.model_fields.get(info.field_name) if info.field_name else None
        if field is not None and _is_bool(field.annotation) and value is not None and not isinstance(value, bool):
            raise ValueError(f"must be true or false, not {value!r:.40}")
        return value

    def to_json_dict(self) -> dict:
        """The model as users write it (their keys), for files and SettingsChanged events."""
        return self.model_dump(by_alias=True, mode="json")
