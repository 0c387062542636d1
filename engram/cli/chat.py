"""`engram chat --agent A [--discussion D]`: talk to the configured LLM with memory on (Wunderland's `chat`).

Each line you type is one chat turn of the home's server: your message is appended to the discussion,
the reply comes from the `respond` memory task given the context engram would send now (working memory,
the compaction chain, the rolling summary and the traces recalled for your message, the recent turns),
and is appended too. Memory is created behind the chat (auto-ingest, compaction and the other policies
work in the background).

Without an API key the reply comes from the offline responder, which is not a language model and says
so: it quotes what memory recalled for your message.

In-chat commands: /memory, /recall QUERY, /summary, /help, /quit.
"""

from __future__ import annotations

import sys
import time

from engram.cli.common import client
from engram.kernel.ids import validate_agent, validate_discussion

PROMPT = "you> "
REPLY = "agent> "
HELP = """commands:
  /memory        working memory, recent observations, compaction history
  /recall QUERY  recall memory traces for QUERY (six-factor composite)
  /summary       rolling summary and the compaction chain
  /help          this list
  /quit          leave (memory keeps working next time)"""
RECENT_NOTES = 10
HISTORY_SHOWN = 5


def register(sub) -> None:
    p = sub.add_parser("chat", help="chat with an agent, memory on (in-chat: /memory /recall /summary /quit)")
    p.add_argument("--agent", default="default")
    p.add_argument("--discussion", help="the discussion to continue or start (default: chat-<agent>)")
    p.add_argument("--no-memory", dest="memory", action="store_false",
                   help="reply without recalled memories (messages are still recorded)")
    p.set_defaults(func=run)


def default_discussion(agent: str) -> str:
    return validate_discussion(f"chat-{agent}")


