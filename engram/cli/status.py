"""`engram status`: log head per shard, each consumer's position and lag, event counts by type."""

from __future__ import annotations

from engram.cli.common import client, to_json


def register(sub) -> None:
    p = sub.add_parser("status", help="log heads, consumer positions and lag, event counts")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    with client(args) as mem:
        st = mem.status()
    if args.json:
        print(to_json(st))
        return 0
    print(f"home  {st.home}   (server at {mem.url}; {st.runtime}"
          + (f"; {st.jobs_running} job(s) running" if st.jobs_running else "") + ")")
    for line in st.interrupted:
        print(f"INTERRUPTED: {line}")
    if st.embedder is not None:
        print(f"embedder  {st.embedder.serving}")
        if st.embedder.reindex_needed:
            print(f"REINDEX NEEDED: engram.json names the embedder {st.embedder.configured}; the home serves with "
                  f"the one above until `engram reindex` re-embeds:")
            for agent, n in st.embedder.to_reembed.items():
                print(f"  {agent}: {n.traces} trace(s), {n.discussion_memories} discussion memory(ies)")
    for sh in st.shards:
        print(f"shard {sh.shard}: head {sh.head}, {sh.streams} stream(s)" + (f", on {sh.node}" if sh.node else ""))
        by_node: dict[str, list[str]] = {}
        for name, node in sorted(sh.actors.items()):
            by_node.setdefault(node, []).append(name)
        for node, names in by_node.items():
            print(f"  actors on {node}: {', '.join(names)}")
        for name, pos in sorted(sh.projections.items()):
            print(f"  projection {name:<24} position {pos:<10} lag {sh.head - pos}")
        for name, pos in sorted(sh.consumers.items()):
            print(f"  consumer   {name:<24} position {pos:<10} lag {sh.head - pos}")
        if sh.projection_error:
            print(f"  projections failing: {sh.projection_error}")
        for name, err in sorted(sh.consumer_errors.items()):
            print(f"  {name} failing (retrying): {err}")
        for name, why in sorted(sh.consumers_rebuilt.items()):
            print(f"  {name} rebuilds its state from the log: {why}")
        for t, n in sh.events_by_type.items():
            print(f"  {t:<32} {n}")
        for item in sh.unfinished_forgets:
            print(f"  UNFINISHED FORGET (marker seq {item.marker_seq}, {', '.join(item.streams) or '?'}): "
                  "completed when the shard next starts")
        for item in sh.fold_failed:
            print(f"  quarantined event {item.seq} ({item.type}) for projection {item.projection}: {item.error}")
        for line in sh.recovered:
            print(f"  recovered at start: {line}")
    return 0
