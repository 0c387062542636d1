"""engram embedded in this process: the API over a runtime this object owns.

    from engram import Engram
    from engram.api import types as t

    with Engram.open("~/.engram") as mem:                    # starts a local Ray instance (runtime="ray")
        mem.append_messages("my-agent", "trip-2024", t.AppendRequest(messages=[t.Message(role="user", content="…")]))
        mem.wait_idle()
        print(mem.recall("my-agent", t.RecallRequest(query="where in May?")).hits)

    with Engram.open(home, runtime="inprocess") as mem:     # no Ray: synchronous, for tests and scripts
        ...

Every operation of `engram.api.service.Api` is a method here; the lower-level `append(writes)`,
`read(agent, …)` and `sql(query, params)` are there for scripts and tests that work with events.
A running `engram serve` owns its home: talk to it with `engram.Client` instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from engram.api.service import Api
from engram.events.envelope import Appended, Recorded, Write
from engram.runtime.base import Runtime


class Engram(Api):
    @classmethod
    def open(cls, home: str | Path | None = None, *, runtime: str = "ray", address: str | None = None,
             **options) -> "Engram":
        """Open the home `home` (default: $ENGRAM_HOME or ~/.engram) on a runtime of this process:
        "ray" (a local Ray instance, or `address`) or "inprocess" (no Ray). `options` go to the runtime."""
        from engram.config.service import load_service_config
        from engram.runtime import open_runtime

        config = load_service_config(home)
        if runtime == "ray":
            options["address"] = address
        return cls(open_runtime(config, runtime, **options))

    def __init__(self, runtime: Runtime):
        super().__init__(runtime)

    @property
    def runtime(self) -> Runtime:
        return self.rt

    # ------------------------------------------------------------------ events

    def append(self, writes: Sequence[Write]) -> list[Appended]:
        """Append writes; those of one shard commit together, all or nothing."""
        results = self.rt.append(writes)
        self.note_streams(writes)
        return results

    def read(self, agent: str, after: int = 0, **filters) -> list[Recorded]:
        return self.rt.read(agent, after, **filters)

    def heads(self) -> dict[int, int]:
        return self.rt.heads()

    def sql(self, query: str, params: list | None = None) -> tuple[list[str], list[tuple]]:
        """(column names, rows) of a read-only query over the log and the projections."""
        return self.rt.sql(query, params)

    def wait_projections(self, timeout: float = 120.0) -> bool:
        return self.rt.wait_projections(timeout)

    def wait_idle(self, timeout: float = 600.0, on_progress=None) -> bool:
        """Projections and policies have handled the whole log, and nothing new came."""
        self.rt.start_policies()
        return self.rt.wait_idle(timeout, on_progress)

    def __enter__(self) -> "Engram":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
