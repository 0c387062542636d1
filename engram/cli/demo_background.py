"""The demo's background-processes sections: the Observer (buffered, then activated), a reflection,
and the consolidation runs of the demo agent.

The sample conversation holds about 1,100 tokens, far below the Observer's 30,000-token threshold and
the Reflector's 40,000, so `configure` (before the ingest) gives the demo agent an agent.config.json with
lowered thresholds, printed on screen; `background` (after it) shows what the processes did.
"""

from __future__ import annotations

import json

from engram.cli.common import print_rows
from engram.config import defaults as d
from engram.kernel.private import private_dirs, write_private

# Scaled to the sample's ~1,100 tokens as the defaults are to a long conversation.
DEMO_CONFIG = {
    "memory": {
        "observer": {"activationTokens": 400, "bufferTokens": 100},
        "reflector": {"activationTokens": 60},
    }
}


def configure(demo) -> None:
    demo.heading("Background processes: a lowered-threshold config for the demo agent")
    path = demo.home / "agents" / demo.agent / "agent.config.json"
    private_dirs(path.parent)  # the home is its owner's alone, whatever the caller's umask (engram.kernel.private)
    write_private(path, json.dumps(DEMO_CONFIG, indent=2) + "\n")
    print(f"The sample conversation has ~1,100 tokens; the Observer starts at {d.OBSERVER_ACTIVATION_TOKENS:,} unobserved "
          f"tokens (buffering every {d.OBSERVER_BUFFER_TOKENS:,}) and the Reflector at {d.REFLECTOR_ACTIVATION_TOKENS:,} "
          "tokens of notes.")
    print(f"So that they run on it, the demo agent gets LOWERED thresholds (only in this demo), in {path}:")
    print(json.dumps(DEMO_CONFIG, indent=2))


def background(demo) -> None:
    demo.heading("Observer (buffered increments, then activation), Reflector, Consolidator")
    demo.mem.wait_idle()
    print("(demo thresholds: observer 400 tokens, buffering every 100; reflector 60 tokens of notes; see above)")
    demo.sql(
        "SELECT seq, type, first_seq, last_seq, buffered, input_tokens AS tokens_in, output_tokens AS tokens_out, "
        "through_seq, unobserved_tokens FROM events WHERE agent = '" + demo.agent + "' AND type IN "
        "('ObservationsRecorded', 'ObservationsActivated', 'Reflected') ORDER BY seq"
    )
    print(f"\n$ engram observations --agent {demo.agent}")
    _, rows = demo.query(
        "SELECT scope_id, messages, message_tokens, notes, note_tokens, round(observation_compression, 1), active_notes, "
        "buffered_notes, reflected_notes, reflections, round(reflection_compression, 1), file FROM observation_logs "
        "WHERE agent = ?", [demo.agent])
    print_rows(["discussion", "messages", "tokens", "notes", "note_tokens", "compression", "active", "buffered",
                "reflected", "reflections", "reflection_compression", "file"], rows)
    log = demo.mem.observation_log(demo.agent, demo.discussion)
    if log.markdown:
        print(f"\n{log.path}:")
        lines = log.markdown.rstrip("\n").splitlines()
        print("\n".join(lines[:28] + (["…"] if len(lines) > 28 else [])))

    print("\nA reflection: the notes it consumed became long-term traces (source type observation/reflection):")
    demo.sql(
        "SELECT t.trace_type, t.source_type, round(t.importance, 2) AS importance, t.source_message_ids AS messages, "
        "left(t.content, 70) AS content FROM memory_traces t WHERE t.agent = '" + demo.agent + "' AND t.source_type IN "
        "('observation', 'reflection') ORDER BY t.last_seq LIMIT 5"
    )
    print("...or, where a note restates a trace auto-ingest already made of the same message, verified that trace "
          "instead of storing a copy:")
    demo.sql(
        "SELECT t.trace_id, t.source_type, t.verification_count AS verified, left(t.content, 70) AS content "
        "FROM (SELECT DISTINCT unnest(restated_trace_ids) AS trace_id FROM reflections WHERE agent = '" + demo.agent
        + "') r JOIN memory_traces t USING (trace_id) ORDER BY t.encoded_at LIMIT 5"
    )
    demo.sql("SELECT winner, loser, resolution, note FROM ev_conflict_resolved WHERE agent = '" + demo.agent + "'")

    print(f"\nConsolidation: one run per hour of event time (clock ticks), five steps each.\n$ engram consolidations --agent {demo.agent} --limit 6")
    _, rows = demo.query(
        "SELECT strftime(ts, '%Y-%m-%d %H:%M'), traces, pruned, edges, schemas, conflicts, reinforced, round(duration_ms, 2) "
        "FROM ev_consolidation_ran WHERE agent = ? AND pruned + edges + schemas + conflicts + reinforced > 0 "
        "ORDER BY seq LIMIT 6", [demo.agent])
    print_rows(["tick", "traces", "pruned", "edges", "schemas", "conflicts", "reinforced", "ms"], rows)
    _, totals = demo.query(
        "SELECT count(*), sum(pruned), sum(edges), sum(schemas), sum(conflicts), sum(reinforced) FROM ev_consolidation_ran "
        "WHERE agent = ?", [demo.agent])
    n, pruned, edges, schemas, conflicts, reinforced = totals[0]
    print(f"{n} runs in all: {pruned} traces pruned (strength < {d.PRUNE_STRENGTH}), {edges} co-activation edges, "
          f"{schemas} schemas, {conflicts} conflicts resolved, {reinforced} spaced-repetition reviews")
    demo.notes.append(f"ENGRAM_HOME={demo.home} .venv/bin/engram observations --agent {demo.agent} --discussion {demo.discussion}")
    demo.notes.append(f"ENGRAM_HOME={demo.home} .venv/bin/engram consolidations --agent {demo.agent}")
