"""Shared fixtures: one real local Ray instance per test session, fresh engram homes, and the API over them."""

from __future__ import annotations

import os

import pytest

# No test may reach a real LLM: the offline provider is the default without a key.
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("RAY_ADDRESS", None)


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory):
    """A real local Ray instance (2 CPUs), started once for all integration tests: always a new local instance
    (`address="local"`) in a short temp dir of its own, with a start-up timeout, as engram starts one."""
    import ray

    from engram.runtime.startup import init_ray

    started = init_ray(home=tmp_path_factory.mktemp("ray-session"), address=None, namespace="engram-tests",
                       num_cpus=2, timeout_s=300)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def home_dir(tmp_path):
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def service_config(home_dir):
    from engram.config.service import load_service_config

    return load_service_config(home_dir)


@pytest.fixture
def engram_client(ray_session, service_config):
    """The API embedded in the test process, on real Ray actors, for one test's fresh home."""
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime

    mem = Engram(RayRuntime(service_config).start())
    yield mem
    mem.close()
