"""Time references resolved against the event time of their message (never the wall clock)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from engram.events.envelope import to_us
from engram.providers.llm.offline.timeref import resolve

MONDAY = 1_683_554_160_000_000  # 2023-05-08 13:56 UTC


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I went to a support group yesterday.", "2023-05-07"),
        ("Let's meet tomorrow.", "2023-05-09"),
        ("See you next Friday!", "2023-05-19"),  # the Friday of the following week
        ("This Friday we hike.", "2023-05-12"),
        ("Last Friday I painted.", "2023-05-05"),
        ("I did it on Sunday.", "2023-05-07"),  # past tense: the Sunday before
        ("We meet on Sunday.", "2023-05-14"),  # otherwise the coming one
        ("Two weeks ago we met.", "2023-04-24"),
        ("The race is in 3 days.", "2023-05-11"),
        ("It happened on 8 May, 2023.", "2023-05-08"),
        ("My birthday is May 20.", "2023-05-20"),
        ("I moved there last month.", "2023-04"),  # only as precise as the text
        ("We will go in June 2024.", "2024-06"),
        ("Last year I ran a marathon.", "2022"),
        ("She moved to Boston in 2019.", "2019"),
        ("I need to rest.", None),
    ],
)
def test_relative_and_absolute_dates_resolve_to_iso(text, expected):
    assert resolve(text, MONDAY) == expected


def test_a_day_and_month_take_the_nearest_year_even_when_a_participle_looks_like_past_tense():
    from engram.providers.llm.offline.timeref import resolve

    march_2 = to_us(datetime(2026, 3, 2, 9, 15, tzinfo=timezone.utc))
    assert resolve("I'm building an app called Acme, and it's due on March 9.", march_2) == "2026-03-09"
    assert resolve("We met on June 10 at the conference.", march_2) == "2025-06-10"
    assert resolve("The launch is on June 10.", march_2) == "2026-06-10"
    jan_3 = to_us(datetime(2026, 1, 3, tzinfo=timezone.utc))
    assert resolve("I went to Paris on December 28.", jan_3) == "2025-12-28"


def test_an_anaphoric_continuation_stays_with_its_lead_sentence():
    from engram.providers.llm.offline.analysis import joined_sentences

    assert joined_sentences("Correction: the deadline moved. It's March 12 now, not March 9. Dark mode too.") == [
        "Correction: the deadline moved. It's March 12 now, not March 9.",
        "Dark mode too.",
    ]


def _noon(y: int, m: int, d: int) -> int:
    return to_us(datetime(y, m, d, 12, tzinfo=timezone.utc))


def test_day_and_month_resolve_the_same_way_forward_as_back():
    """Issue 12, finding 6: in one chat (1 December) "June 6th" went to the past and "May 30th" to next year."""
    now = _noon(2026, 12, 1)
    assert resolve("We will see her on June 6th.", now) == "2027-06-06"
    assert resolve("I'm going to Lisbon on May 30th.", now) == "2027-05-30"
    assert resolve("I saw her on June 6th.", now) == "2026-06-06"
    assert resolve("We met on May 30th.", now) == "2026-05-30"


def test_an_adjective_in_ed_is_not_the_past_tense():
    """Issue 12, finding 6: "May 12" in a chat dated April 2024 became 2023-05-12."""
    april = _noon(2024, 4, 20)
    assert resolve("I'm so excited for May 12!", april) == "2024-05-12"
    assert resolve("I went there on May 12.", april) == "2023-05-12"
