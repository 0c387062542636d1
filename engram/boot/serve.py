"""The composition root: configuration -> runtime -> API -> HTTP server, for one home.

    python -m engram.boot serve --home H [--host H] [--port P] [--address RAY] [--runtime ray|inprocess]

`engram serve` runs this in the foreground; any other command starts it in the background when no
server runs for the home (`engram.server.instance.start_server`). It is the one place that knows
every layer: the interfaces (CLI, server) never import a runtime, the runtime never imports them.

Start-up checks what a user can get wrong before anything heavy starts: the settings files (a typo
costs milliseconds), that no other server serves the home, that no other process holds the home's
DuckDB files; then Ray starts (with a timeout) and the actors come up. Every failure is one line on
stderr and exit code 2. While it runs, `<home>/instance.json` says where it listens; an idle timeout
(`server.idleTimeoutSeconds`, for servers a command started), `engram down`, SIGTERM or Ctrl-C stop it
cleanly (projections checkpointed, DuckDB closed, instance.json removed).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from engram.kernel.private import private_home
from engram.server.instance import home_path, live_server, remove_instance, write_instance

SERVING_LOCK = "server.lock"  # held for the life of a server: a second server of the home refuses to start
IDLE_CHECK_S = 1.0


class BootError(Exception):
    """A start-up failure the user can act on: printed as one line, exit code 2."""


def fail(message: str) -> int:
    print(f"engram: error: {message}", file=sys.stderr, flush=True)
    return 2


def hold_serving_lock(home: Path) -> int:
    """Lock `<home>/server.lock` for the life of this process (released by the OS when it dies)."""
    from engram.kernel.filelock import try_lock

    fd = try_lock(home / SERVING_LOCK)
    if fd is None:
        info = live_server(home)
        where = f" at {info['url']} (pid {info['pid']})" if info else " (it is still starting)"
        raise BootError(f"{home} is already served{where}; stop it with `engram down`")
    return fd


def check_files_free(config) -> None:
    """Refuse to start when another process holds one of the home's DuckDB files (say which process)."""
    import duckdb

    from engram.config.home import Home, ProjectionPaths

    home = Home(config.home, config.shards)
    paths = [home.log_path(s) for s in range(config.shards)]
    paths += [ProjectionPaths(home.projections_dir).shard_db(s) for s in range(config.shards)]
    paths.append(home.root / "cache" / "embeddings.duckdb")
    for path in paths:
        if not path.exists():
            continue
        try:
            duckdb.connect(str(path)).close()
        except duckdb.IOException as exc:
            detail = " ".join(str(exc).split())
            raise BootError(f"{path} is locked by another process, so engram cannot serve {home.root}: {detail}") from None
        except duckdb.Error as exc:
            raise BootError(f"{path} cannot be opened: {' '.join(str(exc).split())}") from None


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(home: Path, host: str) -> str:
    """Without an API key the server serves loopback only; the line that says how requests are authorised."""
    from engram.server.keys import KeyError_, load_keys

    try:
        keys = load_keys(home)
    except KeyError_ as exc:
        raise BootError(str(exc)) from None
    if not keys:
        if not is_loopback(host):
            raise BootError(f"no API key is configured, so engram serves loopback only and will not listen on {host}: "
                            "add one first (`engram keys add --agents …`), or serve on 127.0.0.1")
        return ("no API key configured: listening on loopback only, every request may touch every agent "
                "(`engram keys add --agents …` to require keys)")
    return f"{len(keys)} API key(s) configured: every request needs one, and touches only its key's agents"


def open_api(config, runtime: str, address: str | None):
    from engram.runtime.base import RuntimeUnavailable
    from engram.api.service import Api
    from engram.config.errors import ConfigError
    from engram.config.home import HomeLayoutError
    from engram.runtime import open_runtime
    from engram.runtime.startup import RayStartError

    try:
        rt = open_runtime(config, runtime, **({"address": address} if runtime == "ray" else {}))
    except (RayStartError, HomeLayoutError, ConfigError) as exc:
        raise BootError(str(exc)) from None
    try:
        rt.start_policies()
    except RuntimeUnavailable as exc:
        rt.close()
        raise BootError(f"the home's actors did not start: {exc}") from None
    except Exception as exc:
        rt.close()
        first = " ".join(str(exc).split())[:500]
        raise BootError(f"the home's actors did not start: {type(exc).__name__}: {first}") from None
    return Api(rt)


