"""A populated one-shard home, made once per session and copied for each test that starts from it."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def populated_template(tmp_path_factory):
    """A closed home (in-process runtime) after `populate`: nine agents, memory caught up. Nothing in a home's files
    names its own path, so a copy is that home, reopened."""
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.cluster.test_reshard import populate

    home = tmp_path_factory.mktemp("populated") / "home"
    home.mkdir()
    mem = Engram(InProcessRuntime(load_service_config(home), wall_clock=False).start())
    try:
        populate(mem)
    finally:
        mem.close()
    return home


@pytest.fixture
def populated_copy(populated_template, tmp_path):
    """A fresh copy of the populated home for one test to change."""
    home = tmp_path / "home"
    shutil.copytree(populated_template, home)
    return home
