"""`engram serve`: keep a home's actors running so that other commands and programs share them.

While it runs, `engram ingest`, `engram sql`, `engram status` … in other terminals join its
Ray instance (found through `<home>/instance.json`) instead of opening the files
themselves: each DuckDB file keeps exactly one writer.
"""

from __future__ import annotations

import signal
import threading

from engram.cli.common import config_from
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("serve", help="run this home's actors until stopped; other commands join them")
    p.set_defaults(func=run)


def run(args) -> int:
    import ray

    from engram.actors.runtime import INSTANCE_FILE, Runtime, running_instance, write_instance_file
    from engram.home import Home

    config = config_from(args)
    home = Home(config.home, config.shards)
    if running_instance(home):
        raise UsageError(f"{home.root} is already served (see {home.root / INSTANCE_FILE})")
    runtime = Runtime(config, address=getattr(args, "address", None)).start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        shards = runtime.shards()
        runtime.policies()
        ray.get([s.head.remote() for s in shards])  # actors are up
        address = ray.get_runtime_context().gcs_address
        write_instance_file(home, address)
        print(f"serving {home.root} on Ray at {address} ({config.shards} shard(s)); stop with Ctrl-C", flush=True)
        stop.wait()
    finally:
        (home.root / INSTANCE_FILE).unlink(missing_ok=True)
        runtime.close()
        print("stopped", flush=True)
    return 0
