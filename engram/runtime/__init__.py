"""The runtimes that implement `engram.runtime.base.Runtime`: Ray (`ray_runtime`) and in-process (`inprocess`).

Only this package (and `engram.actors`, which it drives) imports Ray. `open_runtime` picks one by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.config.service import ServiceConfig
    from engram.runtime.base import Runtime

RUNTIMES = ("ray", "inprocess")


def open_runtime(config: ServiceConfig, kind: str = "ray", *, address: str | None = None, **options: Any) -> Runtime:
    """A started runtime of `kind` for the home of `config`."""
    if kind == "ray":
        from engram.runtime.ray_runtime import RayRuntime

        return RayRuntime(config, address=address, **options).start()
    if kind == "inprocess":
        from engram.runtime.inprocess import InProcessRuntime

        return InProcessRuntime(config, **options).start()
    raise ValueError(f"unknown runtime {kind!r}; the runtimes are {', '.join(RUNTIMES)}")
