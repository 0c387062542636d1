"""The engram app as a Ray Serve application (`server.backend: "ray-serve"` in engram.json).

On a cluster the HTTP front door runs where Ray Serve puts it: the same FastAPI app (`engram.server.app`) is
the ingress of a Serve deployment whose replicas each hold an `Api` over a `RayRuntime` with shared (detached,
named) actors, so every replica reaches the same shard actors and each DuckDB file keeps one writer.
`deploy` runs it on the Ray instance this process is connected to; `serve_on_ray` is `engram serve` with this
backend (it starts or joins Ray, deploys, records instance.json, and stops it all on `engram down`/SIGTERM).

Webhooks (`webhooks` in engram.json) are delivered by the process that deployed the app (`deploy`), never by the
replicas: every replica following the log would POST each memory change once per replica. It holds an `Api` over the
home's shared actors for that alone, made only when engram.json names a webhook, and closed by `stop`.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import ray
from ray import serve

APP_PREFIX = "engram"
_WEBHOOKS: dict[str, Any] = {}  # home -> the Api delivering its webhooks from this process (`deploy`, `stop`)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build_state(config_json: dict, home: str, token: str, owner_pid: int):
    """In a replica: the Api over the home's shared actors, the server's identity, and shutdown."""
    from engram import __version__
    from engram.api.service import Api
    from engram.server.instance import Identity
    from engram.config.service import ServiceConfig
    from engram.runtime.ray_runtime import RayRuntime

    config = ServiceConfig.model_validate(config_json)
    runtime = RayRuntime(config, shared=True).start()
    runtime.start_policies()
    identity = Identity(home=home, token=token, pid=owner_pid, version=__version__,
                        runtime=f"Ray Serve ({runtime.description})")
    api = Api(runtime)
    if config.server.replicas > 1:  # a client's polls of a job may reach any replica: they publish their jobs
        from engram.api.jobs import Jobs

        api.jobs.close()
        api.jobs = Jobs(shared=Path(home) / "state" / "jobs" / token)
    said = api.resume_interrupted()  # every replica tries; the first to claim the journal runs it
    if said:
        print(f"engram: {said}", flush=True)
    return api, identity, lambda: os.kill(owner_pid, signal.SIGTERM)


def make_deployment(config_json: dict, home: str, token: str, owner_pid: int, host: str = "127.0.0.1"):
    from functools import partial

    from engram.server.app import create_app

    app = create_app(api=None, identity=None, factory=partial(build_state, config_json, home, token, owner_pid),
                     max_body_bytes=config_json["server"]["max_body_bytes"], host=host,
                     allowed_hosts=tuple(config_json["server"].get("allowed_hosts", ())))

    @serve.deployment(name="engram", num_replicas=config_json["server"].get("replicas", 1), ray_actor_options={"num_cpus": 0})
    @serve.ingress(app)
    class EngramServe:
        """The app's state is built on the first request (see engram.server.app.ensure_state)."""

    return EngramServe


def deploy(config, home: Path, token: str, *, host: str, port: int, owner_pid: int) -> str:
    """Deploy the app on the Ray instance this process is connected to; its URL."""
    serve.start(http_options={"host": host, "port": port})
    deployment = make_deployment(config.model_dump(mode="json"), str(home), token, owner_pid, host)
    serve.run(deployment.bind(), name=f"{APP_PREFIX}-{abs(hash(str(home))) % 10**8}", route_prefix="/")
    url = f"http://{host}:{port}"
    from engram.server.instance import probe

    probe(url, timeout=600)  # the first request builds the replica's runtime: made before anyone waits on it
    start_webhooks(config)
    return url


def start_webhooks(config) -> None:
    """Deliver the home's webhooks from this process, over the actors the replicas made (see the module docstring);
    a webhook whose secret variable is not set is a ValueError."""
    if not config.webhooks or str(config.home) in _WEBHOOKS:
        return
    from engram.api.service import Api
    from engram.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(config, shared=True)
    # The replicas made the home's actors (the probe's first request did), in the namespace of their job: reach those,
    # never make a second ShardActor for a log that has one.
    where = {a["name"]: a["namespace"] for a in ray.util.list_named_actors(all_namespaces=True)}
    namespace = where.get(runtime.actor_name("shard-000"))
    if namespace is None:
        raise RuntimeError("webhooks: the deployment's replicas have not made the home's actors")
    runtime.namespace = namespace
    api = Api(runtime.start())
    try:
        api.start_webhooks()
    except ValueError:
        api.close()
        raise
    _WEBHOOKS[str(config.home)] = api


def stop(config) -> None:
    """Stop the webhooks, undeploy, then close the home's actors cleanly (projections checkpointed, DuckDB closed)."""
    from engram.runtime.ray_runtime import RayRuntime

    webhooks = _WEBHOOKS.pop(str(config.home), None)
    if webhooks is not None:
        webhooks.close()
    serve.shutdown()
    RayRuntime(config, shared=True).stop_named_actors()


def serve_on_ray(config, home: Path, host: str, port: int, token: str, args) -> int:
    from engram.runtime.startup import RayStartError, init_ray
    from engram.server.instance import remove_instance, write_instance

    try:
        for webhook in config.webhooks:  # before anything starts: a secret variable that is not set
            webhook.key()
    except ValueError as exc:
        print(f"engram: error: {exc}", flush=True)
        return 2
    try:
        started = init_ray(home=home, address=args.address or config.ray.address, namespace=config.ray.namespace,
                           num_cpus=config.ray.num_cpus, timeout_s=config.ray.start_timeout_seconds)
    except RayStartError as exc:
        print(f"engram: error: {exc}", flush=True)
        return 2
    import ray

    stop_event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop_event.set())
    url = deploy(config, home, token, host=host, port=port or free_port(host), owner_pid=os.getpid())
    write_instance(home, {"url": url, "pid": os.getpid(), "token": token, "home": str(home), "runtime": "Ray Serve",
                          "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    print(f"engram: serving {home} at {url} (Ray Serve); stop with Ctrl-C or `engram down`", flush=True)
    try:
        stop_event.wait()
    finally:
        remove_instance(home, token)
        stop(config)
        if started:
            ray.shutdown()
        print("engram: stopped", flush=True)
    return 0
