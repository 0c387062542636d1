"""A deterministic synthetic multi-session conversation, for the background processes' tests.

`conversation(target_tokens, seed)` returns dated sessions of a user (Maya Chen) and an assistant:
facts (family, work, places, numbers), preferences, commitments with dates, corrections of earlier
facts (Ana moves from Lisbon to Porto, two cats become three), emotions and creative tangents,
between longer assistant replies. Same arguments, same messages, byte for byte; no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from engram.kernel.tokens import estimate_tokens

HOUR_US = 3_600 * 1_000_000
DAY_US = 24 * HOUR_US
START_US = 1_767_600_000 * 1_000_000  # 2026-01-05 08:00 UTC

USER = "Maya"
PEOPLE = ["Ana", "Tom", "Priya", "Jonas", "Lena", "Omar", "Grace", "Viktor"]
PLACES = ["Lisbon", "Zurich", "Kyoto", "Boston", "Vienna", "Oslo", "Denver", "Seville"]
HOBBIES = ["hiking", "pottery", "bouldering", "baking sourdough", "sailing", "birdwatching", "chess", "gardening"]
FOODS = ["cilantro", "ramen", "dark chocolate", "olives", "spicy curry", "blue cheese", "mango", "oat milk"]
PROJECTS = ["the Helix dashboard", "the billing migration", "the onboarding flow", "the data pipeline", "the mobile app"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
FEELINGS_UP = ["thrilled", "so happy", "really proud", "excited", "grateful"]
FEELINGS_DOWN = ["anxious", "exhausted", "frustrated", "sad", "overwhelmed"]


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    ts_us: int
    name: str | None
    message_id: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.content)


def _facts(r: random.Random) -> list[str]:
    p, q, place = r.choice(PEOPLE), r.choice(PEOPLE), r.choice(PLACES)
    n = r.randint(2, 9)
    return [
        f"My friend {p} moved to {place} last month and started a new job at a design studio there.",
        f"I work at Helix Labs as a data engineer, and our team has {n} people now.",
        f"My brother {q} visited {place} in {r.randint(2015, 2024)} and still talks about the food.",
        f"We finished {r.choice(PROJECTS)} yesterday after {n} weeks of work.",
        f"I met {p} at a conference in {place}; we have been working together for {n} years.",
    ]


def _preferences(r: random.Random) -> list[str]:
    return [
        f"I really love {r.choice(HOBBIES)} on weekends, it helps me relax.",
        f"I can't stand {r.choice(FOODS)}, honestly it ruins any dish for me.",
        "I prefer tea over coffee in the morning, usually green tea.",
        f"My favourite place to travel is {r.choice(PLACES)}, I always go back in spring.",
        f"I enjoy {r.choice(HOBBIES)} with {r.choice(PEOPLE)} every weekend.",
    ]


def _commitments(r: random.Random) -> list[str]:
    return [
        f"I'll send the report on {r.choice(PROJECTS)} to {r.choice(PEOPLE)} by next {r.choice(DAYS)}.",
        f"I promised {r.choice(PEOPLE)} to help with the move on {r.choice(DAYS)}.",
        f"I have to renew my passport before the trip to {r.choice(PLACES)}, the appointment is next week.",
        f"I'm going to sign up for the {r.choice(HOBBIES)} course that starts next month.",
    ]


def _emotions(r: random.Random) -> list[str]:
    return [
        f"I'm {r.choice(FEELINGS_UP)} about the promotion, I honestly cried a little when I heard!",
        f"I felt {r.choice(FEELINGS_DOWN)} before the presentation to the board, my heart was racing.",
        f"Honestly I feel {r.choice(FEELINGS_DOWN)} this week, work has been a lot.",
        f"I'm so {r.choice(FEELINGS_UP)} that {r.choice(PEOPLE)} is coming to visit, it made my whole week.",
    ]


def _creative(r: random.Random) -> list[str]:
    return [
        "What if we turned the balcony into a small garden with herbs and a tiny pond?",
        f"I'm writing a short story about a lighthouse keeper in {r.choice(PLACES)} who collects lost letters.",
        f"I have an idea for a board game about {r.choice(HOBBIES)} and island trading.",
        "I started sketching a mural for the office kitchen, lots of blues and a big whale.",
    ]


CORRECTIONS = [
    # (stated in the first session, corrected once, later): contradictions for the Reflector and the Consolidator
    ("I love living in Lisbon with my sister Ana.",
     "Correction, actually: my sister Ana and I no longer live in Lisbon, we moved to Porto."),
    ("I really love my 2 cats, Miso and Pepper.",
     "Correction: I have 3 cats now, Miso and Pepper and the kitten Tofu."),
    ("I love running in the morning before work.",
     "Correction: I no longer love running in the morning before work, I swim instead."),
]
# Where the corrections come, as a share of the sessions (all three at the start of that session).
CORRECTION_AT = 0.4

# Assistant replies: generic, no cue words of their own, so that what the user says is what gets noticed.
_REPLIES = [
    "Thank you for sharing that with me.",
    "That sounds like a lot to keep track of.",
    "It is good to hear how things are going.",
    "Let me know how it goes.",
]
_ADVICE = [
    "A short list of the next three steps can make a busy week feel lighter.",
    "Writing down the decision and the reason for it makes it easier to revisit later.",
    "Small routines tend to survive busy periods better than big plans.",
    "Sometimes the simplest version of a plan is the one that gets done.",
    "A quiet hour without notifications can do wonders for focus.",
    "Talking it through with someone you trust often makes the next step clearer.",
]


def _assistant(r: random.Random) -> str:
    parts = [r.choice(_REPLIES)] + r.sample(_ADVICE, r.randint(2, 4))
    return " ".join(parts) + " What would you like to talk about next?"


def conversation(target_tokens: int = 100_000, seed: int = 7, session_tokens: int = 8_000) -> list[list[Message]]:
    """Sessions of messages totalling at least `target_tokens` tokens, one to four days apart."""
    r = random.Random(seed)
    sessions: list[list[Message]] = []
    total = day = n = 0
    expected = max(1, -(-target_tokens // session_tokens))
    correcting = max(1, round(expected * CORRECTION_AT))
    while total < target_tokens:
        ts = START_US + day * DAY_US + r.randint(0, 3) * HOUR_US
        session: list[Message] = []
        size = 0
        # The first session states what later ones correct; a correcting session starts with its correction.
        scripted = ([early for early, _ in CORRECTIONS] if not sessions else
                    [fixed for _, fixed in CORRECTIONS] if len(sessions) == correcting else [])
        while size < session_tokens and total + size < target_tokens:
            if scripted:
                said = scripted.pop(0)
            else:
                kind = r.choices([_facts, _preferences, _commitments, _emotions, _creative], weights=[3, 2, 2, 2, 1])[0]
                said = r.choice(kind(r))
            for role, content in (("user", said), ("assistant", _assistant(r))):
                n += 1
                m = Message(role=role, content=content, ts_us=ts, name=USER if role == "user" else None,
                            message_id=f"s{len(sessions) + 1}:{n}")
                session.append(m)
                size += m.tokens
                ts += r.randint(1, 3) * 60 * 1_000_000
        sessions.append(session)
        total += size
        day += r.randint(1, 4)
    return sessions


def messages(target_tokens: int = 100_000, seed: int = 7) -> list[Message]:
    return [m for s in conversation(target_tokens, seed) for m in s]
