"""The instance file's address is probed, never trusted: an address with no host is "nothing answers there"."""

from __future__ import annotations

import os

from engram.server.instance import live_server, probe, write_instance


def test_probing_an_address_without_a_host_finds_no_server():
    assert probe("localhost:8765") is None  # scheme "localhost", no host: nothing to connect to
    assert probe("not an address") is None


def test_an_instance_file_with_a_damaged_address_is_stale_not_an_error(tmp_path):
    write_instance(tmp_path, {"url": "garbage", "pid": os.getpid(), "token": "t"})  # a live PID: the probe runs
    assert live_server(tmp_path) is None
