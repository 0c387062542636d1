"""The offline provider: a labelled, deterministic heuristic for every memory task."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from engram.config.agent import Personality
from engram.events.background import ObservationNote
from engram.kernel.tokens import estimate_tokens
from engram.providers.llm import inputs as i
from engram.providers.llm.offline.entities import extract
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.offline.sentiment import pad
from engram.providers.llm.types import ChatLine

MONDAY = 1_683_554_160_000_000  # 2023-05-08 13:56 UTC
CHAT = [
    ("Caroline", "Hey Mel! Good to see you! How have you been?"),
    ("Melanie", "Hey Caroline! Good to see you! I'm swamped with the kids and work. What's up with you?"),
    ("Caroline", "I went to an LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "Wow, that's cool, Caroline! What happened that was so awesome?"),
    ("Caroline", "The transgender stories were so inspiring! I was so happy and thankful for all the support."),
    ("Melanie", "That's really cool. Sounds like a great group."),
    ("Caroline", "I'm going to continue my education and check out career options in counseling."),
    ("Melanie", "You'd be a great counselor! Your empathy will help a lot of people."),
    ("Caroline", "Thanks, Mel! I'll call the admissions office next Friday."),
    ("Melanie", "By the way, I painted that lake sunrise last year. Painting helps me relax after a long day."),
    ("Caroline", "That painting is beautiful! I love the colors."),
    ("Melanie", "Thanks! I'm taking the kids swimming after this, they love the pool at Riverside Park."),
    ("Caroline", "Have fun! I have 3 kids at the shelter I volunteer with on Saturdays."),
    ("Melanie", "Actually, I meant the pool at Oakwood Park, not Riverside."),
    ("Caroline", "Talk soon, take care!"),
    ("Melanie", "Bye! See you soon!"),
]
LINES = tuple(
    ChatLine(role="user", name=who, content=text, seq=k + 1, ts_us=MONDAY, message_id=f"D1:{k + 1}")
    for k, (who, text) in enumerate(CHAT)
)
tasks = OfflineTasks()


def line(text: str, name: str = "Caroline", seq: int = 1) -> tuple[ChatLine, ...]:
    return (ChatLine(role="user", name=name, content=text, seq=seq, ts_us=MONDAY, message_id=f"m{seq}"),)


def every_task_input() -> list[i.TaskInput]:
    notes = tasks.observe(LINES).value
    return [
        i.SummarizeChunk(lines=LINES),
        i.MergeSummary(previous_summary="Caroline and Melanie talk about art.", new_memories=("Caroline went to a support group.",)),
        i.ExtractMemory(lines=LINES),
        i.Observe(lines=LINES),
        i.Reflect(notes=notes),
        i.ExtractFacts(lines=LINES[2:4]),
        i.SummarizeSchema(members=("Caroline went to the support group.", "Caroline went to the group again.")),
        i.Hyde(query="When did Caroline go to the support group?"),
        i.Compact(lines=LINES, target_tokens=60),
    ]


def test_every_task_is_labelled_as_the_offline_heuristic_never_as_a_model():
    for task_input in every_task_input():
        llm = tasks.run(task_input).llm
        assert (llm.provider, llm.model, llm.task) == ("offline", "offline-heuristic-v1", task_input.task)
        assert (llm.cost_usd, llm.error) == (0.0, None)
        assert llm.input_tokens > 0


DETERMINISM_SCRIPT = """
import hashlib, msgspec, sys
sys.path.insert(0, {tests!r})
from test_offline_tasks import every_task_input, tasks
for t in every_task_input():
    print(t.task, hashlib.sha256(msgspec.json.encode(tasks.run(t).value)).hexdigest())
