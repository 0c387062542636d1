"""A shard: its event log and the projections folded from it, in one process (`ShardHost`).

    host.py     the log and the fold loop (appends, reads, catching projections up, read-your-writes)
    queries.py  SQL over the shard and its status
    repair.py   replay, rebuild, verify; damage checks at start; finishing interrupted work
    moving.py   agents leaving or joining the shard (re-sharding)
    export.py   the shard as Parquet
    forget.py   forgetting: the shard's protocol and journal, and the coordination with the policy hosts
"""

from engram.shard.host import HomeNotWritable, ShardHost

__all__ = ["HomeNotWritable", "ShardHost"]
