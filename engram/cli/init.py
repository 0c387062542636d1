"""`engram init AGENT [--force]`: write `<home>/agents/<AGENT>/agent.config.json` with the defaults.

The file is JSON with comments (as `engram.config.load` reads it). It writes a file and starts nothing: every key of the agent's memory,
storage, rag, personality and mood sections with its default value, so that a user edits values
instead of looking keys up. It is not overwritten unless `--force` is given.
"""

from __future__ import annotations

import json

from engram.cli.common import home_of
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_agent

HEADER = """\
// engram agent configuration for {agent!r} (written by `engram init`; JSON with comments).
// Sections and numbers follow the Wunderland memory guide; every key below holds its default.
//   memory.infiniteContext: compaction when the conversation passes compactionThreshold of
//     contextWindowTokens; strategy sliding | hierarchical | hybrid; the last preserveRecentTurns
//     turns are never compacted; transparencyLevel full | summary | none.
//   memory.observer / reflector: activation thresholds in tokens (30,000 / 40,000).
//   storage.autoIngest: facts kept per turn (importance >= importanceThreshold, at most maxPerTurn).
//   personality: HEXACO traits in [0, 1] (above 0.6 counts as high); mood: PAD baseline in [-1, 1].
// Changes are recorded in the log (SettingsChanged) the next time engram touches this agent.
"""


def register(sub) -> None:
    p = sub.add_parser("init", help="write an agent's agent.config.json with the defaults")
    p.add_argument("agent", metavar="AGENT")
    p.add_argument("--force", action="store_true", help="overwrite an existing agent.config.json")
    p.set_defaults(func=run)


def default_config_text(agent: str) -> str:
    from engram.config.agent import AgentConfig

    body = json.dumps(AgentConfig().to_json_dict(), indent=2, ensure_ascii=False)
    return HEADER.format(agent=agent) + body + "\n"


def run(args) -> int:
    from engram.config.agent import AGENT_CONFIG_FILE_NAME

    from engram.kernel.private import private_dirs, private_home, write_private

    agent = validate_agent(args.agent)
    home = home_of(args)
    path = home / "agents" / agent / AGENT_CONFIG_FILE_NAME
    if path.exists() and not args.force:
        raise UsageError(f"{path} exists; use --force to overwrite it with the defaults")
    private_home(home)
    private_dirs(path.parent)
    write_private(path, default_config_text(agent))
    print(f"wrote {path}")
    print(f"talk to it with: engram chat --agent {agent}")
    return 0
