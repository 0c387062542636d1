"""Exclusive advisory file locks (flock) between the processes that share a home.

A lock is held by an open descriptor and released when it is closed or its process dies, so a crash never
leaves one held. Two descriptors of one file conflict even inside one process (flock(2) treats them apart).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from engram.kernel.private import private_dirs


def try_lock(path: Path) -> int | None:
    """Lock `path` (created if missing) without waiting: the descriptor that holds it, or None when another
    descriptor holds it. Close the descriptor to release it."""
    private_dirs(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd
