"""`engram search "a;b;c" --discussion ID`: VectorMemorySearch over `<id>_vector_memory.db`.

A pure reader: it opens the store file read-only and embeds the query in this process (for the
semantic and hybrid modes); nothing else is started.
"""

from __future__ import annotations

import json
import sys
import time

from engram.cli.common import config_from
from engram.cli.discussion_support import projection_paths, reader_agent
from engram.cli.main import UsageError
from engram.config import defaults as d
from engram.discussion import search as vsearch
from engram.discussion.runtime import MemoryFiles


def register(sub) -> None:
    p = sub.add_parser("search", help="search a discussion's vector memory (VectorMemorySearch)")
    p.add_argument("keywords", metavar="KEYWORDS", help='keywords separated by ";" (OR logic, at most 60)')
    p.add_argument("--discussion", required=True, metavar="ID")
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the files)")
    p.add_argument("--mode", choices=vsearch.MODES, default=vsearch.DEFAULT_MODE, help="default: hybrid")
    p.add_argument("--limit", type=int, default=d.VECTOR_SEARCH_LIMIT, help=f"results (default {d.VECTOR_SEARCH_LIMIT})")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    config = config_from(args)
    agent = reader_agent(config, args.discussion, args.agent)
    files = MemoryFiles(projection_paths(config), agent, config.embedder)
    started = time.perf_counter()
    try:
        result = vsearch.search(
            files.open_store(args.discussion), args.keywords, discussion=args.discussion, limit=args.limit,
            mode=args.mode, embed=files.embed, embedding_model=None if args.mode == "keyword" else files.embedding_model,
        )
    except vsearch.SearchError as exc:
        raise UsageError(str(exc)) from None
    ms = (time.perf_counter() - started) * 1000
    if args.json:
        print(json.dumps({**result.as_dict(), "ms": round(ms, 2)}, ensure_ascii=False, indent=1))
        return 0
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not result.hits:
        print(result.reason)
        return 0
    print(f"{len(result.hits)} result(s) for {'; '.join(result.keywords)} ({result.mode}, {ms:.1f} ms)")
    for h in result.hits:
        m = h.memory
        ranks = ", ".join(x for x in (f"keyword #{h.keyword_rank}" if h.keyword_rank else "",
                                       f"semantic #{h.semantic_rank}" if h.semantic_rank else "") if x)
        print(f"\n{h.rank}. {m.title}  [{m.memory_id}; score {h.score:.4f}{'; ' + ranks if ranks else ''}]")
        print(f"   messages {m.message_ids[0]} .. {m.message_ids[-1]} ({len(m.message_ids)}), seq {m.first_seq}-{m.last_seq}")
        print(f"   {m.summary}")
        if m.entities:
            print(f"   entities: {', '.join(m.entities)}")
    return 0
