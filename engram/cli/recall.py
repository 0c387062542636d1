"""`engram recall "query" --agent A [--discussion D] [--explain]`: cognitive recall with its factor breakdown."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from engram.api.types import MAX_RESULTS as MAX
from engram.cli.common import client, count, to_json
from engram.cli.errors import UsageError

FACTORS = ("strength", "similarity", "recency", "emotional", "activation", "importance")


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
    p.add_argument("-k", "--limit", type=count(MAX), help="number of results (default: memory.retrieval.defaultLimit, +2 for agreeable agents)")
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
    p.add_argument("--as-of", dest="as_of", help="what was true at this time (ISO-8601): facts valid then, superseded "
                                                "since or not, none learned later (default: what is true now)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run, hyde=None)


def parse_weights(items: list[str]) -> dict[str, float] | None:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            weight = float(value)
        except ValueError:
            raise UsageError(f"--weight {item!r}: expected FACTOR=NUMBER") from None
        if not sep:
            raise UsageError(f"--weight {item!r}: expected FACTOR=NUMBER")
        name = name.strip()
        if name not in FACTORS:
            raise UsageError(f"--weight {item!r}: unknown factor {name!r}; the factors are {', '.join(FACTORS)}")
        if not 0 <= weight < float("inf"):
            raise UsageError(f"--weight {item!r}: a weight is a finite number >= 0")
        out[name] = weight
    return out or None


def parse_at(text: str | None, option: str = "--at") -> datetime | None:
    if text is None:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r} is not an ISO-8601 time") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def run(args) -> int:
    from engram.kernel.ids import validate_agent, validate_discussion

    validate_agent(args.agent)
    if args.discussion:
        validate_discussion(args.discussion)
    weights = parse_weights(args.weight)
    at = parse_at(args.at)
    as_of = parse_at(args.as_of, "--as-of")
    if not args.query.strip():
        raise UsageError("the query is empty")
    with client(args) as mem:
        result = mem.recall(args.agent, args.query, discussion=args.discussion, limit=args.limit, weights=weights,
                            hyde=args.hyde, similarity=args.similarity, at=at, sources=args.explain or args.json,
                            **({"as_of": as_of} if as_of is not None else {}))
    if args.json:
        doc = json.loads(to_json(result))
        for h in doc["hits"]:
            h.pop("source_seqs", None)
        print(json.dumps(doc, indent=1, ensure_ascii=False))
    else:
        print(render(result, explain=args.explain))
    return 0


def render(result, *, explain: bool) -> str:
    where = f"discussion {result.discussion}" if result.discussion else "all discussions"
    fb = getattr(result, "feedback", None)
    lines = [f'recall "{result.query}" — agent {result.agent}, {where}: {len(result.hits)} of {result.candidates} candidates']
    if explain:
        lines.append(
            "weights: " + ", ".join(f"{k} {v:.2f}" for k, v in result.weights.items())
            + f"   mood: valence {result.mood.valence:+.2f} arousal {result.mood.arousal:+.2f} dominance {result.mood.dominance:+.2f}"
        )
        share = getattr(result, "keyword_share", 0.0)
        lines.append(
            f"similarity: hybrid = {1 - share:.2f} · embedding cosine + {share:.2f} · keyword (BM25) match" if share > 0
            else "similarity: embedding cosine"
        )
        if result.focus and result.focus != result.query:
            lines.append(f'query embedded as: "{result.focus}" (words most memories hold left out)')
        if fb is not None and fb.share > 0:
            lines.append(
                f"feedback: similarity = {1 - fb.share:.2f} · to the query + {fb.share:.2f} · to the feedback query "
                f"(the query + the stored vectors of the {len(fb.traces)} best first hits; "
                f"added terms, searched by keywords: {', '.join(fb.terms) or '-'})"
            )
        if result.hyde is not None:
            lines.append(
                f'HyDE: "{result.hyde.text[:100]}" — threshold {result.hyde.threshold} '
                f"(tried {', '.join(str(t) for t in result.hyde.tried)}), {result.hyde.hits} hit(s)"
            )
    if not result.hits:
        lines.append("(no traces)")
    for h in result.hits:
        lines.append(f"{h.rank:>2}. {h.score:.3f}  {h.content}")
        lines.append(f"      {h.trace_type}/{h.category or '-'} · {h.scope} {h.scope_id} · {h.trace_id} · via {h.via}")
        if getattr(h, "valid_to", None):
            lines.append(f"      superseded at {h.valid_to} by {h.superseded_by} (true from {h.valid_from})")
        elif getattr(h, "pruned_at", None):
            lines.append(f"      dormant: pruned by decay at {h.pruned_at}, found again through its source message(s); "
                         f"contributions × {h.dormant_weight:.2f}")
        if explain:
            lines.append("      factor       value   × weight = contribution")
            for name, value in h.factors.items():
                weight = result.weights[name]
                parts = ""
                if name == "similarity":
                    sp = h.similarity_parts
                    bits = [f"cosine {sp['cosine']:.3f}"] + ([f"keywords {sp['lexical']:.3f}"] if result.similarity == "hybrid" else [])
                    if fb is not None and fb.share > 0:
                        bits.append(f"feedback {sp.get('feedback', 0.0):.3f}")
                    parts = f"   ({', '.join(bits)})"
                dw = getattr(h, "dormant_weight", 1.0)
                times = f" × {dw:.2f}" if dw != 1.0 else ""
                lines.append(f"      {name:<11} {value:6.3f}   × {weight:4.2f}{times}   = {h.contributions[name]:.4f}{parts}")
            for m in h.sources:
                who = f"{m.role}{' (' + m.name + ')' if m.name else ''}"
                lines.append(f"      source: seq {m.seq} · {m.discussion} · message {m.message_id} · {who} · {m.ts}")
                lines.append(f"        \"{m.content[:200]}\"")
    return "\n".join(lines)
