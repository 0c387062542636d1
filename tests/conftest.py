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


# Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`), each worker is a pytest session of its own, so a
# session fixture would be made once per worker, and a module's tests could be split over both workers (making its
# module fixtures twice). Every test therefore gets an `xdist_group`: its module, joined with every other module that
# shares one of these expensive session fixtures. Everything that starts Ray (the `ray` marker, `ray_session`)
# is one group: one worker runs it all, so one local Ray instance runs at a time, as without xdist.
SHARED_SESSION_FIXTURES = ("ray_session", "llama", "populated_template")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    parent = {m: m for m in modules}

    def root(m: str) -> str:
        while parent[m] != m:
            m = parent[m]
        return m

    owner: dict[str, str] = {}  # a shared fixture -> the first module that uses it
    for module, its in modules.items():
        used = {name for item in its for name in item.fixturenames if name in SHARED_SESSION_FIXTURES}
        if any(item.get_closest_marker("ray") for item in its):
            used.add("ray_session")
        for name in sorted(used):
            first = owner.setdefault(name, module)
            parent[root(module)] = root(first)
    for module, its in modules.items():
        group = root(module)
        name = next((f for f in SHARED_SESSION_FIXTURES if f in owner and root(owner[f]) == group), group)
        for item in its:
            if not item.get_closest_marker("xdist_group"):
                item.add_marker(pytest.mark.xdist_group(name))



def pytest_xdist_node_collection_finished(node, ids):
    """Under `--dist loadgroup`, every test id a worker collected must carry its group (xdist appends `@group`; its
    scheduler keeps a group on one worker by that suffix). When a pytest or xdist release stops that, the groups are
    silently ignored (one module's fixture made on both workers, two local Rays at once): stop the run instead."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [i for i in ids if "@" not in i.rpartition("::")[2]]
    if lost:
        pytest.exit(f"pytest-xdist did not apply the test groups (e.g. {lost[0]}): pytest {pytest.__version__} and "
                    "this pytest-xdist do not work together (see the pin in pyproject.toml)", returncode=3)
