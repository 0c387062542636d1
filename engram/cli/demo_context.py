"""The demo's infinite-context section: a compaction of the demo discussion, and `engram context`.

The demo discussion (45 messages, ~1,100 tokens) is far below 75% of the default 200,000-token window,
so this section lowers the demo agent's window to 1,000 tokens: the ContextCompactor compacts as soon as
the new settings are recorded. The same turns are then run through the three strategies without the
log, to compare them.
"""

from __future__ import annotations

import json

from engram.kernel.private import private_dirs, write_private

DEMO_WINDOW_TOKENS = 1_000


def infinite_context(demo) -> None:
    from engram.cli.compactions import render

    mem, agent, discussion = demo.mem, demo.agent, demo.discussion
    demo.heading("Infinite context: compaction of the demo discussion")
    _, rows = demo.query("SELECT count(*), sum(token_estimate) FROM messages WHERE discussion_id = ?", [discussion])
    count, tokens = rows[0]
    print(f"NOTE: the demo LOWERS the context window to {DEMO_WINDOW_TOKENS:,} tokens (default 200,000), so that its "
          f"{count}-message, {tokens:,}-token discussion passes the compaction threshold (75% = "
          f"{int(DEMO_WINDOW_TOKENS * 0.75):,} tokens). The last 20 turns are never compacted.")
    path = demo.home / "agents" / agent / "agent.config.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("memory", {}).setdefault("infiniteContext", {})["contextWindowTokens"] = DEMO_WINDOW_TOKENS
    private_dirs(path.parent)
    write_private(path, json.dumps(data, indent=2) + "\n")
    print(f"$ edit {path}: memory.infiniteContext.contextWindowTokens = {DEMO_WINDOW_TOKENS}")
    # The settings file changed: record it (SettingsChanged); the compactor reacts to the recorded settings.
    mem.record_settings(agent)
    mem.wait_idle()
    res = mem.compactions(agent, discussion)
    print(f"\n$ engram compactions --discussion {discussion}")
    if not res.compactions:
        print("(no compaction: the discussion is below the threshold)")
        return
    text = render(res).splitlines()
    print("\n".join(text[:40] + (["…"] if len(text) > 40 else [])))

    _compare_strategies(demo, discussion)

    demo.heading("engram context: what would be sent to the model now")
    print(f"$ engram context --discussion {discussion}")
    print(mem.context(agent, discussion).rendered)
    demo.notes.append(f"ENGRAM_HOME={demo.home} .venv/bin/engram compactions --discussion {discussion}")
    demo.notes.append(f"ENGRAM_HOME={demo.home} .venv/bin/engram chat --agent {agent} --discussion {discussion}")


def _compare_strategies(demo, discussion) -> None:
    """The same turns through sliding, hierarchical and hybrid (pure core, offline provider, nothing logged)."""
    from engram.cli.common import print_rows
    from engram.config.agent import AgentConfig
    from engram.memory.context.simulate import simulate
    from engram.providers.llm.offline.provider import OfflineTasks
    from engram.providers.llm.types import ChatLine

    _, rows = demo.query("SELECT seq, role, name, content, epoch_us(ts), message_id FROM messages WHERE discussion_id = ? "
                         "ORDER BY seq", [discussion])
    lines = [ChatLine(role=r[1], name=r[2], content=r[3], seq=r[0], ts_us=r[4], message_id=r[5]) for r in rows]
    print("\nthe same turns through each strategy, as if the window had been 1,000 tokens from the first message "
          "(pure core, offline provider, nothing appended):")
    out = []
    for strategy in ("sliding", "hierarchical", "hybrid"):
        cfg = AgentConfig.model_validate({"memory": {"infiniteContext": {
            "strategy": strategy, "contextWindowTokens": DEMO_WINDOW_TOKENS}}})
        sim = simulate(lines, cfg, OfflineTasks())
        chain = sim.context.chain
        out.append((strategy, len(sim.events), " ".join(n.label for n in chain), sim.context.covered_tokens,
                    sim.context.chain_tokens, f"{sim.compression_ratio}x", len(sim.traces),
                    f"{1000 * sum(sim.compaction_seconds):.1f}"))
    print_rows(["strategy", "compactions", "chain", "covered", "chain_tokens", "ratio", "traces", "ms"], out)
