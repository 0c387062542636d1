"""Working memory (Baddeley): a few capacity-limited slots of traces in focus.

- Capacity 7, +1 for openness > 0.6, −1 for conscientiousness > 0.6, within 5–9
  (`personality.working_memory_capacity`).
- A trace takes focus when it is encoded or retrieved: it enters at activation 0.8, or gains 0.2
  if it is already in focus (a rehearsal). At capacity the weakest slot is evicted to make room.
- Every turn each slot loses 0.1; a slot that falls below 0.15 is evicted.
- In a prompt, slots are tagged [ACTIVE] (> 0.7), [fading] (> 0.4) or [weak].

Activations are rounded to 6 decimals so that tags do not depend on float noise (0.8 − 0.1 is 0.7).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from engram.config import defaults as d
from engram.events.cognitive import Eviction, Slot
from engram.kernel.tokens import estimate_tokens


def _r(x: float) -> float:
    return round(x, 6)


@dataclass
class _SlotState:
    trace_id: str
    activation: float
    content: str
    entered_turn: int
    rehearsals: int = 0

    def frozen(self) -> Slot:
        return Slot(
            trace_id=self.trace_id,
            activation=self.activation,
            content=self.content,
            entered_turn=self.entered_turn,
            rehearsals=self.rehearsals,
        )


class FocusedSlot(msgspec.Struct, frozen=True, kw_only=True):
    """A slot in focus as the `working_memory` table shows it (its one declaration: the table, its rows and the
    column lists that read it derive from it, `engram.kernel.records`): the slot of `WorkingMemoryUpdated`, where it
    ranks, its prompt tag, and the turn, capacity and event (`as_of_seq`) of the working memory it is in."""

    agent: str
    rank: int  # 1 = the most active
    trace_id: str
    activation: float
    tag: str  # how the prompt block marks it (`tag`)
    content: str
    entered_turn: int
    rehearsals: int
    turn: int
    capacity: int
    as_of_seq: int

    def slot(self) -> Slot:
        return Slot(trace_id=self.trace_id, activation=self.activation, content=self.content,
                    entered_turn=self.entered_turn, rehearsals=self.rehearsals)


class WorkingMemory:
    def __init__(self, capacity: int = d.WORKING_MEMORY_SLOTS):
        self.capacity = capacity
        self.turn = 0
        self._slots: dict[str, _SlotState] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, trace_id: str) -> bool:
        return trace_id in self._slots

    def slots(self) -> tuple[Slot, ...]:
        """Strongest first (ties: the later entry first, then by id)."""
        ordered = sorted(self._slots.values(), key=lambda s: (-s.activation, -s.entered_turn, s.trace_id))
        return tuple(s.frozen() for s in ordered)

    def tick(self) -> list[Eviction]:
        """A new turn: every slot decays; those below the floor are evicted."""
        self.turn += 1
        evicted = []
        for s in sorted(self._slots.values(), key=lambda s: s.trace_id):
            s.activation = _r(max(0.0, s.activation - d.WM_DECAY_PER_TURN))
            if s.activation < d.WM_EVICTION_FLOOR:
                del self._slots[s.trace_id]
                evicted.append(Eviction(trace_id=s.trace_id, reason="decayed"))
        return evicted

    def focus(self, trace_id: str, content: str, at_turn: int | None = None) -> list[Eviction]:
        """`trace_id` takes focus (enters, or is rehearsed if already in a slot).

        `at_turn`: the turn the focus belongs to, when it is learned later (a trace extracted from an
        earlier message arrives after newer messages): it enters with the decay of the turns since,
        and not at all if that leaves it below the floor.
        """
        late = max(0, self.turn - at_turn) if at_turn is not None else 0
        s = self._slots.get(trace_id)
        if s is not None:
            s.activation = _r(min(1.0, max(s.activation, s.activation + d.WM_REFOCUS_BOOST - late * d.WM_DECAY_PER_TURN)))
            s.rehearsals += 1
            return []
        activation = _r(d.WM_INITIAL_ACTIVATION - late * d.WM_DECAY_PER_TURN)
        if activation < d.WM_EVICTION_FLOOR:
            return []
        evicted = []
        if len(self._slots) >= self.capacity:
            weakest = min(self._slots.values(), key=lambda s: (s.activation, s.entered_turn, s.trace_id))
            if weakest.activation > activation:
                return []  # weaker than everything in focus: it never makes it in
            evicted = self._make_room(self.capacity - 1)
        self._slots[trace_id] = _SlotState(trace_id, activation, content, self.turn - late)
        return evicted

    def rewrite(self, trace_id: str, content: str) -> bool:
        """A trace in focus was edited: its slot shows the new text (its activation stays). Whether it was in focus."""
        slot = self._slots.get(trace_id)
        if slot is None:
            return False
        slot.content = content
        return True

    def drop(self, trace_id: str, reason: str) -> Eviction | None:
        if self._slots.pop(trace_id, None) is None:
            return None
        return Eviction(trace_id=trace_id, reason=reason)

    def set_capacity(self, capacity: int) -> list[Eviction]:
        self.capacity = capacity
        return self._make_room(capacity)

    def _make_room(self, keep: int) -> list[Eviction]:
        evicted = []
        while len(self._slots) > max(0, keep):
            weakest = min(self._slots.values(), key=lambda s: (s.activation, s.entered_turn, s.trace_id))
            del self._slots[weakest.trace_id]
            evicted.append(Eviction(trace_id=weakest.trace_id, reason="capacity"))
        return evicted

    def restore(self, slots: tuple[Slot, ...], turn: int, capacity: int) -> None:
        """Take the state a `WorkingMemoryUpdated` event describes."""
        self.turn, self.capacity = turn, capacity
        self._slots = {
            s.trace_id: _SlotState(s.trace_id, s.activation, s.content, s.entered_turn, s.rehearsals) for s in slots
        }


def tag(activation: float) -> str:
    if activation > d.WM_ACTIVE_ABOVE:
        return "[ACTIVE]"
    if activation > d.WM_FADING_ABOVE:
        return "[fading]"
    return "[weak]"


def prompt_block(slots: tuple[Slot, ...]) -> str:
    """The slots as they are injected into a prompt, strongest first."""
    return "\n".join(f"- {tag(s.activation)} {s.content} (activation {s.activation:.2f})" for s in slots)


# The persistent markdown memory an agent starts with (the agent or user replaces it).
DEFAULT_NOTES = """## User Profile
- **Name**:
- **Preferences**:

## Current Context
- **Active Topics**:
- **Recent Requests**:

## Notes
"""


NAME_LINE = "- **Name**:"


def with_profile_name(notes: str, name: str) -> str:
    """The starting notes with the user's stated name in the profile (the template's empty Name line filled)."""
    lines = notes.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(NAME_LINE):
            lines[i] = f"{NAME_LINE} {name}".rstrip() + "\n"
            return "".join(lines)
    return notes


def budget_tokens(context_window_tokens: int, share: float = d.WORKING_MEMORY_FILE_BUDGET) -> int:
    """The working-memory file's budget: 5% of the context window."""
    return int(context_window_tokens * share)


def fit_notes(markdown: str, budget: int) -> tuple[str, bool]:
    """`markdown` cut (at a line boundary where possible) to fit `budget` tokens; (text, truncated)."""
    if estimate_tokens(markdown) <= budget:
        return markdown, False
    lines, out = markdown.splitlines(keepends=True), list[str]()
    for line in lines:
        if estimate_tokens("".join(out) + line) > budget:
            break
        out.append(line)
    text = "".join(out)
    if not text:  # a single line longer than the budget
        text = markdown[: budget * 4]
    return text, True


def render_file(
    *,
    agent: str,
    slots: tuple[Slot, ...],
    notes: str,
    key_memories: list[str],
    budget: int,
    capacity: int,
    turn: int,
    as_of_seq: int,
    as_of: str,
) -> str:
    """`working-memory.md`: the slots in focus, the agent's persistent notes, then key memories while they fit.

    The header says which event (seq) the file reflects, so replaying it again changes nothing.
    """
    head = (
        f"# Working Memory\n\n"
        f"<!-- engram: agent {agent}, as of seq {as_of_seq} ({as_of}), turn {turn}, "
        f"{len(slots)}/{capacity} slots, budget {budget} tokens (5% of the context window) -->\n\n"
        f"## In Focus\n"
    )
    body = prompt_block(slots) + "\n" if slots else "- (nothing in focus)\n"
    text = head + body + "\n" + notes.rstrip("\n") + "\n"
    if estimate_tokens(text) > budget:
        room = max(0, budget - estimate_tokens(head + body + "\n"))
        cut, _ = fit_notes(notes, room)
        return head + body + "\n" + cut.rstrip("\n") + "\n"
    if key_memories:
        section = "\n## Key Memories\n"
        if estimate_tokens(text + section) < budget:
            text += section
            for m in key_memories:
                line = f"- {m}\n"
                if estimate_tokens(text + line) > budget:
                    break
                text += line
    return text
