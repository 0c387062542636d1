"""`engram compactions --discussion D [--json]`: a discussion's compaction history and its chain now."""

from __future__ import annotations

import io
import json

from engram.cli.common import client, discussion_agent, print_rows
from engram.kernel.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser(
        "compactions",
        help="show a discussion's context compactions (infinite context) and its summary chain",
        description="Every compaction of the discussion, as its transparencyLevel recorded it: compression ratio, "
        "dropped content, preserved entities, traces created, duration; then the chain that stands for the "
        "compacted turns now.",
    )
    p.add_argument("--discussion", required=True)
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    validate_discussion(args.discussion)
    with client(args) as mem:
        res = mem.compactions(discussion_agent(mem, args.discussion, args.agent), args.discussion)
    if args.json:
        print(json.dumps({"discussion": res.discussion, "compactions": res.compactions, "chain": res.chain},
                         indent=1, ensure_ascii=False, default=str))
        return 0
    if not res.compactions:
        print(f"no compactions in discussion {args.discussion} (its context has not passed the compaction threshold)")
        return 0
    print(render(res))
    return 0


def render(res) -> str:
    history, discussion = res.compactions, res.discussion
    buf = io.StringIO()
    last = history[-1]
    buf.write(
        f"compactions of discussion {discussion}: {len(history)} (window {last['window_tokens'] or '-'} tokens; "
        f"latest strategy {last['strategy']}, transparency {last['transparency']})\n"
    )
    names = ["seq", "node", "trigger", "turns", "msgs", "in", "out", "ratio", "context", "dropped", "entities",
             "traces", "ms"]
    rows = []
    for c in history:
        context = f"{c['context_tokens_before']}->{c['context_tokens_after']}" if c["context_tokens_before"] else "-"
        hidden = c["transparency"] == "none"
        rows.append((
            c["seq"], c["label"], c["trigger"], f"{c['first_turn']}-{c['last_turn']}", c["messages"], c["input_tokens"],
            c["output_tokens"], f"{c['compression_ratio']:.1f}x", context, "-" if hidden else c["dropped_count"],
            ", ".join(c["preserved_entities"][:4]) + ("…" if len(c["preserved_entities"]) > 4 else ""),
            len(c["traces_created"]), "-" if hidden else f"{c['duration_ms']:.1f}",
        ))
    print_rows(names, rows, out=buf)
    fig = res.chain
    buf.write(
        f"\nchain now: {len(fig['nodes'])} node(s), {fig['tokens']} tokens standing for {fig['covered_tokens']} tokens "
        f"of turns {fig['first_turn']}-{fig['last_turn']} ({fig['compression_ratio']}x)\n"
    )
    for line in res.tree:
        buf.write(f"  {line}\n")
    chain = sorted((c for c in history if c["in_chain"]), key=lambda c: (c["first_seq"], c["level"]))
    for c in chain:
        buf.write(f"\n{c['label']} {c['summary']}\n")
    details = [c for c in history if c["dropped"] or c["traces_created"]]
    if details:
        buf.write("\ndropped content and traces created:\n")
    for c in details:
        buf.write(f"  {c['label']} ({c['node_id']}):\n")
        for d in c["dropped_content"]:
            buf.write(f"    dropped {d['id']}: {_clip(d['text']) if d['text'] else '(a summary node)'}\n")
        for t in c["traces_created"]:
            buf.write(f"    trace created {t}\n")
    return buf.getvalue().rstrip("\n")


def _clip(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