def serve(args) -> int:
    from engram.config.errors import ConfigError
    from engram.config.service import load_service_config

    from engram.providers.llm.routing import why_provider

    home = home_path(args.home)
    said = private_home(home)
    if said:
        print(f"engram: {said}", flush=True)
    try:
        config = load_service_config(home)
        # Which provider answers memory tasks and why; raises for e.g. llm.provider "anthropic" without its key.
        llm_line = why_provider(config.llm)
    except ConfigError as exc:
        return fail(" ".join(str(exc).split()))
    try:
        lock_fd = hold_serving_lock(home)
        check_files_free(config)
    except BootError as exc:
        return fail(str(exc))
    settings = config.server
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    try:
        keys_note = check_exposure(home, host)
    except BootError as exc:
        return fail(str(exc))
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        return fail(f"cannot listen on {host}:{port}: {exc.strerror}; choose another with --port or server.port")
    url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    # Ray puts the driver's working directory on every worker's import path: the home holds no Python
    # package, so nothing where the server was started from (an `engram/` folder, say) shadows engram there.
    # Only once every check has passed: a refusal leaves the caller's directory as it was.
    os.chdir(home)
    token = secrets.token_hex(16)
    backend = args.backend or settings.backend
    args.runtime = args.runtime or settings.runtime
    print(f"engram: starting the server of {home} ({backend}, runtime {args.runtime})…", flush=True)
    print(f"engram: {keys_note}", flush=True)
    print(f"engram: {llm_line}", flush=True)
    started = time.perf_counter()
    try:
        if backend == "ray-serve":
            sock.close()
            from engram.boot.ray_serve import serve_on_ray

            return serve_on_ray(config, home, host, port, token, args)
        api = open_api(config, args.runtime, args.address)
    except BootError as exc:
        return fail(str(exc))
    said = api.resume_interrupted()
    if said:
        print(f"engram: {said}", flush=True)
    try:
        api.start_webhooks()
    except ValueError as exc:  # a webhook whose secret variable is not set
        api.close()
        return fail(str(exc))
    try:
        return run_uvicorn(api, config, home, sock, url, token, host=host, idle=settings.idle_timeout_seconds
                           if args.started_by_command else 0.0, started=started)
    finally:
        os.close(lock_fd)


def identity_of(home: Path, token: str, api) -> "object":
    from engram import __version__
    from engram.server.instance import Identity

    return Identity(home=str(home), token=token, pid=os.getpid(), version=__version__, runtime=api.rt.description)


def run_uvicorn(api, config, home: Path, sock, url: str, token: str, *, host: str, idle: float, started: float) -> int:
    import uvicorn

    from engram.server.app import Activity, create_app

    activity = Activity()
    server: uvicorn.Server | None = None

    def shutdown() -> None:
        if server is not None:
            server.should_exit = True

    app = create_app(api, identity_of(home, token, api), shutdown=shutdown, max_body_bytes=config.server.max_body_bytes,
                     activity=activity, host=host)
    # log_config=None: uvicorn's loggers go through engram's root handler (engram.kernel.logs), one line per record.
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=30, log_config=None))

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        if server.should_exit:
            return
        write_instance(home, {"url": url, "pid": os.getpid(), "token": token, "home": str(home),
                              "runtime": api.rt.description, "idle_timeout_s": idle,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        print(f"engram: serving {home} at {url} (ready in {time.perf_counter() - started:.1f}s; "
              + (f"stops after {idle:.0f}s idle or with `engram down`)" if idle else "stop with Ctrl-C or `engram down`)"),
              flush=True)
        while idle and not server.should_exit:
            time.sleep(IDLE_CHECK_S)
            if activity.idle_for() > idle and not api.jobs.running():
                print(f"engram: idle for {idle:.0f}s, stopping", flush=True)
                server.should_exit = True

    watcher = threading.Thread(target=announce, name="engram-announce", daemon=True)
    watcher.start()
    try:
        server.run(sockets=[sock])
    finally:
        remove_instance(home, token)
        try:
            api.close()
        finally:
            print("engram: stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engram.boot")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--home")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--address", help="a Ray cluster to join (default: RAY_ADDRESS, ray.address, else a local instance)")
    p.add_argument("--runtime", choices=("ray", "inprocess"), help="default: server.runtime (ray)")
    p.add_argument("--backend", choices=("uvicorn", "ray-serve"))
    p.add_argument("--started-by-command", action="store_true", help="stop after server.idleTimeoutSeconds idle")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal does not stop a background server
    return serve(args)


def set_up_process() -> None:
    """What belongs to the server's process as a whole, set before anything else runs in it (not when `main` is
    called inside another program, a test's): everything it and its Ray processes create is its owner's alone
    (umask 077, `engram.kernel.private`: the home's logs, projections, instance token, journals, Ray's files), and its
    logging is engram's, one line per record, through a queue (`engram.kernel.logs`)."""
    from engram.kernel import logs
    from engram.kernel.private import UMASK

    os.umask(UMASK)
    logs.configure()


if __name__ == "__main__":
    set_up_process()
    sys.exit(main())
