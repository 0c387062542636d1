"""The facts read-your-writes is checked with (the bench and the MCP test share them): no two nearly repeat."""

import itertools

import pytest

from engram.evaluation import unique_facts


def test_no_two_facts_share_more_than_one_of_name_thing_and_place_and_each_word_is_its_own():
    facts = [unique_facts.fact(i) for i in range(unique_facts.COUNT)]
    parts = [(text, {n for n in unique_facts.NAMES if n in text}, {t for t in unique_facts.THINGS if t in text},
              {p for p in unique_facts.PLACES if p in text}) for text, _, _ in facts]
    for (_, n1, t1, p1), (_, n2, t2, p2) in itertools.combinations(parts, 2):
        assert (n1 == n2) + (t1 == t2) + (p1 == p2) <= 1
    words = [word for _, _, word in facts]
    assert len(set(words)) == len(words)
    assert all(sum(w in text for w in words) == 1 for text, _, _ in facts)
    assert all(word in question for _, question, word in facts)


def test_a_fact_beyond_the_ones_that_never_repeat_is_refused():
    with pytest.raises(ValueError, match="323 facts"):
        unique_facts.fact(unique_facts.COUNT)
