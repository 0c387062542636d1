"""One server per home: `<home>/instance.json`, the start lock, the health probe, starting one for a command.

Stdlib only (the CLI imports this before anything else). `instance.json` (0600: the home's owner alone reads
it) records the server's `url`, `pid`, a random `token` and the `home`. The token never leaves the home: a
server is taken as this home's only when it answers a fresh random challenge with the HMAC of it keyed with
that token (`proof`, `GET /v1/instance`), so a stale file (a dead PID, a PID reused by another process, another
program on that port) is detected and replaced, never waited on, and nothing on an open route grants access. Two commands racing to start a server
start exactly one: the start happens under an exclusive lock on `<home>/instance.lock`.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from engram.kernel.private import open_private, private_dirs, private_home, write_private

INSTANCE_FILE = "instance.json"
LOCK_FILE = "instance.lock"
LOG_DIR = "logs"
SERVER_LOG = "server.log"
HEALTH_PATH = "/v1/health"
INSTANCE_PATH = "/v1/instance"
# A health probe of a live server answers in milliseconds; a hung process must not hang a command.
PROBE_TIMEOUT_S = 2.0
POLL_S = 0.1


class ServerStartError(RuntimeError):
    """No server could be started for the home; the message names the log to read."""


@dataclass(frozen=True)
class Identity:
    """Who a server is: the home it serves, its instance token (in instance.json only, never sent by the server),
    its pid (the owning process's, with Ray Serve), version and runtime."""

    home: str
    token: str
    pid: int
    version: str
    runtime: str


def proof(token: str, home: str, challenge: str) -> str:
    """HMAC-SHA256, keyed with the instance token, of the home and a caller's challenge: what the server answers
    to `GET /v1/instance?challenge=…` and what a command that read instance.json expects."""
    return hmac.new(token.encode(), f"engram-instance|{home}|{challenge}".encode(), hashlib.sha256).hexdigest()


def home_path(home: str | Path | None) -> Path:
    """The home a command means: --home, else $ENGRAM_HOME, else ~/.engram (resolved)."""
    raw = home if home is not None else (os.environ.get("ENGRAM_HOME") or "~/.engram")
    return Path(raw).expanduser().resolve()


def instance_path(home: Path) -> Path:
    return home / INSTANCE_FILE


def log_path(home: Path) -> Path:
    return home / LOG_DIR / SERVER_LOG


def read_instance(home: Path) -> dict | None:
    try:
        info = json.loads(instance_path(home).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and {"url", "pid", "token"} <= set(info) else None


def write_instance(home: Path, info: dict) -> Path:
    """Record the server of `home` (0600: the token is the owner's)."""
    path = instance_path(home)
    write_private(path, json.dumps(info, indent=1) + "\n")
    return path


def remove_instance(home: Path, token: str) -> None:
    """Remove instance.json if it is still this server's (a newer server's file is left alone)."""
    info = read_instance(home)
    if info is not None and info.get("token") == token:
        instance_path(home).unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, but the health probe decides whether it is ours
    try:  # a zombie (exited, not yet reaped by its parent) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def probe(url: str, timeout: float = PROBE_TIMEOUT_S, path: str = HEALTH_PATH) -> dict | None:
    """The health document of the server at `url` (or the answer at `path`), or None when nothing (engram) answers."""
    parts = urlsplit(url)
    if parts.hostname is None:  # not an address ("localhost:8765" has no scheme, so no host): nothing answers there
        return None
    try:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            return None
        doc = json.loads(body)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    return doc if isinstance(doc, dict) and (path != HEALTH_PATH or doc.get("service") == "engram") else None


def proves_home(url: str, token: str, home: Path, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the server at `url` holds `token` for `home`: it answers a fresh challenge with its `proof`."""
    challenge = secrets.token_hex(16)
    answer = probe(url, timeout, f"{INSTANCE_PATH}?challenge={challenge}")
    given = answer.get("proof") if answer is not None else None
    return isinstance(given, str) and hmac.compare_digest(given, proof(str(token), str(home), challenge))


def live_server(home: Path) -> dict | None:
    """instance.json of the server that really serves `home` now, else None (no file, or a stale one)."""
    info = read_instance(home)
    if info is None:
        return None
    try:
        pid = int(info["pid"])
    except (TypeError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    if not proves_home(str(info["url"]), str(info.get("token", "")), home):
        return None  # a PID reused by another process, another home's server, another program: not ours
    return info


class StartLock:
    """An exclusive lock on `<home>/instance.lock`: one server start at a time per home."""

    def __init__(self, home: Path, timeout: float):
        self.path = home / LOCK_FILE
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> "StartLock":
        from engram.kernel.filelock import try_lock

        deadline = time.monotonic() + self.timeout
        while (fd := try_lock(self.path)) is None:
            if time.monotonic() > deadline:
                raise ServerStartError(f"another engram command has been starting the server of {self.path.parent} "
                                       f"for {self.timeout:.0f}s; see {log_path(self.path.parent)}")
            time.sleep(POLL_S)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases its lock
            self._fd = None


def server_command(home: Path, *, started_by_command: bool, host: str | None = None, port: int | None = None,
                   address: str | None = None) -> list[str]:
    # -P: the working directory does not go first on the import path, so an `engram/` folder where the
    # command runs (the parent of a clone, say) cannot shadow engram's own modules. The server also moves
    # into its home before Ray starts (boot.serve), because Ray adds the driver's working directory to
    # every worker's import path.
    cmd = [sys.executable, "-P", "-m", "engram.boot", "serve", "--home", str(home)]
    if started_by_command:
        cmd.append("--started-by-command")
    if host:
        cmd += ["--host", host]
    if port is not None:
        cmd += ["--port", str(port)]
    if address:
        cmd += ["--address", address]
    return cmd


def last_lines(path: Path, n: int = 3) -> str:
    try:
        lines = [l for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def start_server(home: Path, *, timeout: float, address: str | None = None, on_spawn=None) -> dict:
    """Start a server for `home` in the background (detached, its log under `<home>/logs/`) unless one runs,
    and wait for it. Exactly one starts when several commands race (`on_spawn()` is called by the one that
    starts it). Returns its instance.json."""
    info = live_server(home)
    if info is not None:
        return info
    private_home(home)
    with StartLock(home, timeout):
        info = live_server(home)  # another command started it while we waited for the lock
        if info is not None:
            return info
        instance_path(home).unlink(missing_ok=True)  # stale: a dead or foreign PID
        log = log_path(home)
        private_dirs(log.parent)
        if on_spawn is not None:
            on_spawn()
        with os.fdopen(open_private(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab") as out:
            out.write(f"\n--- started by `engram` (pid {os.getpid()}) at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            out.flush()
            proc = subprocess.Popen(server_command(home, started_by_command=True, address=address), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                detail = last_lines(log)
                raise ServerStartError(f"the engram server for {home} exited (code {code}) while starting"
                                       + (f": {detail}" if detail else "") + f"; log: {log}")
            info = read_instance(home)
            if info is not None and int(info.get("pid", -1)) == proc.pid and live_server(home) is not None:
                return {**info, "started_now": True}
            time.sleep(POLL_S)
        raise ServerStartError(f"the engram server for {home} did not answer within {timeout:.0f}s "
                               f"(pid {proc.pid} is still starting; `engram down` stops it); log: {log}")
