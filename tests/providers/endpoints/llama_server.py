"""A real llama.cpp server for tests: llama-cpp-python's `python -m llama_cpp.server` with a tiny model.

The model (`tiny_gguf.write`: 64-d, one layer, random weights, a byte-fallback vocabulary and a ChatML
template, 374,624 bytes) is written by the test itself; nothing is downloaded. The server runs in its own
process group (an invalid grammar crashes it, and a crash must fail the test, not the test process) and is
stopped with it. Started with `--interrupt_requests False`: by default a second request cuts a running stream.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.providers.endpoints import tiny_gguf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, directory: Path, *, n_ctx: int = 512, embedding: bool = False, interrupt: bool = False,
                 alias: str = "tiny"):
        self.directory = Path(directory)
        self.model = self.directory / ("tiny-plain.gguf" if embedding else "tiny.gguf")
        if not self.model.exists():
            tiny_gguf.write(self.model, plain=embedding)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.directory / f"server-{self.port}.log"
        self.args = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", alias,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(n_ctx), "--seed", "0",
            "--n_threads", "1", "--interrupt_requests", str(interrupt),
        ] + (["--embedding", "True"] if embedding else [])
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "LlamaServer":
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout}s:\n{self.output()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