"""


def test_same_inputs_give_byte_identical_outputs_even_across_processes_with_different_hash_seeds():
    here = str(__import__("pathlib").Path(__file__).parent)
    outputs = []
    for seed in ("1", "2"):
        run = subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT.format(tests=here)],
            capture_output=True, text=True, env={"PYTHONHASHSEED": seed, "PATH": ""}, check=True,
        )
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 9
    in_process = [msgspec.json.encode(tasks.run(t).value) for t in every_task_input()]
    assert in_process == [msgspec.json.encode(tasks.run(t).value) for t in every_task_input()]


def test_chunk_summary_picks_informative_sentences_within_its_budget_not_the_first_ones():
    summary = tasks.summarize_chunk(LINES, max_tokens=60).value
    assert estimate_tokens(summary) <= 60
    assert "LGBTQ support group" in summary
    assert "Good to see you" not in summary and "Hey Mel" not in summary
    assert summary.startswith("[2023-05-08] ")  # the chunk's date


def test_summary_sentences_are_rewritten_in_the_third_person():
    summary = tasks.summarize_chunk(LINES).value
    assert "Caroline went to an LGBTQ support group yesterday" in summary
    assert "(2023-05-07)" in summary  # "yesterday", resolved against the message's event time
    assert " I " not in f" {summary} "


@pytest.mark.parametrize("target", [8, 30, 120])
def test_compaction_never_exceeds_its_target_tokens(target):
    compaction = tasks.compact(LINES, target_tokens=target).value
    assert 0 < estimate_tokens(compaction.summary) <= target


def test_compaction_lists_the_messages_it_dropped_and_the_entities_it_kept():
    compaction = tasks.compact(LINES, target_tokens=40).value
    assert "D1:1" in compaction.dropped and "D1:16" in compaction.dropped  # greetings
    assert compaction.preserved_entities
    assert all(e in compaction.summary for e in compaction.preserved_entities)
    kept = {l.message_id for l in LINES} - set(compaction.dropped)
    assert kept and kept <= {l.message_id for l in LINES}


def test_entities_cover_names_places_dates_and_numbers():
    found = extract("Yesterday I moved to Boston with my 2 dogs on 8 May 2023. Dr. Evelyn Reed called.", ["Caroline"])
    kinds = {(e.text, e.kind) for e in found}
    assert {("Boston", "place"), ("Evelyn Reed", "person"), ("8 May 2023", "date"), ("2", "number")} <= kinds
    assert not any(e.text.startswith("Yesterday I") for e in found)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I'll send the tax documents to my accountant by Friday.", "commitment"),
        ("I really love hiking in the mountains with my dog Max.", "preference"),
        ("Actually, I meant that the meeting with Dr. Reed is on Tuesday, not Monday.", "correction"),
        ("I feel so stressed and anxious about the surgery.", "emotional"),
        ("What if we painted a mural of the ocean on the garage wall with the kids?", "creative"),
        ("My sister Emma moved to Boston in 2019 and works at Fidelity.", "factual"),
    ],
)
def test_observation_type_follows_lexical_cues(text, expected):
    (note,) = tasks.observe(line(text)).value
    assert note.type == expected
    assert "Caroline" in note.text and " I " not in note.text and note.confidence == 0.5


def test_referenced_time_is_resolved_against_the_message_event_time():
    (note,) = tasks.observe(line("I'll call the admissions office next Friday.")).value
    assert note.refers_to == "2023-05-19"  # the Friday of the week after Monday 2023-05-08
    assert note.observed_us == MONDAY and note.source_seqs == (1,)


def test_personality_shifts_what_the_observer_focuses_on():
    torn = line("I'm terrified and anxious, I have to finish the report.")
    neutral = tasks.observe(torn).value[0]
    emotional = tasks.observe(torn, personality=Personality(emotionality=0.9)).value[0]
    diligent = tasks.observe(torn, personality=Personality(conscientiousness=0.9)).value[0]
    assert (neutral.type, emotional.type, diligent.type) == ("commitment", "emotional", "commitment")
    assert diligent.importance > neutral.importance


def test_observations_compress_a_conversation_at_least_five_times():
    notes = tasks.observe(LINES * 20).value  # a long conversation
    observed = sum(estimate_tokens(l.content) for l in LINES) * 20
    noted = sum(estimate_tokens(n.text) for n in notes)
    assert notes and observed / noted >= 5


def test_pad_sentiment_from_the_lexicon():
    happy, sad, negated = pad("I'm thrilled and so happy!"), pad("I feel sad and lonely."), pad("I'm not happy.")
    assert happy.valence > 0.5 and happy.arousal > 0.5 and happy.intensity > 0.8  # a flashbulb candidate
    assert sad.valence < -0.5 and sad.arousal < 0
    assert negated.valence < 0


def _note(note_id: str, text: str, kind: str, t: int, confidence: float = 0.5) -> ObservationNote:
    return ObservationNote(note_id=note_id, type=kind, text=text, importance=0.6, observed_us=MONDAY + t,
                           entities=("Caroline",), source_seqs=(t,), confidence=confidence)


HIKING = (
    _note("n1", "Caroline loves hiking in the mountains.", "preference", 1),
    _note("n2", "Caroline doesn't like hiking in the mountains anymore.", "preference", 2),
)


def test_reflect_flags_a_contradiction_and_resolves_it_by_personality():
    honest = tasks.reflect(HIKING, personality=Personality(honesty=0.9)).value
    agreeable = tasks.reflect(HIKING, personality=Personality(agreeableness=0.9)).value
    (c,) = honest.contradictions
    assert (c.older, c.newer, c.reason, c.resolution, c.winner) == ("n1", "n2", "opposite polarity", "prefer_newer", "n2")
    assert honest.superseded == ("n1",)
    assert agreeable.superseded == () and all("disputed" in t.tags for t in agreeable.traces)


def test_by_default_the_more_confident_memory_wins_a_contradiction():
    sure_old = (msgspec.structs.replace(HIKING[0], confidence=0.9), HIKING[1])
    result = tasks.reflect(sure_old).value
    assert (result.contradictions[0].resolution, result.superseded) == ("prefer_confidence", ("n2",))


def test_reflect_merges_related_notes_into_one_trace_and_consumes_every_note():
    notes = (
        _note("a", "Caroline went to an LGBTQ support group.", "factual", 1),
        _note("b", "Caroline went to the LGBTQ support group again.", "factual", 2),
        _note("c", "Caroline will call the admissions office on Friday.", "commitment", 3),
    )
    r = tasks.reflect(notes).value
    assert [t.source_note_ids for t in r.traces] == [("a", "b"), ("c",)]
    assert [t.trace_type for t in r.traces] == ["semantic", "prospective"]
    assert r.consumed_note_ids == ("a", "b", "c") and r.contradictions == ()
    assert r.traces[0].confidence > 0.5  # two notes agree


def test_a_contradiction_with_an_existing_trace_supersedes_the_trace():
    from engram.providers.llm.types import TraceBrief

    old = TraceBrief(trace_id="t-1", content="Caroline has 2 dogs.", ts_us=MONDAY - 10, entities=("Caroline",))
    r = tasks.reflect((_note("n", "Caroline has 3 dogs.", "factual", 1, confidence=0.7),)).value
    assert r.superseded == ()
    r = tasks.reflect((_note("n", "Caroline has 3 dogs.", "factual", 1, confidence=0.7),), existing=(old,)).value
    assert (r.contradictions[0].older, r.contradictions[0].reason, r.superseded) == ("t-1", "different numbers", ("t-1",))


def test_facts_are_categorised_and_limited_per_turn():
    facts = tasks.extract_facts(LINES).value
    assert len(facts) == 3  # auto-ingest keeps at most three per turn
    assert [f.importance for f in facts] == sorted((f.importance for f in facts), reverse=True)
    assert all(f.importance >= 0.4 for f in facts)
    (correction,) = tasks.extract_facts(LINES[13:14]).value
    assert correction.category == "correction" and correction.message_id == "D1:14"


def test_a_speaker_telling_what_they_have_and_who_is_in_their_life_is_kept_as_a_fact():
    """Issue 12 (offline fact recall): a cue-less first-person statement needs something concrete to be worth a fact;
    the speaker's own people and things are concrete ("my husband and kids", "my art", "I've got ...")."""
    for text in ("I'm lucky to have my husband and kids; they keep me motivated.",
                 "My art is about expressing my trans experience.",
                 "I've got lots of kids' books, classics and stories from different cultures."):
        (fact,) = tasks.extract_facts(line(text, name="Melanie")).value
        assert fact.importance >= 0.4 and fact.category == "episodic", (text, fact)
    # A statement with nothing of the speaker's own in it stays below auto-ingest's threshold.
    assert not tasks.extract_facts(line("Surrounding ourselves with things that bring joy is important.")).value


