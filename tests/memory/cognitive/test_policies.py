"""The cognitive policies as plain classes (no Ray): what they decide from the events they read."""

from __future__ import annotations

import json

import pytest
from tests.memory.cognitive.helpers import T0, rec

from engram.config.agent import AgentConfig
from engram.config.home import Home
from engram.config.recorded import SCOPE_AGENT
from engram.config.service import ServiceConfig
from engram.events.cognitive import FactsIngested, MoodChanged, TraceEncoded, TraceRetrieved, WorkingMemoryUpdated
from engram.events.control import SettingsChanged
from engram.events.messages import MessageAppended, ToolCallFailed
from engram.memory.cognitive.personality import Pad
from engram.memory.settings import settings_event
from engram.policies.auto_ingest import AutoIngest
from engram.policies.base import PolicyContext
from engram.policies.mood import MoodTracker, tracked
from engram.policies.tool_failures import ToolFailureLearner
from engram.policies.working_memory import WorkingMemoryPolicy

MINUTE_US = 60 * 1_000_000


@pytest.fixture(scope="module")
def services():
    from engram.providers.embeddings import make_embedder
    from engram.providers.llm.factory import make_tasks

    config = ServiceConfig()
    return {"config": config, "tasks": make_tasks(config.llm), "embedder": make_embedder(config.embedder)}


def ctx(services, tmp_path) -> PolicyContext:
    return PolicyContext(shard=0, home=Home(tmp_path), services=services)


def settings(seq: int, **personality) -> object:
    cfg = AgentConfig.model_validate({"personality": personality})
    return rec(settings_event(SCOPE_AGENT, "agent.config.json", cfg), seq=seq, stream="agent:a")


