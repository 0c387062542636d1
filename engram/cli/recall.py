"""`engram recall "query" --agent A [--discussion D] [--explain]`: cognitive recall with its factor breakdown."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from engram.cli.common import config_from, open_engram
from engram.cli.main import UsageError


def register(sub) -> None:
    p = sub.add_parser(
        "recall",
        help="recall an agent's memory traces for a query (six-factor composite)",
        description="Ranks the agent's traces by the composite of strength, similarity, recency, emotional "
        "congruence, graph activation and importance. Every recall is recorded (TraceRetrieved) and reinforces "
        "what it returns.",
    )
    p.add_argument("query")
    p.add_argument("--agent", default="default")
    p.add_argument("--discussion", help="recall in this discussion's scope (its traces and the agent-wide ones)")
    p.add_argument("-k", "--limit", type=int, help="number of results (default: memory.retrieval.defaultLimit, +2 for agreeable agents)")
    p.add_argument("--explain", action="store_true", help="show every factor, its weight and contribution, and the source messages")
    p.add_argument(
        "--weight", action="append", default=[], metavar="FACTOR=W",
        help="override a factor weight for this recall (strength, similarity, recency, emotional, activation, importance)",
    )
    hyde = p.add_mutually_exclusive_group()
    hyde.add_argument("--hyde", dest="hyde", action="store_const", const=True, help="use HyDE (default: rag.hyde.enabled)")
    hyde.add_argument("--no-hyde", dest="hyde", action="store_const", const=False)
    p.add_argument(
        "--similarity", choices=("hybrid", "embedding"),
        help="the similarity factor for this recall: embedding cosine fused with a keyword (BM25) match, or the cosine "
        "alone (default: memory.retrieval.similarity, hybrid)",
    )
    p.add_argument("--at", help="event time of the question (ISO-8601; default: now)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run, hyde=None)


def parse_weights(items: list[str]) -> dict[str, float] | None:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--weight {item!r}: expected FACTOR=NUMBER") from None
        if not sep:
            raise UsageError(f"--weight {item!r}: expected FACTOR=NUMBER")
    from engram.cognitive.scoring import DEFAULT_WEIGHTS, weights_with

    try:
        weights_with(DEFAULT_WEIGHTS, out)  # refuse unknown factors before anything starts
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return out or None


def parse_at(text: str | None) -> int | None:
    if text is None:
        return None
    from engram.events.envelope import to_us

    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--at {text!r} is not an ISO-8601 time") from None
    return to_us(ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc))


def run(args) -> int:
    from engram.cognition import CognitiveMemory

    weights = parse_weights(args.weight)
    at = parse_at(args.at)
    if args.limit is not None and args.limit <= 0:
        raise UsageError("--limit must be positive")
    config = config_from(args)
    with open_engram(args, config) as mem:
        cog = CognitiveMemory(mem)
        try:
            result = cog.recall(
                args.agent, args.query, discussion=args.discussion, limit=args.limit, weights=weights, hyde=args.hyde,
                now_us=at, similarity=args.similarity,
            )
        except Exception as exc:  # bad weights arrive from the reader actor wrapped in a RayTaskError
            cause = getattr(exc, "cause", None) or exc
            if isinstance(cause, ValueError):
                raise UsageError(str(cause)) from None
            raise
        sources = cog.source_messages(result) if (args.explain or args.json) else {}
    if args.json:
        print(json.dumps(as_json(result, sources), indent=1, ensure_ascii=False))
    else:
        print(render(result, sources, explain=args.explain))
    return 0


def as_json(result, sources) -> dict:
    return {
        "query": result.query,
        "agent": result.agent,
        "discussion": result.discussion,
        "candidates": result.candidates,
        "similarity": result.similarity,
        "weights": result.weights.as_dict(),
        "mood": {"valence": result.mood.valence, "arousal": result.mood.arousal, "dominance": result.mood.dominance},
        "hyde": None if result.hyde is None else {"text": result.hyde.text, "threshold": result.hyde.threshold, "tried": result.hyde.tried},
        "hits": [
            {
                "rank": h.rank, "trace_id": h.trace_id, "score": round(h.score, 6), "content": h.content,
                "factors": {k: round(v, 6) for k, v in h.factors.as_dict().items()},
                "similarity_parts": {"cosine": round(h.cosine, 6), "lexical": round(h.lexical, 6)},
                "contributions": {k: round(v, 6) for k, v in h.contributions.as_dict().items()},
                "trace_type": h.trace_type, "category": h.category, "scope": h.scope, "scope_id": h.scope_id,
                "via": h.via, "source_message_ids": list(h.source_message_ids),
                "sources": [
                    {"seq": s, "message_id": sources[s].message_id, "role": sources[s].role, "name": sources[s].name,
                     "ts": sources[s].ts, "content": sources[s].content}
                    for s in h.source_seqs if s in sources
                ],
            }
            for h in result.hits
        ],
    }


def render(result, sources, *, explain: bool) -> str:
    where = f"discussion {result.discussion}" if result.discussion else "all discussions"
    lines = [f'recall "{result.query}" — agent {result.agent}, {where}: {len(result.hits)} of {result.candidates} candidates']
    if explain:
        w = result.weights
        lines.append(
            "weights: " + ", ".join(f"{k} {v:.2f}" for k, v in w.as_dict().items())
            + f"   mood: valence {result.mood.valence:+.2f} arousal {result.mood.arousal:+.2f} dominance {result.mood.dominance:+.2f}"
        )
        lines.append(
            "similarity: hybrid = ½ embedding cosine + ½ keyword (BM25) match" if result.similarity == "hybrid"
            else "similarity: embedding cosine"
        )
        if result.hyde is not None:
            lines.append(
                f'HyDE: "{result.hyde.text[:100]}" — threshold {result.hyde.threshold} '
                f"(tried {', '.join(str(t) for t in result.hyde.tried)}), {len(result.hyde.hits)} hit(s)"
            )
    if not result.hits:
        lines.append("(no traces)")
    for h in result.hits:
        lines.append(f"{h.rank:>2}. {h.score:.3f}  {h.content}")
        lines.append(f"      {h.trace_type}/{h.category or '-'} · {h.scope} {h.scope_id} · {h.trace_id} · via {h.via}")
        if explain:
            lines.append("      factor       value   × weight = contribution")
            for name, value in h.factors.as_dict().items():
                weight = getattr(result.weights, name)
                parts = f"   (cosine {h.cosine:.3f}, keywords {h.lexical:.3f})" if name == "similarity" and result.similarity == "hybrid" else ""
                lines.append(f"      {name:<11} {value:6.3f}   × {weight:4.2f}   = {getattr(h.contributions, name):.4f}{parts}")
            for s in h.source_seqs:
                m = sources.get(s)
                if m is not None:
                    who = f"{m.role}{' (' + m.name + ')' if m.name else ''}"
                    lines.append(f"      source: seq {s} · {m.discussion} · message {m.message_id} · {who} · {m.ts}")
                    lines.append(f"        \"{m.content[:200]}\"")
    return "\n".join(lines)
