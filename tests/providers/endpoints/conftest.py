"""Fixtures: a real llama.cpp server (llama-cpp-python) with the tiny test model, for the whole session."""

from __future__ import annotations

import pytest

from tests.providers.endpoints.llama_server import LlamaServer


@pytest.fixture(scope="session")
def llama(tmp_path_factory):
    """A llama.cpp server (llama-cpp-python 0.3.36) with a 2048-token window, at `llama.url`."""
    server = LlamaServer(tmp_path_factory.mktemp("llama"), n_ctx=2048).start()
    yield server
    server.stop()
