"""A gate for an object that many threads use at once, except during a change that needs it alone.

A shard serves appends, reads, SQL and status from many threads (a Ray actor's thread pool), while a forget,
a rebuild or agents moving out close its DuckDB connections and open new ones. Calls pass the gate `shared`;
such a change passes it `alone`: it waits until the shared calls in progress are done, and new ones wait until
it is (a waiting change goes first, so a stream of reads cannot starve it). Both are re-entrant in one thread:
a change may call the shared methods of its object, and a shared method may call another.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar
F = TypeVar("F", bound=Callable[..., Any])


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0  # calls inside, shared
        self._owner: int | None = None  # the thread inside alone
        self._depth = 0  # its nesting
        self._waiting_alone = 0
        self._mine = threading.local()  # this thread's shared nesting

    @contextmanager
    def shared(self) -> Iterator[None]:
        me = threading.get_ident()
        nested = getattr(self._mine, "depth", 0)
        if self._owner == me or nested:  # inside its own change, or already inside: never wait on itself
            self._mine.depth = nested + 1
            try:
                yield
            finally:
                self._mine.depth = nested
            return
        with self._cond:
            while self._owner is not None or self._waiting_alone:
                self._cond.wait()
            self._shared += 1
        self._mine.depth = 1
        try:
            yield
        finally:
            self._mine.depth = 0
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        me = threading.get_ident()
        if getattr(self._mine, "depth", 0) and self._owner != me:
            raise RuntimeError("a shared call cannot become a change that needs the object alone (it would wait on itself)")
        with self._cond:
            if self._owner == me:
                self._depth += 1
            else:
                self._waiting_alone += 1
                try:
                    while self._owner is not None or self._shared:
                        self._cond.wait()
                finally:
                    self._waiting_alone -= 1
                self._owner, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
                    self._cond.notify_all()


def shared(method: F) -> F:
    """Run the method through its object's `gate`, shared."""

    @functools.wraps(method)
    def gated(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.gate.shared():
            return method(self, *args, **kwargs)

    return gated  # type: ignore[return-value]


def alone(method: F) -> F:
    """Run the method through its object's `gate`, alone."""

    @functools.wraps(method)
    def gated(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.gate.alone():
            return method(self, *args, **kwargs)

    return gated  # type: ignore[return-value]


class SharedExclusiveLock:
    """Many holders at once (`shared`), or one alone (`exclusive`, which new shared holders wait behind); not
    re-entrant. The runtime routes appends holding it shared while re-sharding holds it alone, so no append lands on
    a shard an agent is leaving; a policy actor's calls and its pump take turns through one. A shared holder waits at
    most `timeout`, then `on_timeout()` is raised."""

    def __init__(self, on_timeout: Callable[[], BaseException] = lambda: TimeoutError("a change holds the lock")):
        self.on_timeout = on_timeout
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextmanager
    def shared(self, timeout: float | None = None) -> Iterator[None]:
        with self._cond:
            if not self._cond.wait_for(lambda: not self._exclusive, timeout):
                raise self.on_timeout()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
