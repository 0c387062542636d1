"""The settings a policy folds: one event (and one parsed model) per content, however many agents recorded it."""

from __future__ import annotations

import pickle

import msgspec

from engram.config.agent import AgentConfig, Mood
from engram.config.discussion import DiscussionSettings
from engram.config.recorded import SCOPE_AGENT, SCOPE_DISCUSSION
from engram.events.codec import decode, encode
from engram.events.envelope import Recorded
from engram.kernel.ids import agent_stream
from engram.memory.settings import SettingsView, settings_event


def recorded(seq: int, agent: str, model: AgentConfig | DiscussionSettings, scope: str) -> Recorded:
    ev = settings_event(scope, f"{scope}.json", model)
    # Decoded from its payload, as a policy reads it from the log: a new object for every agent.
    copy = decode("SettingsChanged", ev.SCHEMA_VERSION, encode(ev))
    return Recorded(seq=seq, stream=agent_stream(agent), stream_version=seq, agent=agent, ts_us=seq, event=copy)


def test_agents_with_equal_settings_share_one_event_and_one_parsed_config():
    view = SettingsView()
    agents = [f"agent-{i}" for i in range(50)]
    for i, agent in enumerate(agents):
        view.apply(recorded(2 * i + 1, agent, AgentConfig(), SCOPE_AGENT))
        view.apply(recorded(2 * i + 2, agent, DiscussionSettings(), SCOPE_DISCUSSION))
    held = view.state()[0]
    assert len({id(ev) for (_, scope), ev in held.items() if scope == SCOPE_AGENT}) == 1
    assert len({id(ev) for (_, scope), ev in held.items() if scope == SCOPE_DISCUSSION}) == 1
    assert len({id(view.agent_config(a)) for a in agents}) == 1
    assert view.agent_config(agents[7]) == AgentConfig()
    assert view.recorded_hashes(agents[3]) == {SCOPE_AGENT: held[(agents[3], SCOPE_AGENT)].content_hash,
                                               SCOPE_DISCUSSION: held[(agents[3], SCOPE_DISCUSSION)].content_hash}
    assert view.recorded_hashes("nobody") == {}


def test_a_changed_setting_is_its_agents_own():
    view = SettingsView()
    view.apply(recorded(1, "ann", AgentConfig(), SCOPE_AGENT))
    view.apply(recorded(2, "bob", AgentConfig(), SCOPE_AGENT))
    changed = AgentConfig(mood=Mood(valence=0.5, arousal=0.1, dominance=0.2))
    view.apply(recorded(3, "bob", changed, SCOPE_AGENT))
    assert view.agent_config("ann") == AgentConfig()
    assert view.agent_config("bob") == changed != AgentConfig()
    assert view.recorded_hashes("ann")[SCOPE_AGENT] != view.recorded_hashes("bob")[SCOPE_AGENT]


def test_a_restored_view_shares_equal_events_again():
    view = SettingsView()
    for i in range(5):
        view.apply(recorded(i + 1, f"agent-{i}", AgentConfig(), SCOPE_AGENT))
    agent, discussion = view.state()
    # A snapshot taken before the view shared its events: every agent's event a copy of its own.
    unshared = ({k: msgspec.structs.replace(ev) for k, ev in agent.items()}, dict(discussion))
    restored = SettingsView()
    restored.restore(pickle.loads(pickle.dumps(unshared)))
    assert len({id(ev) for ev in restored.state()[0].values()}) == 1
    assert restored.state()[0] == agent