class ChatSession:
    """One chat over a client: turns go to the server; in-chat commands read memory through it."""

    def __init__(self, mem, agent: str, discussion: str, *, memory: bool = True):
        self.mem, self.agent, self.discussion, self.memory = mem, validate_agent(agent), validate_discussion(discussion), memory
        self.info = mem.chat_info(self.agent, self.discussion)
        self.done = False

    def turn(self, text: str) -> str:
        return self.mem.chat(self.agent, self.discussion, text, memory=self.memory).reply

    def handle(self, line: str) -> str:
        text = line.strip()
        if not text:
            return ""
        if not text.startswith("/"):
            return REPLY + self.turn(text)
        command, _, rest = text.partition(" ")
        if command in ("/quit", "/exit"):
            self.done = True
            return "bye (memory keeps working in the background)"
        if command == "/memory":
            return self.show_memory()
        if command == "/recall":
            return self.show_recall(rest.strip())
        if command == "/summary":
            return self.show_summary()
        if command == "/help":
            return HELP
        return f"unknown command {command}\n{HELP}"

    def _known(self) -> bool:
        """The discussion has events (the agent's memory can be read)."""
        from engram.api.errors import ApiError

        try:
            self.mem.discussion(self.discussion)
            return True
        except ApiError:
            return False

    def show_memory(self) -> str:
        """The agent's working memory (the agent's, whichever discussion this is), then what this discussion has:
        recent observations and compactions."""
        from engram.api.errors import ApiError

        try:
            wm = self.mem.working_memory(self.agent)
        except ApiError as exc:
            if exc.code != "unknown_agent":
                raise
            return f"nothing in memory yet for {self.agent} (say something first)"
        out = []
        if wm.slots:
            first = wm.slots[0]
            out.append(f"working memory of {self.agent} ({len(wm.slots)} of {first['capacity']} slots, turn {first['turn']}):")
            out += [f"  {s['tag']} {s['activation']:.2f} {_clip(s['content'])}" for s in wm.slots]
        else:
            out.append(f"working memory of {self.agent}: empty (nothing has taken focus yet)")
        if not self._known():
            out.append(f"discussion {self.discussion}: no messages yet (observations and compactions come as you talk)")
            return "\n".join(out)
        recent = self.mem.recent_observations(self.agent, self.discussion, limit=RECENT_NOTES)
        if recent.notes:
            out.append(f"recent observations ({recent.notes} latest notes of the Observer):")
            out += ["  " + line for line in recent.markdown.splitlines()]
        else:
            out.append("recent observations: none yet (the Observer writes notes as the conversation grows)")
        comp = self.mem.compactions(self.agent, self.discussion)
        history = comp.compactions
        chain = [c for c in history if c["in_chain"]]
        out.append(f"compaction history of {self.discussion}: {len(history)} compaction(s)"
                   + (f"; chain: {' '.join(c['label'] for c in chain)}" if chain else ""))
        for c in history[-HISTORY_SHOWN:]:
            figures = (f"dropped {c['dropped_count']}, entities {', '.join(c['preserved_entities'][:5]) or '-'}, "
                       f"traces {len(c['traces_created'])}, {c['duration_ms']:.0f} ms") if c["transparency"] != "none" \
                else "(transparency none)"
            out.append(f"  {c['label']} {c['strategy']} {c['trigger']}: {c['input_tokens']} -> {c['output_tokens']} tokens "
                       f"({c['compression_ratio']:.1f}x), {figures}")
        return "\n".join(out)

    def show_recall(self, query: str) -> str:
        if not query:
            return "usage: /recall QUERY"
        if not self._known():
            return f'recall "{query}": nothing in memory yet'
        result = self.mem.recall(self.agent, query, discussion=self.discussion, sources=False)
        if not result.hits:
            return f'recall "{query}": nothing in memory yet'
        lines = [f'recall "{query}": {len(result.hits)} of {result.candidates} candidates']
        lines += [f"{h.rank:>2}. {h.score:.3f}  {_clip(h.content, 160)}" for h in result.hits]
        return "\n".join(lines)

    def show_summary(self) -> str:
        if not self._known():
            return "no summary yet: say something first"
        out = []
        summary = self.mem.summary(self.agent, self.discussion).summary
        if summary:
            out += [f"rolling summary (through {summary.absorbed_through}):", summary.summary]
        comp = self.mem.compactions(self.agent, self.discussion)
        chain = sorted((c for c in comp.compactions if c["in_chain"]), key=lambda c: (c["first_seq"], c["level"]))
        if chain:
            out.append(f"compaction chain ({sum(c['output_tokens'] for c in chain)} tokens for turns "
                       f"{chain[0]['first_turn']}-{chain[-1]['last_turn']}):")
            out += ["  " + line for line in comp.tree]
            out += [f"{c['label']} {c['summary']}" for c in chain]
        if not out:
            out.append("no summary yet: the compaction chain starts when the conversation passes the compaction "
                       "threshold, and the rolling summary when a workflow writes one")
        return "\n".join(out)

    def banner(self) -> str:
        mode = "on" if self.memory else "off (--no-memory)"
        return (f"engram chat: agent {self.agent}, discussion {self.discussion} ({self.info.messages} earlier messages), "
                f"memory {mode}\nreplies: {self.info.responder}\n/help lists the commands; /quit leaves")


def _clip(text: str, n: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def run(args) -> int:
    from engram.api.errors import ApiError

    agent = validate_agent(args.agent)
    discussion = validate_discussion(args.discussion) if args.discussion else default_discussion(agent)
    started = time.perf_counter()
    with client(args) as mem:
        session = ChatSession(mem, agent, discussion, memory=args.memory)
        print(session.banner() + f"\n(ready in {time.perf_counter() - started:.1f}s)", flush=True)
        while not session.done:
            try:
                line = input(PROMPT)
            except EOFError:
                print()
                break
            try:
                out = session.handle(line)
            except ApiError as exc:  # a failed turn must not end the chat
                out = f"error: {exc.message}"
            if out:
                print(out, flush=True)
    sys.stdout.flush()
    return 0
