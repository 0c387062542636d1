"""Shared fixtures: one real local Ray instance per test session, and fresh engram homes."""

from __future__ import annotations

import os

import pytest

# No test may reach a real LLM: the offline provider is the default without a key.
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("RAY_ADDRESS", None)


@pytest.fixture(scope="session")
def ray_session():
    """A real local Ray instance (2 CPUs), started once for all integration tests."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, namespace="engram-tests", log_to_driver=False)
    yield ray
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
    """The Python API on real Ray actors, for one test's fresh home."""
    from engram.actors.runtime import Runtime
    from engram.client import Engram

    mem = Engram(service_config, Runtime(service_config).start())
    yield mem
    mem.close()
