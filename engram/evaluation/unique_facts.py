"""Facts no other fact nearly repeats, for read-your-writes checks: a write of fact `i` then a read asking about it
finds it only if the read saw the write (`bench/serve.py` measures that; tests/server/test_mcp_read_your_writes.py
holds MCP to it).

    fact(i) -> (text, question, word)      for 0 <= i < COUNT

Any two facts share at most one of name, thing and place (17, 19 and 23 are coprime, so the triple repeats only
after COUNT facts), which a memory would otherwise merge as near-duplicates (auto-ingest's cosine >= 0.85), and
each has a word no other has (`zq0042vex`), which a read's hits either contain or not.
"""

from __future__ import annotations

NAMES = ("Ines", "Marco", "Yuki", "Ahmed", "Olga", "Pedro", "Chen", "Fatima", "Lars", "Amara", "Tomasz", "Priya",
         "Kofi", "Elena", "Raj", "Sofia", "Hiro")
THINGS = ("passport", "violin", "bicycle", "telescope", "sourdough starter", "chess set", "kayak", "typewriter",
          "herb garden", "vinyl records", "drone", "sewing machine", "aquarium", "snowboard", "espresso machine",
          "oil paintings", "beehive", "rowing boat", "camera")
PLACES = ("Lisbon", "Oslo", "Nairobi", "Kyoto", "Lima", "Krakow", "Montreal", "Hanoi", "Dublin", "Tunis", "Perth",
          "Bergen", "Quito", "Seville", "Tallinn", "Osaka", "Accra", "Porto", "Tbilisi", "Cusco", "Zagreb", "Cork",
          "Malmo")
SHAPES = ("{name} keeps the {thing} in a storage unit in {place}, tagged {word}.",
          "Last spring {name} sold the {thing} to a collector from {place}; the receipt says {word}.",
          "The {thing} that {name} repaired came from a flea market in {place} (lot {word}).",
          "{name} is shipping the {thing} to {place} next month under booking {word}.",
          "In {place}, {name} borrowed a {thing} from a neighbour, who wrote {word} on it.",
          "{name}'s insurance for the {thing} lists {place} as its home, policy {word}.",
          "A friend in {place} gave {name} the {thing} as a wedding gift, engraved {word}.",
          "{name} rents out the {thing} to tourists in {place}; the listing is {word}.",
          "The {thing} {name} lost on the train to {place} was found with tag {word}.",
          "{name} won the {thing} in a raffle in {place}, ticket number {word}.",
          "Before moving to {place}, {name} stored the {thing} with code {word}.",
          "{name} and her brother built the {thing} together in {place}; they call it {word}.",
          "The museum in {place} asked {name} to lend them the {thing}, reference {word}.")
# How many facts keep the promise: name, thing and place step through 17, 19 and 23 values (17 * 19 = 323 before
# a name and a thing meet again).
COUNT = len(NAMES) * len(THINGS)


def fact(i: int) -> tuple[str, str, str]:
    """Fact `i`: its text, the question naming it, and the word only it has."""
    if not 0 <= i < COUNT:
        raise ValueError(f"fact {i}: there are {COUNT} facts that never nearly repeat (0..{COUNT - 1})")
    word = f"zq{i:04d}vex"
    name, thing, place = NAMES[i % 17], THINGS[(7 * i) % 19], PLACES[(11 * i) % 23]
    text = SHAPES[i % 13].format(name=name, thing=thing, place=place, word=word)
    return text, f"What about {name}'s {thing} and {place}, {word}?", word