def message(seq: int, content: str, role: str = "user", name: str | None = "Priya", stream: str = "d"):
    return rec(
        MessageAppended(role=role, content=content, message_id=f"m{seq}", token_estimate=len(content) // 4, name=name),
        seq=seq, ts_us=T0 + seq * MINUTE_US, stream=stream,
    )


def _decisions(writes):
    import msgspec

    return [
        (w.stream, e.event_id, e.ts_us, msgspec.structs.replace(e.event, llm=None) if hasattr(e.event, "llm") else e.event)
        for w in writes
        for e in w.events
    ]


def events_of(writes, kind):
    return [e.event for w in writes for e in w.events if isinstance(e.event, kind)]


def test_auto_ingest_keeps_facts_and_the_message_with_provenance_and_decides_the_same_way_twice(services, tmp_path):
    batch = [
        settings(1),
        message(2, "I'm building a Next.js app called Acme Dashboard with Supabase auth, due on March 9."),
        message(3, "I prefer TypeScript everywhere and I really dislike CSS-in-JS."),
        message(4, "Sounds good. Tailwind would fit that preference.", role="assistant", name=None),
    ]
    writes = AutoIngest(ctx(services, tmp_path)).handle(batch)
    again = AutoIngest(ctx(services, tmp_path)).handle(batch)
    # Deterministic decisions and event ids (a re-run appends nothing new); only the LLM call's timing differs.
    assert _decisions(writes) == _decisions(again)
    summaries = events_of(writes, FactsIngested)
    assert [s.message_id for s in summaries][:2] == ["m2", "m3"]
    traces = events_of(writes, TraceEncoded)
    assert all(t.source_message_ids and t.source_seqs for t in traces)
    episodes = [t for t in traces if t.category == "message"]
    assert all(t.content.startswith("Priya: ") for t in episodes)  # the user's own words, with the speaker
    assert not [t for t in traces if t.source_message_ids == ("m4",) and t.category == "message"]  # no episode of the agent
    assert all(t.strength > 0 and t.stability_s in (3600.0, 18000.0) for t in traces)
    for w in writes:
        assert all(e.event_id and e.causation == w.events[0].causation for e in w.events)


def test_auto_ingest_keeps_at_most_three_facts_per_turn(services, tmp_path):
    long_turn = (
        "My sister Ana moved to Lisbon in 2021. My brother Tom works at Google in Zurich since 2019. "
        "My friend Lee opened a bakery in Boston in 2020. My cousin Sara studies medicine in Vienna since 2022. "
        "My neighbour Bob sold his car in Denver in 2018."
    )
    writes = AutoIngest(ctx(services, tmp_path)).handle([settings(1), message(2, long_turn)])
    (summary,) = events_of(writes, FactsIngested)
    facts = [t for t in events_of(writes, TraceEncoded) if t.category != "message"]
    assert 0 < len(facts) <= 3
    assert summary.max_per_turn == 3 and summary.importance_threshold == 0.4
    if len(facts) == 3:
        assert any(s.reason == "over_limit" for s in summary.skipped)


def test_mood_follows_the_conversation_only_for_an_emotional_agent(services, tmp_path):
    thrilled = message(3, "I'm thrilled and so excited, this is amazing!!")
    calm = MoodTracker(ctx(services, tmp_path)).handle([settings(1), thrilled])
    assert calm == []
    writes = MoodTracker(ctx(services, tmp_path)).handle([settings(1, emotionality=0.8), thrilled])
    (mood,) = events_of(writes, MoodChanged)
    assert mood.valence > 0 and mood.reason == "sentiment of message m3"
    assert tracked(Pad(), Pad(1.0, 0.5, 0.0)) == Pad(0.2, 0.1, 0.0)


def test_tool_failure_lessons_are_learned_once_per_discussion(services, tmp_path):
    learner = ToolFailureLearner(ctx(services, tmp_path))
    fail = lambda seq, stream, error: rec(ToolCallFailed(tool="fetch", error=error), seq=seq, stream=stream)  # noqa: E731
    writes = learner.handle([
        settings(1),
        fail(2, "d", "429 Too Many Requests"),
        fail(3, "d", "rate limit exceeded"),
        fail(4, "e", "429 Too Many Requests"),
        fail(5, "d", "connection reset"),
    ])
    lessons = events_of(writes, TraceEncoded)
    assert [(w.stream, t.category) for w, t in zip(writes, lessons)] == [("d", "lesson"), ("e", "lesson")]
    assert lessons[0].trace_type == "procedural" and lessons[0].scope == "agent"
    assert "wait" in lessons[0].content.lower()


def test_working_memory_capacity_follows_personality_and_late_traces_enter_faded(services, tmp_path):
    wm = WorkingMemoryPolicy(ctx(services, tmp_path))
    enc = lambda seq, tid, cause: rec(  # noqa: E731
        TraceEncoded(trace_id=tid, content=tid, trace_type="episodic", scope="discussion", scope_id="d",
                     source_type="user_statement", source_seqs=(cause,), importance=0.5, confidence=0.8, strength=0.5,
                     stability_s=3600.0, interval_s=3600.0), seq=seq, causation=cause)
    batch = [settings(1, conscientiousness=0.9), message(2, "first"), message(3, "second"), message(4, "third"),
             enc(5, "from-first", 2), enc(6, "from-third", 4)]
    writes = wm.handle(batch)
    updates = events_of(writes, WorkingMemoryUpdated)
    assert updates[-1].capacity == 6  # 7 − 1 for conscientiousness > 0.6
    slots = {s.trace_id: s.activation for s in updates[-1].slots}
    assert slots == {"from-first": pytest.approx(0.6), "from-third": pytest.approx(0.8)}
    assert all(w.stream == "agent:a" for w in writes)


def test_an_edited_or_removed_message_takes_its_traces_out_of_working_memory_even_those_encoded_late(services, tmp_path):
    from engram.events.messages import MessageEdited, MessageRemoved

    def enc(seq, tid, cause, mids, stream="d"):
        return rec(TraceEncoded(trace_id=tid, content=f"words of {tid}", trace_type="episodic", scope="discussion",
                                scope_id=stream, source_type="user_statement", source_seqs=(cause,), importance=0.5,
                                confidence=0.8, strength=0.5, stability_s=3600.0, interval_s=3600.0,
                                source_message_ids=mids), seq=seq, causation=cause, stream=stream)

    wm = WorkingMemoryPolicy(ctx(services, tmp_path))
    batch = [message(1, "I drive a blue Volvo"), message(2, "I have a cat named Io"),
             enc(3, "blue-volvo", 1, ("m1",)), enc(4, "cat", 2, ("m2",)), enc(5, "other-d", 9, ("m1",), stream="e"),
             rec(MessageEdited(message_id="m1", role="user", content="I drive a red Volvo", token_estimate=5), seq=6),
             enc(7, "blue-volvo-late", 1, ("m1",)),  # decided from the old words before the edit, recorded after it
             enc(8, "red-volvo", 6, ("m1",)),  # made from the new words
             rec(MessageRemoved(message_id="m2"), seq=9),
             rec(TraceRetrieved(query="volvo", trace_ids=("blue-volvo", "cat", "blue-volvo-late"), scores=(0.9, 0.8, 0.7)),
                 seq=10)]
    updates = events_of(wm.handle(batch), WorkingMemoryUpdated)
    in_focus = [s.trace_id for s in updates[-1].slots]
    assert sorted(in_focus) == ["other-d", "red-volvo"]  # another discussion's message m1 is not this one
    assert [(x.trace_id, x.reason) for u in updates for x in u.evicted] == [("blue-volvo", "superseded"), ("cat", "superseded")]
    # The same log folded again decides the same slots (what replay reproduces).
    again = events_of(WorkingMemoryPolicy(ctx(services, tmp_path / "again")).handle(batch), WorkingMemoryUpdated)
    assert again == updates


def test_a_trace_costs_one_embedding_shared_by_deduplication_and_recalls_index(services, tmp_path):
    from engram.providers.embeddings import CachedEmbedder, EmbeddingCache
    from engram.policies.trace_reader import TraceReader

    embedder = CachedEmbedder(services["embedder"], EmbeddingCache(":memory:"))
    svc = {**services, "embedder": embedder}
    strict = AgentConfig.model_validate({"storage": {"autoIngest": {"importanceThreshold": 0.61}}})
    batch = [
        rec(settings_event(SCOPE_AGENT, "agent.config.json", strict), seq=1, stream="agent:a"),
        message(2, "I'm building a Next.js app called Acme Dashboard with Supabase auth, due on March 9. Nice weather."),
        message(3, "Which database sits under Supabase? Do you like it?", role="assistant", name=None),
        message(4, "Postgres, and I love it. My sister Ana moved to Lisbon in 2021."),
    ]
    policy = AutoIngest(ctx(svc, tmp_path))
    policy.handle(batch[:1])
    writes = policy.handle(batch[1:])
    traces = events_of(writes, TraceEncoded)
    skipped = [s for f in events_of(writes, FactsIngested) for s in f.skipped]
    compared = {t.content for t in traces} | {s.content for s in skipped if s.reason in ("duplicate", "over_limit")}
    # Auto-ingest embedded what it compared, and nothing it skipped before comparing.
    assert embedder.stats.texts_computed == len(compared)
    assert any(s.reason == "below_threshold" for s in skipped)
    # Recall's index (the reader, like the shard's trace projection) makes a trace's vector of its content's
    # embedding and, for a reply, its question's: the replies to one question share one more text.
    replies = {(t.context, t.content) for t in traces if t.context}
    questions = {t.context.strip() for t in traces if t.context}
    assert replies and len(replies) < len(traces)
    # Lenient settings recorded in the same batch as the turns: the facts the strict rules skipped before
    # embedding are kept now, embedded when they are compared.
    late = AutoIngest(ctx(services, tmp_path))
    late.handle(batch[:1])
    lenient = AgentConfig.model_validate({"storage": {"autoIngest": {"importanceThreshold": 0.2}}})
    more = events_of(late.handle([rec(settings_event(SCOPE_AGENT, "agent.config.json", lenient), seq=5, stream="agent:a")]
                                 + batch[1:]), TraceEncoded)
    sister = next(t for t in more if "Ana moved to Lisbon" in t.content and t.category != "message")
    vector = late.memory("a").index.vectors([sister.trace_id])[0]
    assert abs(float(vector @ vector) - 1.0) < 1e-4  # a real embedding, not a missing row
    log = [rec(e.event, seq=10 + k, ts_us=e.ts_us, stream=w.stream)
           for k, (w, e) in enumerate((w, e) for w in writes for e in w.events)]
    TraceReader(ctx(svc, tmp_path)).handle(batch[:1] + log)
    assert embedder.stats.texts_computed == len(compared) + len(questions)


def test_with_the_embedder_actor_auto_ingest_asks_per_chunk_of_turns_and_prefetches_the_reply_index_texts(
        services, tmp_path, monkeypatch):
    from engram.policies import auto_ingest

    class AsyncEmbedder:  # the RemoteEmbedder's interface: embed, and embed_async returning a waiter
        def __init__(self, inner):
            self.inner, self.name, self.dim, self.is_fallback = inner, inner.name, inner.dim, inner.is_fallback
            self.requests: list[list[str]] = []

        def embed(self, texts):
            return self.embed_async(texts)()

        def embed_async(self, texts):
            self.requests.append(list(texts))
            vectors = self.inner.embed(texts)
            return lambda: vectors

    monkeypatch.setattr(auto_ingest, "EMBED_CHUNK_TURNS", 2)
    embedder = AsyncEmbedder(services["embedder"])
    turns = [
        settings(1),
        message(2, "I'm building a Next.js app called Acme Dashboard with Supabase auth, due on March 9."),
        message(3, "Which database sits under Supabase?", role="assistant", name=None),
        message(4, "Postgres, and I love it. My sister Ana moved to Lisbon in 2021."),
        message(5, "Do you have a deadline for the launch?", role="assistant", name=None),
        message(6, "Yes, the launch is on March 12 and my brother Tom helps with testing."),
    ]
    writes = AutoIngest(ctx({**services, "embedder": embedder}, tmp_path)).handle(turns)
    plain = AutoIngest(ctx(services, tmp_path)).handle(turns)
    assert _decisions(writes) == _decisions(plain)  # the same decisions as embedding everything at once
    *per_chunk, prefetched = embedder.requests
    assert len(per_chunk) == 3  # five turns, two per request
    replies = [t for t in events_of(writes, TraceEncoded) if t.context]
    assert replies and prefetched == list(dict.fromkeys(t.context.strip() for t in replies))  # their questions


def test_the_assistant_quoting_memory_makes_no_trace_and_verifies_nothing(services, tmp_path):
    """Issue 12, finding 2: an offline reply quoting "my name is Priya and I live in Lisbon" became the trace
    "User: Hi, Assistant's name is Priya and Assistant lives in Lisbon." (source: the assistant's message)."""
    from engram.providers.llm.offline.respond import QUOTING

    said = "Hi, my name is Priya and I live in Lisbon with my partner Joao since 2021."
    quote = f"{QUOTING}\n- User: {said}"
    policy = AutoIngest(ctx(services, tmp_path))
    writes = policy.handle([settings(1), message(2, said, name=None),
                            message(3, "Where do I live?", name=None), message(4, quote, role="assistant", name=None)])
    traces = events_of(writes, TraceEncoded)
    assert traces and not [t for t in traces if t.source_message_ids == ("m4",)]
    assert not any("Assistant" in t.content for t in traces)
    # An assistant's own sentence that restates a memory is a quote too: skipped, and no verification.
    restating = message(5, "Your name is Priya and you live in Lisbon with your partner Joao since 2021.", role="assistant",
                        name=None)
    (summary,) = events_of(policy.handle([restating]), FactsIngested)
    assert summary.trace_ids == () or all(s.duplicate_of is None for s in summary.skipped)
    assert all(s.reason != "duplicate" for s in summary.skipped)


def test_a_correction_at_the_turn_supersedes_what_it_corrects(services, tmp_path):
    """Issue 12, finding 3: "I moved to Porto, not Lisbon" left the Lisbon trace active."""
    from engram.events.cognitive import ConflictResolved, EdgeAdded

    policy = AutoIngest(ctx(services, tmp_path))
    first = policy.handle([settings(1), message(2, "Hi, my name is Priya and I live in Lisbon.", name="User")])
    lisbon = {t.trace_id for t in events_of(first, TraceEncoded)}
    writes = policy.handle([message(3, "Actually I moved to Porto last month, not Lisbon.", name="User")])
    (resolved,) = events_of(writes, ConflictResolved)
    assert resolved.loser in lisbon and resolved.resolution == "prefer_confidence"  # a tie goes to the newer
    kinds = {(e.kind, e.src, e.dst) for e in events_of(writes, EdgeAdded)}
    assert ("contradicts", resolved.winner, resolved.loser) in kinds and ("supersedes", resolved.winner, resolved.loser) in kinds
    assert not policy.memory("a").book.traces[resolved.loser].active


def _said_over_time(services, tmp_path, *texts: str):
    """Auto-ingest of the user's messages, ten minutes apart: the policy's trace book after the last."""
    policy = AutoIngest(ctx(services, tmp_path))
    policy.handle([settings(1)])
    for i, text in enumerate(texts):
        policy.handle([rec(MessageAppended(role="user", content=text, message_id=f"m{i}", token_estimate=len(text) // 4,
                                           name="User"), seq=10 * (i + 1), ts_us=T0 + i * 10 * MINUTE_US)])
    return policy.memory("a").book


@pytest.mark.parametrize("before, after, old", [
    ("I work at Acme Robotics as an engineer.", "I quit my job at Acme Robotics, I work at Globex now.", "Acme"),
    ("I have a dog named Rex.", "We adopted a second dog last week.", "Rex"),
    ("I live in Lisbon with my partner.", "I moved to Porto last month.", "Lisbon"),
])
def test_a_later_state_of_the_same_persons_attribute_closes_the_old_one_when_it_is_said(services, tmp_path, before,
                                                                                           after, old):
    book = _said_over_time(services, tmp_path, before, after)
    closed = [t for t in book.traces.values() if old in t.content and t.source_message_ids == ("m0",)]
    assert closed and all(t.valid_to_us == T0 + 10 * MINUTE_US and t.superseded_by for t in closed)
    assert any(t.active and t.valid_to_us is None for t in book.traces.values() if t.source_message_ids == ("m1",))


def test_facts_that_coexist_stay_valid_a_dog_and_a_cat_a_sister_and_a_brother(services, tmp_path):
    book = _said_over_time(services, tmp_path, "I have a dog named Rex.", "I have a cat named Io.",
                           "My sister Ines lives in Porto.", "My brother Tiago lives in Lisbon.")
    facts = list(book.traces.values())  # the facts kept and the messages' own traces
    assert {m for t in facts for m in t.source_message_ids} == {"m0", "m1", "m2", "m3"}
    assert all(t.active and t.valid_to_us is None and not t.superseded_by for t in facts), [
        (t.content, t.superseded_by) for t in facts]


def test_a_model_written_reply_that_quotes_injected_memory_makes_no_trace_and_is_not_observed(services, tmp_path):
    """Issue 12, finding 2, for replies written by a model: the reply (real anthropic SDK, local fake Messages API)
    repeats the memory injected for its turn in its own words; with the injection recorded with the reply (as
    `engram chat` and the proxy record it), none of the quoted sentences becomes a trace or an observed line,
    while what the reply adds of its own is still the assistant's."""
    from engram.memory.cognitive.llm_bridge import chat_line, record_injected
    from engram.config.llm import Endpoint, LlmConfig, Preset
    from engram.providers.llm.endpoint_tasks import EndpointTasks
    from engram.providers.llm.types import ChatLine
    from tests.providers.llm.fake_messages_api import FAST_RETRIES, FakeMessagesApi

    api = FakeMessagesApi().start()
    try:
        config = LlmConfig(provider="anthropic", presets={"default": Preset(temperature=0.2, max_tokens=512)},
                           endpoints={"default": Endpoint(model="claude-sonnet-5-5", base_url=api.url, **FAST_RETRIES)})
        claude = EndpointTasks(config, env={"ANTHROPIC_API_KEY": "test-key"})
        injected = ["User: Hi, my name is Priya and I live in Lisbon with my partner Joao since 2021.",
                    "Priya is training for the Porto half marathon in October."]
        api.answer = lambda body: ("Of course! Your name is Priya and you live in Lisbon with Joao. "
                                   "You are training for the Porto half marathon in October. "
                                   "I would add hill repeats on Tuesdays to build strength.")
        result = claude.respond([ChatLine(role="user", content="What do you remember about me?", seq=3, ts_us=T0)],
                                context=injected)
    finally:
        api.stop()
    reply = result.value
    assert result.llm.provider == "anthropic" and "Lisbon" in reply
    assert any("Lisbon" in json.dumps(body) for body in api.requests)  # the memory was injected into the request
    said = message(2, injected[0][len("User: "):], name=None)
    question = message(3, "What do you remember about me?", name=None)
    answer = rec(MessageAppended(role="assistant", content=reply, message_id="m4", token_estimate=len(reply) // 4,
                                 metadata={"source": "engram chat", **record_injected(injected)}),
                 seq=4, ts_us=T0 + 4 * MINUTE_US, stream="d")
    own = chat_line(answer).content
    assert "Lisbon" not in own and "marathon" not in own and "hill repeats" in own
    traces = events_of(AutoIngest(ctx(services, tmp_path)).handle([settings(1), said, question, answer]), TraceEncoded)
    from_reply = [t for t in traces if t.source_message_ids == ("m4",)]
    assert not [t for t in from_reply if "Lisbon" in t.content or "marathon" in t.content]
    assert all(t.source_type == "agent_inference" for t in from_reply)
    # Without the record the same reply is taken whole: the rule is what keeps the quote out.
    unrecorded = rec(MessageAppended(role="assistant", content=reply, message_id="m4", token_estimate=len(reply) // 4),
                     seq=4, ts_us=T0 + 4 * MINUTE_US, stream="d")
    assert "Lisbon" in chat_line(unrecorded).content
    # The Observer watches the assistant's own words only.
    from engram.policies.observer import Observer

    observer = Observer(ctx(services, tmp_path / "observer"))
    observer.handle([settings(1), said, question, answer])
    pending = [p.line.content for b in observer.buffers.values() for p in b.pending if p.line.seq == 4]
    assert pending and all("Lisbon" not in text and "marathon" not in text for text in pending)


def test_the_assistants_statements_are_typed_by_who_said_them_not_as_user_preferences(services, tmp_path):
    """Issue 12 (left over): "Assistant: A one-week deadline is tight but doable." was typed semantic/user_preference.
    What the assistant says is what happened in the conversation (episodic); the user's own words keep their type."""
    policy = AutoIngest(ctx(services, tmp_path))
    writes = policy.handle([
        settings(1),
        message(2, "I love hiking in the Alps and I prefer early mornings.", name=None),
        message(3, "A one-week deadline is tight but doable.", role="assistant", name=None),
        message(4, "You should aim to finish the draft by Friday so you can rest.", role="assistant", name=None),
    ])
    traces = events_of(writes, TraceEncoded)
    by_assistant = [t for t in traces if t.source_message_ids in (("m3",), ("m4",))]
    assert by_assistant, [t.content for t in traces]
    assert all(t.category not in ("user_preference", "goal") for t in by_assistant)
    assert all(t.trace_type == "episodic" and t.scope == "discussion" for t in by_assistant)
    by_user = [t for t in traces if t.source_message_ids == ("m2",)]
    assert any(t.category == "user_preference" and t.trace_type == "semantic" for t in by_user)
