"""Working memory: 7±2 slots by personality, activation decay, eviction, prompt tags, the markdown file."""

from __future__ import annotations

import pytest

from engram.config.agent import Personality
from engram.kernel.tokens import estimate_tokens
from engram.memory.cognitive.personality import working_memory_capacity
from engram.memory.cognitive.working_memory import (
    DEFAULT_NOTES,
    WorkingMemory,
    budget_tokens,
    fit_notes,
    prompt_block,
    render_file,
    tag,
)


@pytest.mark.parametrize(
    "traits,slots",
    [
        ({}, 7),
        ({"openness": 0.7}, 8),
        ({"conscientiousness": 0.7}, 6),
        ({"openness": 0.7, "conscientiousness": 0.7}, 7),
        ({"openness": 0.6}, 7),  # "above 0.6" is strict
    ],
)
def test_capacity_is_seven_plus_openness_minus_conscientiousness(traits, slots):
    assert working_memory_capacity(Personality(**traits)) == slots


def test_capacity_stays_within_five_and_nine():
    assert working_memory_capacity(Personality(conscientiousness=0.9), base=5) == 5
    assert working_memory_capacity(Personality(openness=0.9), base=9) == 9


def test_activation_decays_every_turn_and_weak_slots_are_evicted():
    wm = WorkingMemory(7)
    wm.focus("t", "x")
    seen = []
    for _ in range(7):
        evicted = wm.tick()
        seen.append(wm.slots()[0].activation if len(wm) else None)
        if evicted:
            assert evicted[0].reason == "decayed"
            break
    assert seen == [0.7, 0.6, 0.5, 0.4, 0.3, 0.2, None]  # 0.1 < 0.15 → evicted on the 7th turn


def test_the_weakest_slot_makes_room_at_capacity():
    wm = WorkingMemory(5)
    for i in range(5):
        wm.focus(f"t{i}", "x")
        wm.tick()
    evicted = wm.focus("new", "x")
    assert [e.trace_id for e in evicted] == ["t0"] and evicted[0].reason == "capacity"
    assert len(wm) == 5 and "new" in wm


def test_refocusing_rehearses_a_slot():
    wm = WorkingMemory()
    wm.focus("t", "x")
    wm.tick()
    wm.focus("t", "x")
    slot = wm.slots()[0]
    assert slot.activation == pytest.approx(0.9) and slot.rehearsals == 1


def test_a_focus_learned_late_enters_with_the_decay_of_the_turns_since():
    wm = WorkingMemory()
    for _ in range(3):
        wm.tick()
    wm.focus("late", "x", at_turn=1)
    assert wm.slots()[0].activation == pytest.approx(0.6) and wm.slots()[0].entered_turn == 1
    for _ in range(10):
        wm.tick()
    assert wm.focus("ancient", "x", at_turn=1) == [] and "ancient" not in wm


def test_prompt_tags():
    assert (tag(0.8), tag(0.7), tag(0.5), tag(0.4), tag(0.2)) == ("[ACTIVE]", "[fading]", "[fading]", "[weak]", "[weak]")
    wm = WorkingMemory()
    wm.focus("t", "Priya prefers TypeScript")
    assert prompt_block(wm.slots()) == "- [ACTIVE] Priya prefers TypeScript (activation 0.80)"


def test_the_working_memory_file_stays_within_five_percent_of_the_context_window():
    budget = budget_tokens(200_000)
    assert budget == 10_000
    wm = WorkingMemory()
    wm.focus("t", "Priya prefers TypeScript")
    text = render_file(
        agent="a", slots=wm.slots(), notes=DEFAULT_NOTES, key_memories=[f"memory {i} " + "x" * 400 for i in range(200)],
        budget=budget, capacity=7, turn=3, as_of_seq=9, as_of="2026-03-02T09:17:00Z",
    )
    assert estimate_tokens(text) <= budget
    assert "as of seq 9" in text and "[ACTIVE] Priya prefers TypeScript" in text and "## Key Memories" in text
    small = render_file(agent="a", slots=(), notes="n" * 4_000, key_memories=[], budget=200, capacity=7, turn=0,
                        as_of_seq=1, as_of="x")
    assert estimate_tokens(small) <= 200 + 5  # header and slots kept, notes cut to what remains


def test_written_notes_are_cut_to_the_budget():
    text, cut = fit_notes("line\n" * 1000, 100)
    assert cut and estimate_tokens(text) <= 100
    assert fit_notes("short", 100) == ("short", False)
