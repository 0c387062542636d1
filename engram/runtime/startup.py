"""Starting or joining Ray so that it never hangs.

- A local instance is always `ray.init(address="local", _temp_dir=...)`: a new instance in a temp
  directory of its own (per home), never whatever `/tmp/ray/ray_current_cluster` names (a stale file
  there made commands hang for minutes). The directory's path is short: Ray's Unix socket paths live
  under it and must stay below 108 bytes.
- An address (`--address`, `RAY_ADDRESS`, `ray.address` in engram.json) joins that cluster.
- Either way start-up has a timeout (`ray.startTimeoutSeconds`); past it, a `RayStartError` says what
  to do instead of waiting forever.
"""

from __future__ import annotations

import hashlib
import logging
import os
import _thread
import tempfile
import threading
import time
from pathlib import Path

import ray

# Unix socket paths must stay below 108 bytes; Ray puts about 70 below its temp dir
# ("session_2026-12-01_19-58-24_123456_12345/sockets/plasma_store" and the like).
MAX_TEMP_DIR_CHARS = 36


class RayStartError(RuntimeError):
    """Ray could not be started or joined; the message says what to do."""


def temp_dir_for(home: Path) -> Path:
    """A short temp directory of this home's own local Ray instance (stable per home): under `RAY_TMPDIR` when
    the user set it (Ray's own variable for where its files go), else under the system's temp dir (`TMPDIR`).
    Either way a directory of engram's own, never Ray's shared `<tmp>/ray`. When that path would be too long
    for Ray's socket paths it is `/tmp/engram-<hash>` instead, and `init_ray` says so."""
    digest = hashlib.blake2b(str(home).encode(), digest_size=4).hexdigest()
    base = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir())
    path = base / f"engram-{digest}"
    if len(str(path)) > MAX_TEMP_DIR_CHARS:
        path = Path("/tmp") / f"engram-{digest}"
    return path


def private_ray_temp(root: Path) -> Path:
    """Point this process's Ray at `root` for the files it writes outside any node's `temp_dir`.

    `ray.cluster_utils.Cluster` (tests, benchmarks) records the address of the cluster it starts in
    `<RAY_TMPDIR or TMPDIR or /tmp>/ray/ray_current_cluster`, whatever `temp_dir` its nodes get; on a machine
    where Ray never ran that directory does not exist (FileNotFoundError), and where it does, the file is a
    shared "current cluster" that later `ray.init()` calls would join. Setting `RAY_TMPDIR` to a directory
    of the caller's own keeps that file there and leaves nothing global behind."""
    (root / "ray").mkdir(parents=True, exist_ok=True)
    os.environ["RAY_TMPDIR"] = str(root)
    return root


def _refresh_ray_config() -> None:
    """Make this process's Ray config see RAY_AUTH_MODE set after `import ray` (read at import)."""
    from ray._raylet import Config

    Config.initialize("")


def init_ray(*, home: Path, address: str | None, namespace: str, num_cpus: int | None, timeout_s: float) -> bool:
    """Start a local Ray instance for `home`, or join `address`. Returns True if this call started Ray
    (the caller then shuts it down). Raises RayStartError after `timeout_s`."""
    if ray.is_initialized():
        return False
    kwargs = dict(namespace=namespace, log_to_driver=False, logging_level=logging.WARNING)
    if address:
        where = f"the Ray cluster at {address}"
        hint = "check that it runs (`ray status --address ...`), or unset RAY_ADDRESS / ray.address to start locally"
        kwargs["address"] = address
    else:
        temp = temp_dir_for(home)
        wanted = os.environ.get("RAY_TMPDIR")
        if wanted and not str(temp).startswith(str(Path(wanted)) + os.sep):
            logging.getLogger(__name__).warning(
                "RAY_TMPDIR=%s is too long for Ray's socket paths (at most %d characters with engram's directory "
                "in it); this home's Ray uses %s", wanted, MAX_TEMP_DIR_CHARS, temp)
        temp.mkdir(parents=True, exist_ok=True)
        where = f"a local Ray instance (temp dir {temp})"
        hint = (f"the machine may be overloaded: see {temp}/session_latest/logs, or raise ray.startTimeoutSeconds "
                "in engram.json")
        # Ray's default for a new local instance, made explicit: token authentication on (the token lives
        # in ~/.ray/auth_token), and no warning about it on every start.
        if "RAY_AUTH_MODE" not in os.environ:
            os.environ["RAY_AUTH_MODE"] = "token"
            _refresh_ray_config()
        kwargs.update(address="local", _temp_dir=str(temp), num_cpus=num_cpus, include_dashboard=False)
    # ray.init runs on the main thread: Ray ties the lives of the GCS and raylet it starts to the thread that
    # started them (PR_SET_PDEATHSIG), so a helper thread would kill them when it ends. The timeout is a timer
    # that interrupts the main thread instead.
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        _thread.interrupt_main()

    timer = threading.Timer(timeout_s, interrupt) if threading.current_thread() is threading.main_thread() else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        ray.init(**kwargs)
    except KeyboardInterrupt:
        if not fired.is_set():
            raise
        _shutdown_quietly()
        raise RayStartError(f"{where} did not start within {timeout_s:.0f}s; {hint}") from None
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _shutdown_quietly()
        raise RayStartError(f"could not start {where}: {first}; {hint}") from exc
    finally:
        if timer is not None:
            timer.cancel()
    if fired.is_set():  # the timer fired just as ray.init returned: the interrupt is still on its way
        try:
            time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return not address


def _shutdown_quietly() -> None:
    try:
        ray.shutdown()
    except Exception:  # nothing more to clean up
        pass