def test_action_items_are_stored_only_by_a_conscientious_personality():
    turn = line("I need to renew my passport before the trip to Lisbon next month.")
    assert [f.category for f in tasks.extract_facts(turn).value] != ["action_item"]
    diligent = tasks.extract_facts(turn, personality=Personality(conscientiousness=0.9)).value
    assert [f.category for f in diligent] == ["action_item"]


def test_structured_memory_has_title_entities_key_phrases_sentiment_and_topics():
    m = tasks.extract_memory(LINES).value
    assert m.title.startswith("Caroline & Melanie: ")
    assert {"Caroline", "Melanie", "LGBTQ", "Oakwood Park"} <= set(m.entities)
    assert "lgbtq support group" in m.key_phrases
    assert m.sentiment in ("positive", "mixed") and "family" in m.topics
    assert estimate_tokens(m.summary) <= 1024


def test_rolling_summary_keeps_the_new_memory_within_its_size():
    merged = tasks.merge_summary(
        "Caroline and Melanie talked about painting and the kids.",
        ["Caroline decided to study counseling at Boston University."],
        max_tokens=40,
    ).value
    assert "Boston University" in merged and estimate_tokens(merged) <= 40


def test_hyde_turns_a_question_into_a_statement_without_inventing_an_answer():
    assert tasks.hyde("When did Caroline go to the LGBTQ support group?").value == "Caroline go to the LGBTQ support group"
    assert tasks.hyde("Caroline's favourite painting").value == "Caroline's favourite painting"


