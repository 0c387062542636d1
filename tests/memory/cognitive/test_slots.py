"""Subject/attribute slots of a fact (`engram.memory.cognitive.slots`): a later value of the same person's attribute is
a change of state; facts of other attributes or other people coexist."""

from __future__ import annotations

import pytest

from engram.memory.cognitive.slots import changed_state, slots


@pytest.mark.parametrize("older, newer", [
    ("User works at Acme Robotics as an engineer.", "User quit User's job at Acme Robotics, User works at Globex now."),
    ("Jon works as a banker.", "Jon lost Jon's job as a banker, so Jon is starting a dance studio."),
    ("User lives in Lisbon.", "User moved to Porto last month."),
    ("User has a dog named Rex.", "User: We adopted a second dog last week."),
    ("Maria: I have two cats.", "Maria: We have three cats now."),
])
def test_a_later_value_of_the_same_persons_attribute_is_a_change_of_state(older, newer):
    assert changed_state(older, newer)


@pytest.mark.parametrize("older, newer", [
    ("User has a dog named Rex.", "User has a cat named Io."),
    ("My sister lives in Porto.", "My brother lives in Lisbon."),
    ("User works at Acme Robotics.", "User lives in Porto."),
    ("User works at Acme Robotics.", "User works at Acme Robotics and loves it."),
    ("Caroline: I used to work at Acme.", "Caroline: I work at Globex."),
    ("User went to a concert in Lisbon.", "User moved to Porto."),
])
def test_facts_that_coexist_are_no_change(older, newer):
    assert not changed_state(older, newer)


def test_i_and_we_are_the_speaker_and_an_ended_value_is_not_also_held():
    ended, held = slots("Caroline: I quit my job at Acme, I work at Globex now.")
    assert (ended.subject, ended.attribute, ended.value, ended.holds) == ("caroline", "employer", "acme", False)
    assert (held.subject, held.value, held.holds) == ("caroline", "globex", True)
