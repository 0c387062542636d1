"""Fixtures for the LLM tests: the local fake Messages API (`fake_messages_api`), and providers pointed at it."""

from __future__ import annotations

import pytest
from tests.providers.llm.fake_messages_api import FAST_RETRIES, FakeMessagesApi

from engram.config.llm import Endpoint, LlmConfig, Preset
from engram.providers.llm.endpoint_tasks import EndpointTasks


@pytest.fixture
def fake_api():
    api = FakeMessagesApi().start()
    yield api
    api.stop()


@pytest.fixture
def llm_config(fake_api):
    """An LlmConfig whose default endpoint is the fake server; keyword arguments change the endpoint."""

    def make(**endpoint) -> LlmConfig:
        settings = {**FAST_RETRIES, "timeout_seconds": 5.0, "base_url": fake_api.url, **endpoint}
        return LlmConfig(
            provider="anthropic",
            endpoints={"default": Endpoint(model="claude-sonnet-5-5", **settings)},
            presets={"default": Preset(temperature=0.2, max_tokens=512)},
        )

    return make


@pytest.fixture
def claude(llm_config):
    """EndpointTasks talking to the fake server with a test key."""
    return EndpointTasks(llm_config(), env={"ANTHROPIC_API_KEY": "test-key"})
