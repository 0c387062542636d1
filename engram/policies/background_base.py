"""What the background policies (Observer, Reflector, clock ticker, Consolidator) share.

Placement by agent on their pool (consistent hashing), the agent's configuration as recorded in the
log (parsed once per recorded version, not once per event), and the memory tasks.
"""

from __future__ import annotations

from engram.config.agent import AgentConfig
from engram.config.recorded import SCOPE_AGENT
from engram.kernel.placement import owner
from engram.memory.settings import SettingsView
from engram.policies.base import Policy, PolicyContext


class BackgroundPolicy(Policy):
    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.settings = SettingsView()
        self._configs: dict[str, tuple[str, AgentConfig]] = {}

    def owns(self, agent: str) -> bool:
        return owner(agent, self.ctx.members) == self.ctx.member

    def config_of(self, agent: str) -> AgentConfig:
        """The agent's configuration in force at the event being handled."""
        digest = self.settings.recorded_hashes(agent).get(SCOPE_AGENT, "")
        cached = self._configs.get(agent)
        if cached is None or cached[0] != digest:
            cached = self._configs[agent] = (digest, self.settings.agent_config(agent))
        return cached[1]

    def forget_agent(self, agent: str) -> None:
        self._configs.pop(agent, None)

    @property
    def tasks(self):
        return self.ctx.tasks
