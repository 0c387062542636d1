"""Where an engram home keeps what: the log (truth), projections (rebuildable), configuration.

    <home>/engram.json                                   service configuration (optional)
    <home>/_DiscussionId-MemoryFile-Workflow-Settings.json  discussion memory settings (optional)
    <home>/agents/<agent>/agent.config.json               agent configuration (optional)
    <home>/log/shard-000.duckdb                           the event log of shard 0
    <home>/layout.json                                    shard count, fixed when the home is created
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
from engram.ids import validate_agent, validate_discussion


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

    def layout_check(self) -> None:
        """Refuse to open a home with a different shard count than it was created with."""
        path = self.root / "layout.json"
        if path.exists():
            recorded = json.loads(path.read_text())["shards"]
            if recorded != self.shards:
                raise HomeLayoutError(
                    f"{self.root} was created with {recorded} shard(s); this configuration asks for {self.shards}. "
                    "Agents are placed on shards by hash, so the count cannot change in place."
                )
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"shards": self.shards}) + "\n")


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

    def discussion_file(self, agent: str, discussion: str, suffix: str) -> Path:
        return self.discussion_dir(agent) / f"{validate_discussion(discussion)}{suffix}"
