"""Starting or joining Ray so that it never hangs.

- A local instance is always `ray.init(address="local", _temp_dir=...)`: a new instance in a temp
  directory of its own (per home), never whatever `/tmp/ray/ray_current_cluster` names (a stale file
  there made commands hang for minutes). The directory's path is short: Ray's Unix socket paths live
  under it and must stay below 108 bytes.
- That directory is private (0700, owned by this user): Ray makes its own temp dir world-writable (0777), so Ray
  gets `ray/` inside engram's directory, which nobody else can enter; a directory another user made at engram's
  predictable path is refused. Every process of the local instance listens on loopback only (`loopback_only`:
  its GCS, raylet, workers, agents, and the autoscaler's and dashboard head's metrics ports, which listened on
  every interface without a token), its agents export no metrics, and the dashboard's UI is not started (Ray
  still runs its head, minimal, on loopback).
- The local instance's processes die with this one, however it ends (`engram.runtime.reaper`: Ray's own
  agents outlived a `kill -9` of the server).
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
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import ray

# Unix socket paths must stay below 108 bytes; Ray puts about 70 below its temp dir
# ("session_2026-12-01_19-58-24_123456_12345/sockets/plasma_store" and the like).
MAX_TEMP_DIR_CHARS = 36
RAY_DIR = "ray"  # Ray's temp dir, inside engram's private one


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
    if len(str(path / RAY_DIR)) > MAX_TEMP_DIR_CHARS:
        path = Path("/tmp") / f"engram-{digest}"
    return path


def ray_dir_for(home: Path) -> Path:
    """Ray's temp dir of this home's local instance (its `session_*` directories): `ray/` in `temp_dir_for(home)`."""
    return temp_dir_for(home) / RAY_DIR


def private_dir(path: Path) -> Path:
    """`path` as a directory only this user can enter: created 0700, or, when it exists, a real directory (not a
    symlink) owned by this user, with group and other access taken away. Anything else at this predictable path
    (another user may have made it first, to read or plant Ray's files) is refused."""
    import stat

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise RayStartError(f"{path} is not a directory (a {'symlink' if stat.S_ISLNK(st.st_mode) else 'file'}), "
                            "so it cannot be this home's private Ray temp dir: remove it, or set RAY_TMPDIR to a "
                            "directory of your own")
    if st.st_uid != os.getuid():
        raise RayStartError(f"{path} belongs to another user (uid {st.st_uid}), so it cannot be this home's private "
                            "Ray temp dir: remove it, or set RAY_TMPDIR to a directory of your own")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
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


@contextmanager
def loopback_only() -> Iterator[None]:
    """While a local instance starts: every Ray process listens on loopback, and none exports metrics.

    Ray binds its processes to the node's address, which it takes to be the machine's routable IP (`127.0.0.1`
    given as `_node_ip_address` is turned back into it) except where Ray runs without clusters (macOS, Windows):
    then it is the loopback address. `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` asks for that on Linux too: for this
    process (`ENABLE_RAY_CLUSTER`, read when ray was imported) and the processes ray.init starts (the variable).
    `RAY_enable_metrics_collection=0` turns the agents' metrics exporter off. Both are set for the start only,
    so that nothing else this process starts later (a test's own Ray cluster) inherits them."""
    import ray._private.ray_constants as ray_constants

    wanted = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_enable_metrics_collection": "0"}
    saved_env = {k: os.environ.get(k) for k in wanted}
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(wanted)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _refresh_ray_config() -> None:
    """Make this process's Ray config see RAY_AUTH_MODE set after `import ray` (read at import)."""
    from ray._raylet import Config  # type: ignore[attr-defined]  # Ray's compiled module declares no Config

    Config.initialize("")


def init_ray(*, home: Path, address: str | None, namespace: str, num_cpus: int | None, timeout_s: float) -> bool:
    """Start a local Ray instance for `home`, or join `address`. Returns True if this call started Ray
    (the caller then shuts it down). Raises RayStartError after `timeout_s`."""
    if ray.is_initialized():
        return False
    temp: Path | None = None  # a local instance's temp dir
    if address:
        where = f"the Ray cluster at {address}"
        hint = "check that it runs (`ray status --address ...`), or unset RAY_ADDRESS / ray.address to start locally"
    else:
        temp = temp_dir_for(home)
        wanted = os.environ.get("RAY_TMPDIR")
        if wanted and not str(temp).startswith(str(Path(wanted)) + os.sep):
            logging.getLogger(__name__).warning(
                "RAY_TMPDIR=%s is too long for Ray's socket paths (at most %d characters with engram's directory "
                "in it); this home's Ray uses %s", wanted, MAX_TEMP_DIR_CHARS, temp)
        temp = private_dir(temp) / RAY_DIR
        where = f"a local Ray instance (temp dir {temp})"
        hint = (f"the machine may be overloaded: see {temp}/session_latest/logs, or raise ray.startTimeoutSeconds "
                "in engram.json")
        # Ray's default for a new local instance, made explicit: token authentication on (the token lives
        # in ~/.ray/auth_token), and no warning about it on every start.
        if "RAY_AUTH_MODE" not in os.environ:
            os.environ["RAY_AUTH_MODE"] = "token"
            _refresh_ray_config()
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
        if temp is None:
            ray.init(address=address, namespace=namespace, log_to_driver=False, logging_level=logging.WARNING)
        else:
            with loopback_only():
                ray.init(address="local", namespace=namespace, log_to_driver=False, logging_level=logging.WARNING,
                         _temp_dir=str(temp), num_cpus=num_cpus, include_dashboard=False)
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
    if temp is not None:
        from engram.runtime import reaper

        # Ray's agents die with this process, however it ends; so do workers still starting (they name the session)
        reaper.start(marker=os.path.realpath(temp / "session_latest"))
    return not address


def _shutdown_quietly() -> None:
    try:
        ray.shutdown()
    except Exception:  # nothing more to clean up
        pass
