"""Browser sessions for the inspector: `/inspect/login` takes an API key once and sets a cookie.

A browser cannot send `Authorization: Bearer <key>` when it follows a link to `/inspect`, so with API keys
configured the inspector offers a login form. The cookie (`engram_session`) is HttpOnly, SameSite=Strict,
`Path=/inspect` (no other route ever sees or accepts it), `Secure` when the request came over HTTPS, and holds
only what is needed: the key's id (never the key), a random session id, the expiry, and an HMAC-SHA256 over them
with the home's session secret (`<home>/state/session.secret`, 0600, made on first use; shared by every
server replica of the home, so a session made on one is valid on all). The key's agents are read from
`keys.json` on every request, so a session is scoped exactly as its key, and revoking the key (`engram keys
revoke`) ends its sessions at once. Logging out records the session id as revoked (`<home>/state/
revoked-sessions`, pruned as entries expire), so a copy of the cookie is useless afterwards too.

CSRF: every inspector page and view is a GET that changes nothing (recall with record=False); the only calls
that change state, login and logout, are POSTs accepted only from the server's own origin (`Origin`, else
`Referer`, must name the host the request was sent to), on top of SameSite=Strict.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

COOKIE = "engram_session"
SESSION_SECONDS = 12 * 3600
SECRET_FILE = "session.secret"
REVOKED_FILE = "revoked-sessions"
OWNER_ID = "instance"  # a session opened with the server's instance token (instance.json)


@dataclass(frozen=True)
class Session:
    key_id: str
    session_id: str
    expires: int  # unix seconds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class Sessions:
    """Signing and checking session cookies for one home (thread-safe; the wall clock is the caller's `now`)."""

    def __init__(self, home: Path):
        self.state = Path(home) / "state"
        self._secret: bytes | None = None
        self._revoked: dict[str, int] = {}
        self._revoked_stamp: tuple | None = ()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the secret

    def secret(self) -> bytes:
        if self._secret is None:
            with self._lock:
                if self._secret is None:
                    self._secret = self._load_or_make_secret()
        return self._secret

    def _load_or_make_secret(self) -> bytes:
        path = self.state / SECRET_FILE
        self.state.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            for _ in range(50):  # another replica is writing it
                data = path.read_bytes()
                if len(data) == 32:
                    return data
                time.sleep(0.01)
            raise RuntimeError(f"{path} is not a session secret (32 bytes): remove it to make a new one") from None
        data = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return data

    # ------------------------------------------------------------------ cookies

    def _mac(self, key_id: str, session_id: str, expires: int) -> str:
        message = f"v1|{key_id}|{session_id}|{expires}".encode()
        return _b64(hmac.new(self.secret(), message, hashlib.sha256).digest())

    def issue(self, key_id: str, now: float) -> tuple[str, Session]:
        """A new session of key `key_id`: (the cookie value, the session)."""
        session = Session(key_id, _b64(secrets.token_bytes(12)), int(now) + SESSION_SECONDS)
        value = f"v1.{session.key_id}.{session.session_id}.{session.expires}.{self._mac(*_fields(session))}"
        return value, session

    def check(self, value: str | None, now: float) -> Session | None:
        """The session a cookie value holds, or None (absent, malformed, forged, expired or logged out)."""
        parts = (value or "").split(".")
        if len(parts) != 5 or parts[0] != "v1" or not parts[3].isdigit():
            return None
        session = Session(parts[1], parts[2], int(parts[3]))
        if not hmac.compare_digest(parts[4], self._mac(*_fields(session))):
            return None
        if session.expires <= now or session.session_id in self._revoked_now(now):
            return None
        return session

    # ------------------------------------------------------------------ logging out

    def revoke(self, session: Session, now: float) -> None:
        """Record `session` as logged out (until it would have expired anyway)."""
        path = self.state / REVOKED_FILE
        with self._lock:
            kept = {sid: exp for sid, exp in self._read_revoked().items() if exp > now}
            kept[session.session_id] = session.expires
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("".join(f"{sid} {exp}\n" for sid, exp in kept.items()))
            os.replace(tmp, path)
            self._revoked, self._revoked_stamp = kept, None  # read again next time (another replica may add)

    def _read_revoked(self) -> dict[str, int]:
        try:
            text = (self.state / REVOKED_FILE).read_text()
        except FileNotFoundError:
            return {}
        out = {}
        for line in text.splitlines():
            sid, _, exp = line.partition(" ")
            if exp.isdigit():
                out[sid] = int(exp)
        return out

    def _revoked_now(self, now: float) -> dict[str, int]:
        try:
            st = (self.state / REVOKED_FILE).stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp != self._revoked_stamp:
            with self._lock:
                self._revoked, self._revoked_stamp = self._read_revoked(), stamp
        return self._revoked


def _fields(session: Session) -> tuple[str, str, int]:
    return session.key_id, session.session_id, session.expires


def same_origin(headers, secure: bool) -> bool:
    """Whether a state-changing request comes from a page of this server: its `Origin` (else `Referer`) names the
    scheme and host the request was sent to. A request with neither is refused (browsers send Origin on POST)."""
    host = headers.get("host")
    source = headers.get("origin") or headers.get("referer")
    if not host or not source or source == "null":
        return False
    parts = urlsplit(source)
    return parts.netloc == host and parts.scheme == ("https" if secure else "http")
