"""A damaged projection file is detected at start, rebuilt from the log, and reported in status."""

import json
import shutil

import pytest
from tests.reliability.harness import LocalHome

from engram.memory.ingest.formats import parse_file

AGENT = "ana"


@pytest.fixture(scope="module")
def built_home(tmp_path_factory):
    root = tmp_path_factory.mktemp("recovery") / "home"
    root.mkdir()
    (root / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}}))
    [conv] = parse_file("engram/samples/acme-dashboard.jsonl", now_us=1_714_557_600_000_000)
    with LocalHome(root) as local:
        local.say(AGENT, conv.discussion, conv.messages)
        local.settle()
        assert local.shard.verify_replay() == []
    return root


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {
    "the projection database cut in half": lambda root: _truncate(root / "projections" / "shard-000.duckdb"),
    "a memories file cut mid-line": lambda root: _truncate(
        root / "projections" / "agents" / AGENT / "Public" / "acme-dashboard_memories.jsonl"),
    "a vector store overwritten with noise": lambda root: (
        root / "projections" / "agents" / AGENT / "Public" / "acme-dashboard_vector_memory.db").write_bytes(b"\x00\x17" * 5000),
    "a trace index cut in half": lambda root: _truncate(root / "projections" / "agents" / AGENT / "traces.hnsw"),
    "the trace index's metadata with garbage": lambda root: (
        root / "projections" / "agents" / AGENT / "traces.hnsw.json").write_text('{"ids": ['),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_projection_is_detected_at_start_rebuilt_from_the_log_and_reported(built_home, tmp_path, damage):
    root = tmp_path / "home"
    shutil.copytree(built_home, root)
    before = (built_home / "projections" / "agents" / AGENT / "Public" / "acme-dashboard_memories.jsonl").read_bytes()
    DAMAGE[damage](root)
    with LocalHome(root) as local:
        recovered = local.shard.status()["recovered"]
        assert len(recovered) == 1 and recovered[0].startswith("projections rebuilt from the log at start")
        local.settle()
        assert local.shard.verify_replay() == []
        assert (root / "projections" / "agents" / AGENT / "Public" / "acme-dashboard_memories.jsonl").read_bytes() == before
    with LocalHome(root) as local:  # and the next start finds nothing wrong
        assert local.shard.status()["recovered"] == []
