"""`engram chat --agent A [--discussion D]`: talk to the configured LLM with memory on (Wunderland's `chat`).

Each line you type is appended to the discussion as a user message; the reply comes from the `respond`
memory task, given the context engram would send now (engram.context.assemble: working memory as the
system prompt's memory, the compaction chain, the rolling summary and the traces recalled for your
message as memory passages, the recent turns as the conversation), and is appended too. Memory is read
as it is at that moment — recall does not wait for the memory of your latest message to be created
(auto-ingest, compaction and the other policies work in the background).

Without an API key the reply comes from the offline responder, which is not a language model and says
so: it quotes what memory recalled for your message.

In-chat commands: /memory, /recall QUERY, /summary, /help, /quit.
"""

from __future__ import annotations

import sys
import time

from engram.cli.common import config_from, open_engram
from engram.ids import validate_agent, validate_discussion

PROMPT = "you> "
REPLY = "agent> "
SYSTEM_PROMPT = (
    "You are {agent}, an assistant with long-term memory (engram). Use the memory below and the memory passages "
    "when they help; say so when you do not know."
)
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
    """One chat: appends turns, assembles the context, asks `respond`, answers the in-chat commands."""

    def __init__(self, mem, tasks, agent: str, discussion: str, *, memory: bool = True):
        from engram.home import Home, ProjectionPaths

        self.mem, self.tasks = mem, tasks
        self.agent, self.discussion, self.memory = validate_agent(agent), validate_discussion(discussion), memory
        self.home = Home(mem.config.home, mem.config.shards)
        self.paths = ProjectionPaths(self.home.projections_dir)
        _, rows = mem.sql("SELECT count(*) FROM messages WHERE discussion_id = ?", [self.discussion])
        self.count = sum(r[0] for r in rows)  # messages so far: the index of the next derived message id
        self.done = False

    # ------------------------------------------------------------------ turns

    def append(self, role: str, content: str, **metadata: str):
        from engram.client import now_us
        from engram.ingest.messages import IncomingMessage, discussion_write

        msg = IncomingMessage(role=role, content=content, ts_us=now_us(), metadata={"source": "engram chat", **metadata})
        write = discussion_write(self.agent, self.discussion, [msg], max_message_chars=self.mem.config.limits.max_message_chars,
                                 first_index=self.count)
        if write is None:
            return None
        self.mem.sync_settings(self.agent)
        appended = self.mem.append([write])[0]
        self.count += 1
        return appended.seqs[0]

    def turn(self, text: str) -> str:
        from engram.context_api import ContextMemory, build_context
        from engram.llm.types import ChatLine

        seq = self.append("user", text)
        api = ContextMemory(self.mem)
        recall = (lambda q: api.recall(self.agent, self.discussion, q, exclude_seqs=(seq,))) if self.memory else None
        # The offline responder quotes memory passages only: it keeps what recall found in the recent turns too.
        offline = getattr(self.tasks, "provider", "") == "offline"
        ctx = build_context(self.mem.sql, self.home, self.paths, self.agent, self.discussion, recall=recall, query=text,
                            skip_raw=not offline)
        lines = [ChatLine(role=t.role, content=t.content, seq=t.seq, ts_us=t.ts_us, name=t.name) for t in ctx.turns
                 if t.role in ("user", "assistant")]
        memory_block = ctx.block("working_memory").text
        system = SYSTEM_PROMPT.format(agent=self.agent) + (f"\n\n{memory_block}" if memory_block else "")
        result = self.tasks.respond(lines, system_prompt=system, context=ctx.memory_passages() if self.memory else ())
        reply = result.value.strip()
        self.append("assistant", reply, responder=f"{result.llm.provider}/{result.llm.model}")
        return reply

    def handle(self, line: str) -> str:
        text = line.strip()
        if not text:
            return ""
        if not text.startswith("/"):
            return REPLY + self.turn(text)
        command, _, rest = text.partition(" ")
        if command in ("/quit", "/exit"):
            self.done = True
            return "bye (memory keeps working in the background next time engram runs)"
        if command == "/memory":
            return self.show_memory()
        if command == "/recall":
            return self.show_recall(rest.strip())
        if command == "/summary":
            return self.show_summary()
        if command == "/help":
            return HELP
        return f"unknown command {command}\n{HELP}"

    # ------------------------------------------------------------------ commands

    def show_memory(self) -> str:
        from engram.context.hybrid import render_notes
        from engram.context_api import current_chain

        out = []
        _, slots = self.mem.sql(
            "SELECT rank, tag, round(activation, 2), content, turn, capacity FROM working_memory WHERE agent = ? ORDER BY rank",
            [self.agent],
        )
        if slots:
            out.append(f"working memory of {self.agent} ({len(slots)} of {slots[0][5]} slots, turn {slots[0][4]}):")
            out += [f"  {tag} {act:.2f} {_clip(content)}" for _, tag, act, content, _, _ in slots]
        else:
            out.append(f"working memory of {self.agent}: empty (nothing has taken focus yet)")
        notes = self.recent_notes()
        if notes:
            out.append(f"recent observations ({len(notes)} latest notes of the Observer):")
            out += ["  " + line for line in render_notes(notes).splitlines()]
        else:
            out.append("recent observations: none yet (the Observer writes notes as the conversation grows)")
        history = self.history()
        chain = current_chain(history)
        out.append(f"compaction history of {self.discussion}: {len(history)} compaction(s)"
                   + (f"; chain: {' '.join(c.label for c in chain)}" if chain else ""))
        for c in history[-HISTORY_SHOWN:]:
            figures = (f"dropped {c.dropped_count}, entities {', '.join(c.preserved_entities[:5]) or '-'}, "
                       f"traces {len(c.traces_created)}, {c.duration_ms:.0f} ms") if c.transparency != "none" else "(transparency none)"
            out.append(f"  {c.label} {c.strategy} {c.trigger}: {c.input_tokens} -> {c.output_tokens} tokens "
                       f"({c.compression_ratio:.1f}x), {figures}")
        return "\n".join(out)

    def recent_notes(self):
        recs = self.mem.read(self.agent, types=["ObservationsRecorded"], limit=None)
        notes = [n for r in recs if r.stream in (self.discussion, f"agent:{self.agent}") for n in r.event.notes]
        return sorted(notes, key=lambda n: (n.observed_us, n.note_id))[-RECENT_NOTES:]

    def history(self):
        from engram.context_api import compaction_history

        return compaction_history(self.mem.sql, self.discussion)

    def show_recall(self, query: str) -> str:
        from engram.cognition import CognitiveMemory

        if not query:
            return "usage: /recall QUERY"
        result = CognitiveMemory(self.mem).recall(self.agent, query, discussion=self.discussion)
        if not result.hits:
            return f'recall "{query}": nothing in memory yet'
        lines = [f'recall "{query}": {len(result.hits)} of {result.candidates} candidates']
        lines += [f"{h.rank:>2}. {h.score:.3f}  {_clip(h.content, 160)}" for h in result.hits]
        return "\n".join(lines)

    def show_summary(self) -> str:
        from engram.context_api import chain_tree, current_chain
        from engram.discussion.files import SUMMARY_SUFFIX, read_summary

        out = []
        summary = read_summary(self.paths.discussion_file(self.agent, self.discussion, SUMMARY_SUFFIX))
        if summary:
            out += [f"rolling summary (through {summary['absorbed_through']}):", summary["summary"]]
        history = self.history()
        chain = current_chain(history)
        if chain:
            out.append(f"compaction chain ({sum(c.output_tokens for c in chain)} tokens for turns "
                       f"{chain[0].first_turn}-{chain[-1].last_turn}):")
            out += ["  " + line for line in chain_tree(history)]
            out += [f"{c.label} {c.summary}" for c in chain]
        if not out:
            out.append("no summary yet: the compaction chain starts when the conversation passes the compaction "
                       "threshold, and the rolling summary when a workflow writes one")
        return "\n".join(out)

    def banner(self) -> str:
        mode = "on" if self.memory else "off (--no-memory)"
        return (f"engram chat: agent {self.agent}, discussion {self.discussion} ({self.count} earlier messages), "
                f"memory {mode}\nreplies: {self.tasks.describe()}\n/help lists the commands; /quit leaves")


def _clip(text: str, n: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def run(args) -> int:
    from engram.llm.factory import make_tasks

    agent = validate_agent(args.agent)
    discussion = validate_discussion(args.discussion) if args.discussion else default_discussion(agent)
    config = config_from(args)
    print("starting engram…", flush=True)
    started = time.perf_counter()
    tasks = make_tasks(config.llm)
    with open_engram(args, config) as mem:
        mem.runtime.policies()  # memory works in the background: auto-ingest, working memory, compaction…
        session = ChatSession(mem, tasks, agent, discussion, memory=args.memory)
        print(session.banner() + f"\n(ready in {time.perf_counter() - started:.1f}s)", flush=True)
        while not session.done:
            try:
                line = input(PROMPT)
            except EOFError:
                print()
                break
            try:
                out = session.handle(line)
            except Exception as exc:  # a failed turn must not end the chat
                out = f"error: {type(exc).__name__}: {exc}"
            if out:
                print(out, flush=True)
    sys.stdout.flush()
    return 0
