"""A home is its owner's alone: the directory 0700, every file engram writes in it 0600.

A home holds agents' conversations, the server's instance token and API key hashes; another user of the machine
must read none of it. Two places make it so:

- the server process sets its umask to 077 first thing (`engram.boot.serve`, the composition root): every file and
  directory it and its Ray processes create (the DuckDB logs and projections, JSONL files, indexes, logs, job
  journals, instance.json) is created private, by whichever library creates it;
- before a server runs, the commands create the home with `private_home` and write with `write_private`
  (server.log, the locks, agent.config.json, keys.json).

A home made by an older engram (0755) is made private when its server starts (`private_home`, which says so).
Stdlib only (the CLI imports it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
UMASK = 0o077


def private_dirs(path: Path) -> bool:
    """Create `path` and its missing parents, each 0700 (whatever the umask). True when `path` was missing."""
    path = Path(path)
    missing = []
    for part in (path, *path.parents):
        if part.exists():
            break
        missing.append(part)
    for part in reversed(missing):
        try:
            part.mkdir(mode=DIR_MODE)
            os.chmod(part, DIR_MODE)  # mkdir's mode is masked by the umask
        except FileExistsError:  # another command made it at the same moment
            pass
    return bool(missing)


def private_home(home: Path) -> str | None:
    """Create `home` (and missing parents) 0700, or take group and other access away from an existing one owned by
    this user. Returns a line saying what was changed on an existing home, else None."""
    home = Path(home)
    if private_dirs(home):
        return None
    st = home.stat()
    if not st.st_mode & 0o077 or st.st_uid != os.getuid():
        return None
    os.chmod(home, DIR_MODE)
    return f"made {home} private to its owner (it was {stat.filemode(st.st_mode)}; now drwx------)"


def open_private(path: Path, flags: int) -> int:
    """`os.open` creating `path` 0600 (an existing file keeps its mode)."""
    return os.open(path, flags, FILE_MODE)


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` (replaced atomically by a new file made 0600: never through a link or a file someone
    else made at the temporary name)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # a crashed writer's
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
