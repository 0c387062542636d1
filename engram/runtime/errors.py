"""What the runtimes raise to the API: the API's own exceptions instead of DuckDB's or Ray's."""

from __future__ import annotations

import duckdb

from engram.events.store import AppendError
from engram.kernel.flow import Backpressure
from engram.runtime.base import MissingTable, QueryError

# Exceptions that mean "the caller asked for something wrong" (or "slow down"), passed through as they are: an
# append the log refused (e.g. a message id recorded with other words) among them.
CALLER_ERRORS = (ValueError, LookupError, Backpressure, AppendError)


def query_error(exc: BaseException) -> BaseException:
    """A DuckDB error as MissingTable / QueryError; anything else unchanged."""
    if isinstance(exc, duckdb.CatalogException):
        return MissingTable(str(exc).strip().splitlines()[0])
    if isinstance(exc, duckdb.Error):
        return QueryError(str(exc).strip())
    return exc
