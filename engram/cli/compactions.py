"""`engram compactions --discussion D [--json]`: a discussion's compaction history and its chain now."""

from __future__ import annotations

import json

from engram.cli.common import print_rows
from engram.cli.traces import run_sql
from engram.context_api import chain_tree, compaction_history, current_chain
from engram.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser(
        "compactions",
        help="show a discussion's context compactions (infinite context) and its summary chain",
        description="Every compaction of the discussion, as its transparencyLevel recorded it: compression ratio, "
        "dropped content, preserved entities, traces created, duration; then the chain that stands for the "
        "compacted turns now.",
    )
    p.add_argument("--discussion", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    validate_discussion(args.discussion)
    history = compaction_history(lambda q, params: run_sql(args, q, params), args.discussion)
    dropped_text = _dropped_text(args, history)
    if args.json:
        print(json.dumps(as_json(args.discussion, history, dropped_text), indent=1, ensure_ascii=False, default=str))
        return 0
    if not history:
        print(f"no compactions in discussion {args.discussion} (its context has not passed the compaction threshold)")
        return 0
    print(render(args.discussion, history, dropped_text))
    return 0


def _dropped_text(args, history) -> dict[str, str]:
    """Dropped message ids -> their text, from the log (dropped content is never lost)."""
    ids = sorted({d for c in history for d in c.dropped})
    if not ids:
        return {}
    _, rows = run_sql(
        args, "SELECT message_id, content FROM messages WHERE discussion_id = ? AND message_id IN (SELECT unnest(?))",
        [args.discussion, ids],
    )
    return dict(rows)


def chain_figures(history) -> dict:
    chain = current_chain(history)
    tokens = sum(c.output_tokens for c in chain)
    covered = sum(c.covered_tokens for c in chain)
    return {
        "nodes": [c.node_id for c in chain],
        "tokens": tokens,
        "covered_tokens": covered,
        "first_turn": chain[0].first_turn if chain else None,
        "last_turn": chain[-1].last_turn if chain else None,
        "compression_ratio": round(covered / tokens, 2) if tokens else 0.0,
    }


def as_json(discussion: str, history, dropped_text: dict[str, str]) -> dict:
    out = []
    for c in history:
        d = c.as_dict()
        d["dropped_content"] = [{"id": x, "text": dropped_text.get(x)} for x in c.dropped]
        out.append(d)
    return {"discussion": discussion, "compactions": out, "chain": chain_figures(history)}


def render(discussion: str, history, dropped_text: dict[str, str]) -> str:
    import io

    buf = io.StringIO()
    last = history[-1]
    buf.write(
        f"compactions of discussion {discussion}: {len(history)} (window {last.window_tokens or '-'} tokens; "
        f"latest strategy {last.strategy}, transparency {last.transparency})\n"
    )
    names = ["seq", "node", "trigger", "turns", "msgs", "in", "out", "ratio", "context", "dropped", "entities",
             "traces", "ms"]
    rows = []
    for c in history:
        context = f"{c.context_tokens_before}->{c.context_tokens_after}" if c.context_tokens_before else "-"
        rows.append((
            c.seq, c.label, c.trigger, f"{c.first_turn}-{c.last_turn}", c.messages, c.input_tokens, c.output_tokens,
            f"{c.compression_ratio:.1f}x", context, c.dropped_count if c.transparency != "none" else "-",
            ", ".join(c.preserved_entities[:4]) + ("…" if len(c.preserved_entities) > 4 else ""),
            len(c.traces_created), f"{c.duration_ms:.1f}" if c.transparency != "none" else "-",
        ))
    print_rows(names, rows, out=buf)
    fig = chain_figures(history)
    buf.write(
        f"\nchain now: {len(fig['nodes'])} node(s), {fig['tokens']} tokens standing for {fig['covered_tokens']} tokens "
        f"of turns {fig['first_turn']}-{fig['last_turn']} ({fig['compression_ratio']}x)\n"
    )
    for line in chain_tree(history):
        buf.write(f"  {line}\n")
    for c in current_chain(history):
        buf.write(f"\n{c.label} {c.summary}\n")
    details = [c for c in history if c.dropped or c.traces_created]
    if details:
        buf.write("\ndropped content and traces created:\n")
    for c in details:
        buf.write(f"  {c.label} ({c.node_id}):\n")
        for x in c.dropped:
            text = dropped_text.get(x)
            buf.write(f"    dropped {x}: {_clip(text) if text else '(a summary node)'}\n")
        for t in c.traces_created:
            buf.write(f"    trace created {t}\n")
    return buf.getvalue().rstrip("\n")


def _clip(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
