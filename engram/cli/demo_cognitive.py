"""The demo's cognitive-memory section: traces, a recall with its factor breakdown, working memory."""

from __future__ import annotations

from engram.cli.common import print_rows
from engram.cli.recall import render

HOUR_US = 3_600 * 1_000_000


def cognitive(demo) -> None:
    from datetime import datetime, timezone

    demo.heading("Cognitive memory: traces from every turn")
    demo.mem.wait_idle()
    demo.sql(
        "SELECT category, trace_type, scope, count(*) AS traces, round(avg(importance), 2) AS importance "
        f"FROM memory_traces WHERE agent = '{demo.agent}' GROUP BY ALL ORDER BY traces DESC"
    )
    _, rows = demo.query("SELECT max(epoch_us(ts)) FROM messages WHERE agent = ?", [demo.agent])
    at = datetime.fromtimestamp((rows[0][0] + HOUR_US) / 1e6, tz=timezone.utc)  # an hour after: strength and recency still count
    query = "What does Priya prefer for styling?"
    print(f'\n$ engram recall "{query}" --agent {demo.agent} --discussion {demo.discussion} --explain -k 3 --at <an hour after the last message>')
    result = demo.mem.recall(demo.agent, query, discussion=demo.discussion, limit=3, at=at)
    print(render(result, explain=True))

    demo.heading("Working memory (Baddeley slots) and working-memory.md")
    demo.mem.wait_idle()
    wm = demo.mem.working_memory(demo.agent)
    print(f"$ engram working-memory --agent {demo.agent}")
    print_rows(["rank", "tag", "activation", "content"],
               [(s["rank"], s["tag"], s["activation"], s["content"]) for s in wm.slots])
    print(f"\n{wm.path}:")
    text = wm.markdown.rstrip("\n").splitlines()
    print("\n".join(text[:24] + (["…"] if len(text) > 24 else [])))
    demo.notes.append(f'ENGRAM_HOME={demo.home} .venv/bin/engram recall "..." --agent {demo.agent} --explain')
