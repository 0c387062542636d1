"""API keys of a home: `<home>/keys.json`, each key hashed, each mapped to the agents it may touch.

    engram keys add --agents a,b     -> prints `ek-<id>-<secret>` once; stores its id, sha256 and agents
    engram keys list                 -> ids, agents, when added (never a key)
    engram keys revoke <id>

A key is `ek-` + an 8-hex-digit id + `-` + 256 random bits (base32). Only the id, the SHA-256 of the
whole key and its agents are stored (the file is 0600). A fast hash is enough here: the secret is 256
random bits, so there is no dictionary to try; the id finds the entry, `hmac.compare_digest` compares.
`--agents '*'` makes a key for every agent of the home (an admin key: status, replay, shutdown).

With no key in the file, the server serves loopback only and every request may touch every agent.
Stdlib only: the CLI manages the file without a server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

KEYS_FILE = "keys.json"
ALL_AGENTS = "*"
RACY_NS = 2_000_000_000
_KEY = re.compile(r"^ek-([0-9a-f]{8})-([A-Z2-7]{52})$")


class KeyError_(ValueError):
    """A keys.json or a key argument that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class StoredKey:
    id: str
    sha256: str
    agents: tuple[str, ...]  # ("*",): every agent
    created: str

    @property
    def every_agent(self) -> bool:
        return ALL_AGENTS in self.agents

    def as_json(self) -> dict:
        return {"id": self.id, "sha256": self.sha256, "agents": list(self.agents), "created": self.created}


def keys_path(home: Path) -> Path:
    return Path(home) / KEYS_FILE


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_keys(home: Path) -> list[StoredKey]:
    path = keys_path(home)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise KeyError_(f"{path} cannot be read ({exc}); fix or remove it") from None
    try:
        return [StoredKey(k["id"], k["sha256"], tuple(k["agents"]), k.get("created", "")) for k in data["keys"]]
    except (KeyError, TypeError):
        raise KeyError_(f"{path} is not a keys file (expected {{\"keys\": [{{\"id\", \"sha256\", \"agents\"}}]}})") from None


def save_keys(home: Path, keys: list[StoredKey]) -> None:
    from engram.kernel.private import private_home

    path = keys_path(home)
    private_home(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"keys": [k.as_json() for k in keys]}, indent=1) + "\n")
    os.replace(tmp, path)


def parse_agents(text: str) -> tuple[str, ...]:
    from engram.kernel.ids import InvalidIdError, validate_agent

    agents = [a.strip() for a in text.split(",") if a.strip()]
    if not agents:
        raise KeyError_("--agents needs at least one agent id (a,b) or '*' for every agent")
    if ALL_AGENTS in agents:
        return (ALL_AGENTS,)
    try:
        return tuple(dict.fromkeys(validate_agent(a) for a in agents))
    except InvalidIdError as exc:
        raise KeyError_(str(exc)) from None


def add_key(home: Path, agents: tuple[str, ...]) -> tuple[str, StoredKey]:
    """A new key for `agents`: (the key, shown once; what is stored)."""
    keys = load_keys(home)
    taken = {k.id for k in keys}
    key_id = secrets.token_hex(4)
    while key_id in taken:
        key_id = secrets.token_hex(4)
    secret = base64.b32encode(secrets.token_bytes(32)).decode().rstrip("=")
    key = f"ek-{key_id}-{secret}"
    stored = StoredKey(key_id, digest(key), agents, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    save_keys(home, keys + [stored])
    return key, stored


def revoke_key(home: Path, key_id: str) -> StoredKey:
    keys = load_keys(home)
    found = [k for k in keys if k.id == key_id]
    if not found:
        known = ", ".join(k.id for k in keys) or "none"
        raise KeyError_(f"no key with id {key_id!r} (the keys are: {known})")
    save_keys(home, [k for k in keys if k.id != key_id])
    return found[0]


class KeyRing:
    """The keys of a home as a server checks them: re-read when keys.json changes (a `stat` per request)."""

    def __init__(self, home: Path):
        self.path = keys_path(home)
        self._stamp: tuple | None = ()
        self._by_id: dict[str, StoredKey] = {}
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        # A file changed in the last seconds may change again within the clock's granularity with the same
        # stamp (same size, a reused inode): it is read again until it has been quiet for a while.
        if stamp == self._stamp and (stamp is None or time.time_ns() - stamp[1] > RACY_NS):
            return
        with self._lock:
            keys = load_keys(self.path.parent) if stamp is not None else []
            self._by_id = {k.id: k for k in keys}
            self._stamp = stamp

    def configured(self) -> bool:
        self._refresh()
        return bool(self._by_id)

    def find(self, key: str) -> StoredKey | None:
        """The stored key `key` is, or None (malformed, unknown or revoked)."""
        self._refresh()
        match = _KEY.match(key or "")
        if not match:
            return None
        stored = self._by_id.get(match.group(1))
        if stored is None or not hmac.compare_digest(stored.sha256, digest(key)):
            return None
        return stored

    def by_id(self, key_id: str) -> StoredKey | None:
        """The stored key with id `key_id` (a login session names its key by id), or None once it is revoked."""
        self._refresh()
        return self._by_id.get(key_id)
