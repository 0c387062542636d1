"""`engram keys add --agents a,b` / `list` / `revoke ID`: the home's API keys (stored hashed in <home>/keys.json).

With no key the server serves loopback only; once a key exists every request needs one (the CLI uses the
server's instance token, so commands keep working). A running server sees a change at its next request.
"""

from __future__ import annotations

from engram.cli.common import home_of
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("keys", help="API keys: each key may touch the agents it names")
    keys = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    add = keys.add_parser("add", help="make a key (printed once) for some agents ('*': every agent, an admin key)")
    add.add_argument("--agents", required=True, help="comma-separated agent ids, or '*'")
    add.set_defaults(func=run_add)
    ls = keys.add_parser("list", help="the keys by id, with their agents (never the keys themselves)")
    ls.set_defaults(func=run_list)
    rv = keys.add_parser("revoke", help="revoke a key by its id")
    rv.add_argument("id")
    rv.set_defaults(func=run_revoke)


def _keys():
    from engram.server import keys

    return keys


def run_add(args) -> int:
    k = _keys()
    home = home_of(args)
    try:
        key, stored = k.add_key(home, k.parse_agents(args.agents))
    except k.KeyError_ as exc:
        raise UsageError(str(exc)) from None
    print(key)
    print(f"key {stored.id} for agents {', '.join(stored.agents)}: shown once, stored hashed in {k.keys_path(home)}")
    return 0


def run_list(args) -> int:
    k = _keys()
    try:
        stored = k.load_keys(home_of(args))
    except k.KeyError_ as exc:
        raise UsageError(str(exc)) from None
    if not stored:
        print("no API keys: the server serves loopback only, and every request may touch every agent")
        return 0
    print(f"{'id':<10} {'created':<21} agents")
    for s in stored:
        print(f"{s.id:<10} {s.created:<21} {', '.join(s.agents)}")
    return 0


def run_revoke(args) -> int:
    k = _keys()
    home = home_of(args)
    try:
        gone = k.revoke_key(home, args.id)
    except k.KeyError_ as exc:
        raise UsageError(str(exc)) from None
    left = len(k.load_keys(home))
    print(f"revoked key {gone.id} (agents {', '.join(gone.agents)})"
          + ("" if left else "; no key is left: the server answers loopback requests without a key"))
    return 0
