"""Configuration errors that say which file, which key, and what was probably meant."""

from __future__ import annotations

import difflib

from pydantic import BaseModel, ValidationError


class ConfigError(ValueError):
    """A configuration file that cannot be used as written."""


def _aliases(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _submodel(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                return ann
            for arg in getattr(ann, "__args__", ()):  # Optional[Model], dict[str, Model]
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    return arg
    return None


def _is_named_entries(model: type[BaseModel], key: str) -> bool:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            import typing

            return typing.get_origin(field.annotation) is dict
    return False


def explain(exc: ValidationError, model: type[BaseModel], source: str) -> ConfigError:
    """Turn pydantic's errors into one ConfigError naming the file, field path and closest key."""
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        path = ".".join(loc)
        if err["type"] == "extra_forbidden":
            owner: type[BaseModel] | None = model
            keyed = False  # the previous part was a field of named entries (dict[str, Model]): this part is a name
            for part in loc[:-1]:
                if keyed:
                    keyed = False
                    continue
                keyed = owner is not None and _is_named_entries(owner, part)
                owner = _submodel(owner, part) if owner else None
            valid = _aliases(owner) if owner else []
            close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else (f"; valid keys: {', '.join(valid)}" if valid else "")
            lines.append(f"{source}: unknown key {path!r}{hint}")
        else:
            lines.append(f"{source}: {path or '(top level)'}: {err['msg']} (got {err.get('input')!r})")
    return ConfigError("\n".join(lines))
