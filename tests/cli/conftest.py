"""The commands' homes: served by a server process the first command starts (on the in-process runtime unless a
test says otherwise, so that each test does not pay a Ray start), and stopped after the test."""

from __future__ import annotations

import json

import pytest


def serve_inprocess(home, **config) -> None:
    """engram.json for `home` with `config`, and a server on the in-process runtime."""
    config.setdefault("server", {}).setdefault("runtime", "inprocess")
    (home / "engram.json").write_text(json.dumps(config))


@pytest.fixture(autouse=True)
def _stop_servers(request):
    homes = []
    if "home_dir" in request.fixturenames:
        homes.append(request.getfixturevalue("home_dir"))
    yield
    from tests.cli.test_server_lifecycle import stop

    for home in homes:
        stop(home)
