"""A pseudo-terminal for driving an interactive command as a person would: type lines, read what it prints."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time


class Terminal:
    def __init__(self, argv: list[str], env: dict[str, str]):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command on the terminal's other side
            os.execvpe(argv[0], argv, env)
        self.buffer = b""
        self.transcript = ""

    def expect(self, pattern: str, timeout: float = 60.0) -> str:
        """Everything printed up to and including the first match of `pattern` (a regex)."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern.encode())
        while True:
            m = regex.search(self.buffer)
            if m:
                out, self.buffer = self.buffer[: m.end()], self.buffer[m.end() :]
                text = out.decode(errors="replace").replace("\r\n", "\n")
                self.transcript += text
                return text
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {pattern!r} within {timeout}s; printed so far:\n{self.transcript}"
                                   f"{self.buffer.decode(errors='replace')}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the command exited and closed the terminal
                    data = b""
                if not data:
                    raise EOFError(f"the command exited before {pattern!r}; printed:\n{self.transcript}"
                                   f"{self.buffer.decode(errors='replace')}")
                self.buffer += data

    def send(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def wait(self, timeout: float = 60.0) -> int:
        """The command's exit code (killed after `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    self.buffer += os.read(self.fd, 65536)
            except OSError:
                time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise TimeoutError("the command did not exit")