def test_schema_summary_names_the_central_member_and_what_recurs():
    text = tasks.summarize_schema(
        ["Caroline went to the support group on Monday.", "Caroline went to the support group again.", "Caroline baked bread."]
    ).value
    assert text.startswith("Caroline went to the support group") and "recurring across 3 memories" in text


def test_names_with_initials_survive_sentences_entities_and_facts():
    """Issue 12, finding 6: "Ursula K. Le Guin" was cut to "Ursula K."."""
    from engram.providers.llm.offline.entities import extract
    from engram.providers.llm.offline.provider import OfflineTasks
    from engram.providers.llm.offline.text import sentences
    from engram.providers.llm.types import ChatLine

    text = "I just finished a book by Ursula K. Le Guin and loved it. J. R. R. Tolkien is next."
    assert sentences(text) == ["I just finished a book by Ursula K. Le Guin and loved it.", "J. R. R. Tolkien is next."]
    assert [e.text for e in extract(text)] == ["Ursula K. Le Guin", "J. R. R. Tolkien"]
    facts = OfflineTasks().extract_facts([ChatLine(role="user", content=text, seq=1, ts_us=0, name="Mel", message_id="m")],
                                         importance_threshold=0.0, max_per_turn=5).value
    assert any("Ursula K. Le Guin" in f.content and "Ursula K. Le Guin" in f.entities for f in facts)


