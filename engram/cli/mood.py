"""`engram mood set --agent A --valence V --arousal A --dominance D`, and `engram mood show --agent A`."""

from __future__ import annotations

from engram.cli.common import client, print_table
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_agent


def register(sub) -> None:
    p = sub.add_parser("mood", help="set or show an agent's PAD mood (valence, arousal, dominance in [-1, 1])")
    actions = p.add_subparsers(dest="mood_action", metavar="ACTION")
    s = actions.add_parser("set", help="record a new mood")
    s.add_argument("--agent", default="default")
    s.add_argument("--valence", type=float, required=True)
    s.add_argument("--arousal", type=float, required=True)
    s.add_argument("--dominance", type=float, required=True)
    s.add_argument("--reason", default="set from the command line")
    s.set_defaults(func=run_set)
    show = actions.add_parser("show", help="the mood history (MoodChanged events)")
    show.add_argument("--agent", default="default")
    show.set_defaults(func=run_show)
    p.set_defaults(func=missing_action)


def missing_action(args) -> int:
    raise UsageError("usage: engram mood {set,show} --agent A ...")


def run_set(args) -> int:
    validate_agent(args.agent)
    for name in ("valence", "arousal", "dominance"):
        value = getattr(args, name)
        if not -1.0 <= value <= 1.0:
            raise UsageError(f"--{name} must be within [-1, 1], got {value}")
    with client(args) as mem:
        res = mem.set_mood(args.agent, args.valence, args.arousal, args.dominance, reason=args.reason)
    print(f"mood of agent {args.agent}: valence {args.valence:+.2f}, arousal {args.arousal:+.2f}, "
          f"dominance {args.dominance:+.2f} (seq {res.seq})")
    return 0


def run_show(args) -> int:
    validate_agent(args.agent)
    with client(args) as mem:
        table = mem.mood_history(args.agent)
    if not table.rows:
        print(f"agent {args.agent} has no recorded mood (its agent.config.json baseline applies)")
        return 0
    print_table(table)
    return 0
