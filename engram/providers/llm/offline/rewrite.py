"""First person to third person ("I love painting" -> "Melanie loves painting"), and trimming of filler.

Notes and facts are read later without the conversation around them, so "I" must become a name.
This is a surface rewrite with a small verb table, not a parser; unknown verbs stay as they are.
"""

from __future__ import annotations

import re

# Contractions and auxiliaries after "I", in their third-person form.
_AUX = {
    "i'm": "is", "i am": "is", "i've": "has", "i have": "has", "i'll": "will", "i'd": "would",
    "i was": "was", "i do": "does", "i don't": "doesn't", "i didn't": "didn't", "i can't": "can't",
    "i can": "can", "i will": "will", "i would": "would", "i could": "could", "i should": "should",
    "i might": "might", "i must": "must", "i haven't": "hasn't", "i wasn't": "wasn't", "i won't": "won't",
    "im": "is", "ive": "has",
}
# Present-tense verbs that take an -s (or an irregular form) after a third-person subject.
_VERBS_S = {
    "go": "goes", "do": "does", "have": "has", "try": "tries", "study": "studies", "carry": "carries",
    "worry": "worries", "cry": "cries", "fly": "flies", "enjoy": "enjoys", "play": "plays", "say": "says",
    "stay": "stays", "pray": "prays", "watch": "watches", "teach": "teaches", "miss": "misses", "wish": "wishes",
    "relax": "relaxes", "fix": "fixes", "push": "pushes", "finish": "finishes", "reach": "reaches",
}
_REGULAR_VERBS = frozenset(
    """love like want need think feel hope plan work live prefer hate know believe remember agree guess mean
    wonder run paint write read draw cook bake sing dance swim hike volunteer visit take make keep use find
    get see hear own drive ride collect admire appreciate support care imagine dream prefer adore dislike
    struggle manage help learn teach start lead attend join bring call meet spend listen look seem""".split()
)
_I_AUX = re.compile(r"\b(?:I['’]m|I am|I['’]ve|I have|I['’]ll|I['’]d|I was|I do|I don['’]t|I didn['’]t|I can['’]t|I can|"
                    r"I will|I would|I could|I should|I might|I must|I haven['’]t|I wasn['’]t|I won['’]t)\b")
_I_VERB = re.compile(r"\bI\s+(?:(really|also|just|still|totally|definitely|absolutely|always|usually|often|never|sometimes)\s+)?([a-z]+)\b")
_I = re.compile(r"\bI\b")
_MY = re.compile(r"(?<![-'’])\b(?:my|My)\b(?![-'’])")
_ME = re.compile(r"(?<![-'’])\b(?:me|myself|mine)\b(?![-'’])")  # not inside "me-time"
# Leading interjections and pleasantries that carry nothing worth remembering.
# Pure interjections go whatever follows; praise words only when punctuation ends them ("Great!", not "Great idea").
_FILLER = re.compile(
    r"^(?:(?:hey|hi|hello|wow|whoa|woah|yay|ooh|oh|ah|aw+|haha|lol|omg|hmm|um|uh|yeah|yep|yes|no|nope|ok|okay|well|so|anyway|"
    r"by the way|btw)\b[\s,!.…-]*"
    r"|(?:thanks|thank you|sure|cool|great|awesome|nice|amazing|totally|absolutely|right)\s*[,!.…-]+\s*)+",
    re.IGNORECASE,
)


def _third_person(verb: str) -> str:
    if verb in _VERBS_S:
        return _VERBS_S[verb]
    if verb in _REGULAR_VERBS:
        return verb + "s"
    return verb


def to_third_person(sentence: str, speaker: str) -> str:
    """`sentence` with the speaker's "I/my/me" replaced by the speaker's name."""
    possessive = f"{speaker}'s"

    def aux(m: re.Match) -> str:
        key = m.group(0).lower().replace("’", "'")
        return f"{speaker} {_AUX[key]}"

    out = _I_AUX.sub(aux, sentence)

    def verb(m: re.Match) -> str:
        adverb, v = m.group(1), m.group(2)
        return f"{speaker} {adverb + ' ' if adverb else ''}{_third_person(v)}"

    out = _I_VERB.sub(verb, out)
    # Replacement callables: a name is text, never a regex template.
    out = _I.sub(lambda m: speaker, out)
    out = _MY.sub(lambda m: possessive, out)
    out = _ME.sub(lambda m: speaker, out)
    return out


_VOCATIVE = re.compile(r"([A-Z][a-z]+)\s*[,!]+\s+")
_NOT_VOCATIVE = frozenset(
    "i so but and or then now today yesterday tomorrow also still honestly seriously anyway however sometimes "
    "monday tuesday wednesday thursday friday saturday sunday first second finally plus".split()
)


def trim_filler(sentence: str, addressees: tuple[str, ...] = ()) -> str:
    """`sentence` without leading interjections ("Wow, thanks! I ..." -> "I ...") and without a leading vocative
    naming someone else in the conversation ("Thanks, Melanie! This necklace ..." -> "This necklace ..."): read
    later, "Melanie! This necklace is special to Caroline" would make the person addressed look like the speaker.
    Capitalised."""
    out = _FILLER.sub("", sentence).strip()
    for _ in range(2):
        for name in addressees:
            m = re.match(rf"{re.escape(name)}\s*[,!.…-]+\s*", out, re.IGNORECASE)
            if m and m.end() < len(out):
                out = _FILLER.sub("", out[m.end():]).strip()
        # With nobody else known (one message alone), a lone capitalised word opening the sentence before a
        # comma or "!" is taken for a vocative too ("Gina, you won't believe it").
        m = _VOCATIVE.match(out)
        if m and m.end() < len(out) and m.group(1).lower() not in _NOT_VOCATIVE:
            out = _FILLER.sub("", out[m.end():]).strip()
    if not out:
        return ""
    return out[0].upper() + out[1:]
