"""Where an engram home keeps what: the log (truth), projections (rebuildable), configuration.

    <home>/engram.json                                   service configuration (optional)
    <home>/_DiscussionId-MemoryFile-Workflow-Settings.json  discussion memory settings (optional)
    <home>/agents/<agent>/agent.config.json               agent configuration (optional)
    <home>/log/shard-000.duckdb                           the event log of shard 0
    <home>/layout.json                                    shard count, agent->shard map, node of each shard
    <home>/projections/                                   everything rebuildable (replay --out writes a copy)
        shard-000.duckdb                                  SQL projections of shard 0
        _positions/                                       positions of file projections
        agents/<agent>/Public/<id>_memories.jsonl ...     per-agent files
"""

from __future__ import annotations

import json
from pathlib import Path

from engram.config.agent import AGENT_CONFIG_FILE_NAME
from engram.config.discussion import SETTINGS_FILE_NAME
from engram.kernel.ids import validate_agent, validate_discussion
from engram.kernel.private import write_private
from engram.kernel.sharding import ShardMap

LAYOUT_FILE_NAME = "layout.json"
WORKING_MEMORY_FILE_NAME = "working-memory.md"


class HomeLayoutError(ValueError):
    pass


class Home:
    def __init__(self, root: str | Path, shards: int = 1):
        self.root = Path(root).expanduser().resolve()
        self.shards = shards

    # Truth.
    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    def log_path(self, shard: int) -> Path:
        return self.log_dir / f"shard-{shard:03d}.duckdb"

    def existing_log_paths(self) -> list[Path]:
        return [p for p in (self.log_path(s) for s in range(self.shards)) if p.exists()]

    # Configuration.
    @property
    def settings_path(self) -> Path:
        return self.root / SETTINGS_FILE_NAME

    def agent_config_path(self, agent: str) -> Path:
        return self.root / "agents" / validate_agent(agent) / AGENT_CONFIG_FILE_NAME

    # Projections.
    @property
    def projections_dir(self) -> Path:
        return self.root / "projections"

    @property
    def layout_path(self) -> Path:
        return self.root / LAYOUT_FILE_NAME

    def _layout_json(self) -> dict:
        return json.loads(self.layout_path.read_text()) if self.layout_path.exists() else {}

    def layout_check(self) -> ShardMap:
        """The home's routing (shard count, agent->shard map), created on first open, upgraded in place when the
        home was made before the map. The layout is the truth once a home exists: a configuration asking for more
        shards than it has is refused (re-sharding moves agents: `engram reshard`); asking for fewer opens the
        home as re-sharded. Sets `self.shards` to the home's count."""
        data = self._layout_json()
        if not data:
            self.root.mkdir(parents=True, exist_ok=True)
            shard_map = ShardMap(self.shards)
            self.write_layout(shard_map)
        else:
            shard_map = ShardMap.from_json(data)
            if "version" not in data:  # a home made before the agent map: same routing, recorded as such
                self.write_layout(shard_map)
            if self.shards > shard_map.shards:
                raise HomeLayoutError(
                    f"{self.root} has {shard_map.shards} shard(s); this configuration asks for {self.shards}. "
                    f"Agents move between shards only by re-sharding: engram reshard --shards {self.shards}"
                )
        self.shards = shard_map.shards
        return shard_map

    def write_layout(self, shard_map: ShardMap, **extra) -> None:
        """Record `shard_map` (and `extra` keys, e.g. `nodes`), keeping the file's other keys; atomically."""
        data = self._layout_json()
        data.update(shard_map.to_json())
        data.update(extra)
        write_private(self.layout_path, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def recorded_nodes(self) -> dict[str, dict]:
        """Shard (as "000") -> the node that held it when last started (`engram status`, docs/scaling.md)."""
        return dict(self._layout_json().get("nodes", {}))

    def record_nodes(self, nodes: dict[int, dict]) -> None:
        data = self._layout_json()
        recorded = dict(data.get("nodes", {}))
        recorded.update({f"{s:03d}": where for s, where in nodes.items()})
        self.write_layout(ShardMap.from_json(data), nodes=recorded)


class ProjectionPaths:
    """Paths inside one projections directory (the live one, or a replay's fresh one)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def shard_db(self, shard: int) -> Path:
        return self.root / f"shard-{shard:03d}.duckdb"

    def position_file(self, projection: str, shard: int) -> Path:
        return self.root / "_positions" / f"{projection}.shard-{shard:03d}.json"

    def agent_dir(self, agent: str) -> Path:
        return self.root / "agents" / validate_agent(agent)

    def discussion_dir(self, agent: str) -> Path:
        """WilmerAI keeps discussion memory files in `Public/`; so do we, one per agent."""
        return self.agent_dir(agent) / "Public"

    def working_memory_file(self, agent: str) -> Path:
        """The agent's working memory as markdown (its slots and notes; written by the working-memory projection)."""
        return self.agent_dir(agent) / WORKING_MEMORY_FILE_NAME

    def discussion_file(self, agent: str, discussion: str, suffix: str) -> Path:
        return self.discussion_dir(agent) / f"{validate_discussion(discussion)}{suffix}"
