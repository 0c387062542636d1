"""The engram app served over real HTTP on loopback from inside the test process.

`Served(api, home)` runs the same app `engram serve` runs (uvicorn, a free port on 127.0.0.1) in a
thread, and records `<home>/instance.json` as a server does, so that CLI commands (in this process or
in a subprocess) and `engram.Client` find it and use it. The API is any `Api` the test built: over the
in-process runtime, or over Ray actors of the test session's Ray instance.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from pathlib import Path


class Served:
    def __init__(self, api, home: Path | None = None, *, max_body_bytes: int | None = None,
                 keep_alive_s: float | None = None):
        self.api = api
        self.home = Path(home or api.home.root).resolve()
        self.max_body_bytes = max_body_bytes
        self.keep_alive_s = keep_alive_s  # uvicorn's idle keep-alive timeout; None: its default (5 s), as served
        self.token = secrets.token_hex(8)
        self.url = ""
        self._server = None
        self._thread = None

    def __enter__(self) -> "Served":
        import uvicorn

        from engram import __version__
        from engram.server.app import create_app
        from engram.server.instance import Identity, write_instance

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        identity = Identity(home=str(self.home), token=self.token, pid=os.getpid(), version=__version__,
                            runtime=self.api.rt.description)
        kwargs = {} if self.max_body_bytes is None else {"max_body_bytes": self.max_body_bytes}
        app = create_app(self.api, identity, shutdown=self.stop, **kwargs)
        extra = {} if self.keep_alive_s is None else {"timeout_keep_alive": self.keep_alive_s}
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", **extra))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            assert time.monotonic() < deadline, "the test server did not start"
            time.sleep(0.01)
        write_instance(self.home, {"url": self.url, "pid": os.getpid(), "token": self.token, "home": str(self.home)})
        return self

    def client(self):
        from engram.client import Client

        return Client(self.url)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    def __exit__(self, *exc) -> None:
        from engram.server.instance import remove_instance

        self.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
        remove_instance(self.home, self.token)


class served_home:
    """A home served over HTTP from the test process by the API over the in-process runtime (no Ray): CLI commands
    run against it as against `engram serve`."""

    def __init__(self, home: Path, **runtime_options):
        self.home, self.options = Path(home), runtime_options

    def __enter__(self):
        from engram.config.service import load_service_config
        from engram.boot.embedded import Engram
        from engram.runtime.inprocess import InProcessRuntime

        self.mem = Engram(InProcessRuntime(load_service_config(self.home), **self.options).start())
        self.served = Served(self.mem).__enter__()
        return self.mem

    def __exit__(self, *exc) -> None:
        try:
            self.served.__exit__(*exc)
        finally:
            self.mem.close()


class ServerProcess:
    """`engram serve` for `home` as its own process (`python -m engram.boot serve --port 0`), its output in
    `<home>.server.log`; stopped (SIGTERM, then SIGKILL) on exit. `runtime` is written to engram.json."""

    def __init__(self, home: Path, *, runtime: str = "inprocess", timeout: float = 300):
        self.home, self.runtime, self.timeout = Path(home).resolve(), runtime, timeout
        self.log = self.home.with_name(self.home.name + ".server.log")
        self.proc = None
        self.url = ""

    def __enter__(self) -> "ServerProcess":
        import json
        import subprocess
        import sys

        from engram.server.instance import live_server

        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "engram.json"
        data = json.loads(config.read_text()) if config.exists() else {}
        data.setdefault("server", {})["runtime"] = self.runtime
        config.write_text(json.dumps(data))
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "engram.boot", "serve", "--home", str(self.home),
                                          "--port", "0"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
        deadline = time.monotonic() + self.timeout
        while (info := live_server(self.home)) is None or info["pid"] != self.proc.pid:
            assert self.proc.poll() is None, f"the server exited: {self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the server did not start: {self.log.read_text()[-3000:]}"
            time.sleep(0.1)
        self.url = info["url"]
        return self

    def __exit__(self, *exc) -> None:
        import subprocess

        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
