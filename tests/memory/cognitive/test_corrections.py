"""The lexical contradiction rule (`engram.memory.cognitive.corrections`): what it finds, and that a text's own
readings are worked out once, however many pairs the text is compared in (consolidation compares a new trace with
every active trace naming its entities)."""

from __future__ import annotations

from engram.memory.cognitive import corrections
from engram.memory.cognitive.corrections import contradiction, polarity, reads_as_correction
from tests.memory.cognitive.helpers import T0, trace


def test_a_texts_correction_reading_and_polarity_are_worked_out_once_however_many_pairs_it_is_in():
    newer = trace("new", content="Caroline: actually I no longer live in Lisbon, I live in Porto",
                  entities=("Caroline", "Lisbon"), at=T0 + 10)
    olders = [trace(f"old{i}", content=f"Caroline: I live in Lisbon with {i} cats", entities=("Caroline", "Lisbon"))
              for i in range(30)]
    reads_as_correction.cache_clear()
    polarity.cache_clear()
    reasons = [contradiction(o, newer) for o in olders]
    assert reasons == ["correction"] * 30  # what the rule finds, as the uncached rule did
    assert reads_as_correction.cache_info().misses == 1 and reads_as_correction.cache_info().hits == 29
    # Cached answers are the rule's: the pattern searched afresh gives the same.
    for text in ("I actually moved", "I live in Lisbon", "Lisbon, not Porto", "no longer there", "I love it"):
        assert reads_as_correction(text) == (corrections._CORRECTION.search(text) is not None)
    assert polarity("Caroline loves hiking") == 1 and polarity("Caroline doesn't like hiking") == -1
    assert polarity("Caroline hates hiking") == -1 and polarity("Caroline went hiking") == 0
