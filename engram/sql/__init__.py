"""Read-only, confined SQL over an engram home (see `engram.sql.readonly`)."""

from engram.sql.readonly import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    HomeFiles,
    LiveShard,
    OwnSessions,
    QueryResult,
    SqlError,
    SqlFailed,
    SqlRefused,
    SqlTimeout,
    check_statement,
    run_readonly,
)

__all__ = [
    "DEFAULT_MAX_ROWS", "DEFAULT_TIMEOUT_S", "HomeFiles", "LiveShard", "OwnSessions", "QueryResult", "SqlError", "SqlFailed",
    "SqlRefused", "SqlTimeout", "check_statement", "run_readonly",
]