def test_the_person_addressed_is_never_made_the_speaker():
    """Issue 12, finding 6: speakers were swapped ("Melanie! This necklace is super special to Caroline" for a line
    Caroline said to Melanie), in facts from one message and in chunk summaries alike."""
    from engram.providers.llm.offline.provider import OfflineTasks
    from engram.providers.llm.types import ChatLine

    said = "Thanks, Melanie! This necklace is super special to me - a gift from my grandma in Sweden."
    lines = [ChatLine(role="user", name="Melanie", content="That necklace is gorgeous, where is it from?", seq=1, ts_us=0,
                      message_id="D1:1"),
             ChatLine(role="user", name="Caroline", content=said, seq=2, ts_us=0, message_id="D1:2"),
             ChatLine(role="user", name="Jon", content="Hey Gina, I had to shut down my bank account for the biz.", seq=3,
                      ts_us=0, message_id="D1:3")]
    tasks = OfflineTasks()
    for line in lines[1:]:  # one message at a time, as auto-ingest asks
        for fact in tasks.extract_facts([line], importance_threshold=0.0, max_per_turn=5).value:
            assert not fact.content.startswith(("Melanie", "Gina")) and line.name in fact.content, fact.content
    summary = tasks.summarize_chunk(lines).value
    assert "Melanie!" not in summary and "Gina," not in summary
    assert "special to Caroline" in summary


CHAT_WITH_A_CONSTRAINT = [
    "We just got back from Lisbon, where Joao and I spent a week with his parents in Alfama.",
    "On Tuesday we took the tram to Belem and ate pastries at the old bakery near the monastery.",
    "Joao's sister Marta showed us the new museum of art and technology on the river.",
    "By the way, I'm allergic to shellfish, so the seafood restaurants were tricky.",
    "On Saturday we drove to Sintra with Marta and her husband Pedro to see the Pena palace.",
    "Pedro told us about his new job at the bank in Porto, which starts in June.",
    "We are planning to go back in September for Marta's 40th birthday party in Cascais.",
    "I also bought two azulejo tiles for our kitchen at a small shop in the Chiado district.",
    "My boss Ana wants the quarterly report by Friday, so I worked on it on the flight home.",
    "Next month I'll start Portuguese classes at the cultural centre with my friend Leila.",
]


def test_a_stated_constraint_survives_into_the_chunk_summary_and_the_offline_answer():
    """Issue 12, finding 6: a shellfish allergy was dropped from the summary of the chunk that stated it, and the
    offline `Standard` answer to "What food should I avoid?" did not mention it."""
    from engram.providers.llm.offline.provider import OfflineTasks
    from engram.providers.llm.types import ChatLine

    lines = [ChatLine(role="user", name="Priya", content=t, seq=i, ts_us=1_714_000_000_000_000, message_id=f"m{i}")
             for i, t in enumerate(CHAT_WITH_A_CONSTRAINT, 1)]
    tasks = OfflineTasks()
    summary = tasks.summarize_chunk(lines, max_tokens=120).value
    assert "allergic to shellfish" in summary
    answer = tasks.respond([ChatLine(role="user", content="What food should I avoid?", seq=99, ts_us=0)],
                           context=[summary], max_tokens=200).value
    assert "shellfish" in answer


def test_interjections_greetings_and_contractions_are_never_named_as_entities():
    from engram.providers.llm.offline.entities import names

    speakers = ["Melanie", "Caroline"]

    def found(text):
        return [e.text for e in names(text, speakers)]

    assert found("Woohoo Melanie! That is great news.") == ["Melanie"]
    assert found("Yay Ines, congrats on the new job!") == ["Ines"]
    assert found("It'll be fun. I think It'll work, said Melanie.") == ["Melanie"]
    assert found("We're going to Paris. Don't worry, Caroline.") == ["Paris", "Caroline"]
    # Names that start a sentence stay names.
    assert found("New York is big.") == ["New York"]
    assert found("Ursula K. Le Guin wrote it.") == ["Ursula K. Le Guin"]
