"""Fixtures for discussion memory: an in-process engram shard (real DuckDB log, real projections,
the real Summarizer policy, the offline provider and the real embedder), and message helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.config.discussion import SETTINGS_FILE_NAME
from engram.memory.ingest.messages import IncomingMessage, discussion_write

AGENT = "tester"
T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z, in µs
MINUTE = 60_000_000


def messages(count: int, *, tokens: int = 10, start: int = 0, roles=("user", "assistant")) -> list[IncomingMessage]:
    """`count` messages of exactly `tokens` estimated tokens each, a minute apart, ids m<start>…"""
    return [
        IncomingMessage(role=roles[(start + i) % len(roles)], content=f"Message number {start + i}. " + "x" * (4 * tokens - 20),
                        ts_us=T0 + (start + i) * MINUTE, message_id=f"m{start + i}")
        for i in range(count)
    ]


def write_settings(home: Path, **settings) -> None:
    (home / SETTINGS_FILE_NAME).write_text(json.dumps(settings))


@pytest.fixture
def engine(tmp_path):
    from tests.memory.discussion.engine import LocalEngine

    home = tmp_path / "home"
    home.mkdir()
    eng = LocalEngine(home)
    yield eng
    eng.close()


def ingest(engine, discussion: str, msgs: list[IncomingMessage], *, settle: bool = True, agent: str = AGENT):
    engine.sync_settings(agent, ts_us=msgs[0].ts_us)
    write = discussion_write(agent, discussion, msgs, max_message_chars=100_000)
    engine.append([write])
    if settle:
        engine.settle()


def events(engine, discussion: str, *types: str):
    return [r for r in engine.shard.read(0, limit=None, stream=discussion) if not types or r.type in types]
