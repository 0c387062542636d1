"""Lexical cues: which words suggest which observation type, fact category and topic.

Each pattern is a plain regular expression over the original sentence; its number of matches
is the evidence for the label. These lists are the offline heuristic's whole "understanding".
"""

from __future__ import annotations

import re

_I = r"(?:I|we)"
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|next week|the end of)"

COMMITMENT = re.compile(
    rf"\b(?:I['’]ll|I will|we['’]ll|we will|{_I}\s+(?:am|are|['’]m|['’]re)\s+going to|gonna|{_I}\s+plan(?:ned)? to|"
    rf"planning to|promise[ds]?|deadline|due (?:on|by|in|next)|by {_DAYS}|appointment|scheduled?|"
    rf"signed up|registered|booked|{_I}\s+(?:have|need) to|{_I}\s+must|remind me)\b",
    re.IGNORECASE,
)
PREFERENCE = re.compile(
    rf"\b{_I}\s+(?:really\s+|just\s+|also\s+|absolutely\s+|totally\s+|do\s+)?(?:love|like|prefer|enjoy|adore|hate|dislike)\b|"
    r"\bfavou?rite\b|\bcan['’]t stand\b|\b(?:big\s+)?fan of\b|\bpassionate about\b|\bnot a fan\b|"
    r"\b(?:don['’]t|do not|never)\s+(?:like|enjoy)\b|\bmy (?:thing|jam)\b|\bloves?\s+\w+ing\b|"
    r"\b(?:keen on|into|interested in|obsessed with)\b|\b(?:a )?(?:fun|great|good|nice) (?:way|outlet) to\b|"
    r"\bhelps? me (?:relax|unwind|stay|feel|de-?stress)\b|"
    # habits are standing preferences
    r"\b(?:every|each) (?:day|week|morning|evening|night|weekend)\b|\b(?:usually|regularly|often|always)\b",
    re.IGNORECASE,
)
CREATIVE = re.compile(
    r"\b(?:ideas?|imagine|imagining|what if|brainstorm\w*|creative|creat(?:e|ed|ing)|paint\w*|draw(?:ing|s)?|sketch\w*|"
    r"stor(?:y|ies)|poem|poetry|songs?|music|compos\w*|invent\w*|design\w*|art|artwork|crafts?|pottery|sculpt\w*|"
    r"photograph\w*|novel|writing)\b",
    re.IGNORECASE,
)
CORRECTION = re.compile(
    r"\b(?:actually|I meant|correction|to clarify|let me clarify|I was wrong|that['’]s (?:wrong|not right)|not true|"
    r"scratch that|no longer|not anymore|changed my mind|instead of|rather than|I misspoke|I mis(?:read|heard)|"
    r"sorry,? I (?:meant|said))\b|^\s*(?:no|wait),",
    re.IGNORECASE,
)
# A stated constraint: what must (not) happen, what the speaker cannot have (allergies, diets), deadlines.
CONSTRAINT = re.compile(
    r"\b(?:allerg\w*|intoleran\w*|(?:can['’]t|cannot|can not|don['’]t|do not|never|shouldn['’]t|must not|mustn['’]t)\s+"
    r"(?:eat|drink|have|take|touch|use|stand)|avoid\w*|vegetarian|vegan|gluten[- ]free|dairy[- ]free|lactose|kosher|"
    r"halal|deadline|due (?:on|by)|no later than|strictly|forbidden|not allowed)\b",
    re.IGNORECASE,
)
EMOTION_WORDS = re.compile(r"\b(?:feel|feels|felt|feeling|emotional|mood|heart|tears|cried|crying)\b", re.IGNORECASE)
GOAL = re.compile(
    r"\b(?:want(?:s|ed)? to|wanna|hop(?:e|es|ing) to|plan(?:s|ning)? to|goals?|dreams?|aim(?:ing)? to|trying to|"
    r"working (?:on|towards?)|would (?:like|love) to|I['’]d (?:like|love) to|aspire\w*|pursu\w+|"
    r"thinking (?:about|of) (?:\w+ing)|looking into|career|continue (?:my|her|his) \w+|save up|saving (?:up|for)|"
    r"(?:excited|thrilled|can['’]t wait|looking forward|determined|ready) to|up for the challenge)\b",
    re.IGNORECASE,
)
ACTION_ITEM = re.compile(
    rf"\b(?:{_I}\s+(?:need|have|got) to|must|remind(?: me)?|to-?do|don['’]t forget|remember to|deadline|due|"
    rf"by {_DAYS}|appointment|pick up|sign up|follow up|call (?:back|the|my)|book (?:a|the)|submit|renew)\b",
    re.IGNORECASE,
)
EPISODIC = re.compile(
    r"\b(?:I|we|my \w+)\s+(?:just\s+|finally\s+|recently\s+|also\s+)?"
    r"(?:went|visited|saw|met|took|had|got|made|did|tried|started|finished|attended|joined|ran|bought|found|"
    r"received|won|lost|moved|traveled|travelled|celebrated|painted|adopted|graduated|gave|came|left|chose|"
    r"wrote|began|heard|knew|told|spent|sent|built|brought|caught|taught|kept|read|sang|swam|drove|rode|"
    r"ate|flew|grew|threw|wore|\w{3,}ed)\b(?!['’]t)|"  # "I won't" is not "I won"
    r"\b(?:yesterday|last (?:week|weekend|month|year|night|\w+day)|ago|this morning)\b",
    re.IGNORECASE,
)
KNOWLEDGE = re.compile(
    r"\b(?:is an?|means|refers to|works by|consists of|did you know|apparently|it turns out|fun fact|"
    r"research (?:shows|says)|studies show|according to|the (?:best|only) way|how to|invented|founded|located|"
    r"realiz(?:e|ed|ing)|learn(?:ed|t|ing)|(?:so |really |very )?important (?:to|for) me|matters to me)\b",
    re.IGNORECASE,
)
QUESTION = re.compile(r"\?\s*$")
# The speaker talking about themselves.
FIRST_PERSON = re.compile(r"\b(?:I|I['’]m|I['’]ve|I['’]d|I['’]ll|me|my|myself|we|we['’]re|our|us)\b", re.IGNORECASE)
# Pleasantries: stripped before counting a sentence's content words (see offline.scoring.is_chitchat).
PLEASANTRY = re.compile(
    r"\b(?:good to see you|nice to (?:meet|see|hear from) you|see you(?: soon| later)?|talk (?:to you )?(?:soon|later)|"
    r"take care|thank(?:s| you)(?: so much)?|you too|same here|me too|congrat(?:s|ulations)|sounds (?:good|great|fun|amazing)|"
    r"glad to hear(?: that)?|i know,? right|how (?:are|have) you(?: been)?|what['’]s up|anything new|"
    r"that['’]s (?:great|awesome|amazing|cool|so cool|wonderful|fantastic|lovely|sweet)|keep it up|good luck|"
    r"bye|goodbye|no worries|of course|for sure)\b",
    re.IGNORECASE,
)

TOPICS: dict[str, tuple[str, ...]] = {
    "family": ("kid", "kids", "child", "children", "son", "daughter", "husband", "wife", "mom", "dad", "mother",
               "father", "family", "parent", "parents", "sister", "brother", "grandma", "grandpa", "baby"),
    "work": ("job", "work", "career", "boss", "office", "company", "colleague", "coworker", "promotion", "business",
             "interview", "client", "project", "shift", "salary"),
    "education": ("school", "class", "college", "university", "study", "studying", "degree", "course", "exam",
                  "teacher", "education", "student", "lecture", "homework", "research"),
    "art": ("paint", "painting", "art", "artist", "draw", "drawing", "music", "song", "guitar", "piano", "violin",
            "poem", "poetry", "novel", "photography", "pottery", "dance", "sculpture", "concert", "museum"),
    "health": ("health", "doctor", "hospital", "sick", "therapy", "therapist", "counseling", "mental", "exercise",
               "gym", "yoga", "diet", "sleep", "injury", "medicine", "surgery"),
    "travel": ("trip", "travel", "vacation", "holiday", "beach", "flight", "hotel", "camping", "hike", "hiking",
               "road", "abroad", "country", "city", "tour"),
    "relationships": ("friend", "friends", "friendship", "partner", "boyfriend", "girlfriend", "dating",
                      "relationship", "marriage", "wedding", "divorce", "breakup"),
    "community": ("lgbtq", "transgender", "trans", "pride", "community", "support", "group", "activism", "activist",
                  "volunteer", "volunteering", "charity", "church", "adoption", "rights"),
    "pets": ("dog", "dogs", "cat", "cats", "pet", "pets", "puppy", "kitten", "horse"),
    "food": ("cook", "cooking", "bake", "baking", "recipe", "dinner", "lunch", "breakfast", "restaurant", "food",
             "meal", "cake", "coffee"),
    "sports": ("game", "team", "soccer", "football", "basketball", "tennis", "match", "sport", "sports", "race",
               "marathon", "swim", "swimming", "running", "climbing"),
    "finance": ("money", "budget", "rent", "mortgage", "savings", "tax", "taxes", "invest", "investment", "loan",
                "debt", "price", "bank"),
    "technology": ("app", "code", "coding", "software", "computer", "phone", "website", "programming", "laptop",
                   "internet", "online", "robot", "tech"),
    "nature": ("nature", "garden", "gardening", "park", "mountain", "mountains", "lake", "sunrise", "sunset",
               "outdoors", "forest", "ocean", "flowers", "beach"),
    "emotions": ("feel", "feeling", "happy", "sad", "stress", "stressed", "anxious", "excited", "proud", "lonely",
                 "grateful", "overwhelmed"),
}
_TOPIC_OF_WORD: dict[str, str] = {}
for _topic, _words in TOPICS.items():
    for _w in _words:
        _TOPIC_OF_WORD.setdefault(_w, _topic)


def topic_of(word: str) -> str | None:
    return _TOPIC_OF_WORD.get(word)


# Every cue a sentence is analysed for, by the name the heuristics use.
CUES: dict[str, re.Pattern] = {
    "commitment": COMMITMENT,
    "preference": PREFERENCE,
    "creative": CREATIVE,
    "correction": CORRECTION,
    "constraint": CONSTRAINT,
    "emotion_words": EMOTION_WORDS,
    "goal": GOAL,
    "action_item": ACTION_ITEM,
    "episodic": EPISODIC,
    "knowledge": KNOWLEDGE,
}

# Speed: a cue's regular expression runs only on sentences holding one of its trigger keys, a
# word every alternative of the expression needs. Keys are lower-case words, five-letter prefixes
# of longer words ("paint" for "painting"), and "*ed" for any word ending in -ed. Regular
# expressions cost microseconds per sentence; a set lookup costs nanoseconds, and most sentences
# hold no cue at all. tests/providers/llm/test_offline_cues.py checks that the gates never hide a match.
PAST_TENSE_KEY = "*ed"
_DAY_KEYS = "monday tuesday wednesday thursday friday saturday sunday tomorrow tonight next end"
TRIGGERS: dict[str, frozenset[str]] = {
    name: frozenset(words.split())
    for name, words in {
        "commitment": "i'll will we'll going gonna plan planne plann promi deadl due by appoi sched signed regis booked "
        "have need must remind",
        "preference": "love loves like prefer enjoy adore hate dislike favor favou can't fan passi thing jam keen into "
        "inter obses fun great good nice helps help every each usual regul often always",
        "creative": "idea ideas imagi what brain creat paint draw drawi draws sketc story stori poem poetr song songs music "
        "compo inven desig art artwo craft crafts potte sculp photo novel writi",
        "correction": "actua meant corre clari wrong true scrat longer anymo chang inste rather missp misre mishe sorry no wait "
        "right",
        "constraint": "aller allergic allergy intol can't cannot can don't do never shoul must mustn avoid avoid avoid "
        "veget vegan glute dairy lacto kosher halal deadl due later stric forbi not",
        "emotion_words": "feel feels felt feeli emoti mood heart tears cried cryin",
        "goal": "want wants wanted wanna hope hopes hopin plan plans plann goal goals dream dreams aim aimin tryin worki "
        "would i'd aspir pursu think looki caree conti save savin excit thril can't forwa deter ready up",
        "action_item": f"need have got must remind to-do todo forget remem deadl due by {_DAY_KEYS} appoi pick sign follow "
        "call book submit renew",
        "episodic": "went visit visite saw met took had got made did tried start start finis atten joined ran bought found "
        "recei won lost moved trave celeb paint adopt gradu gave came left chose wrote began heard knew told spent "
        "sent built brought broug caught taught kept read sang swam drove rode ate flew grew threw wore "
        "yesterday yeste last ago morni *ed",
        "knowledge": "is means refers works consi know appar turns fact resea studi accor way how inven found locat "
        "reali learn important impor matters",
    }.items()
}


_PARTS = re.compile(r"[-'’]")


def sentence_keys(words: list[str]) -> frozenset[str]:
    """The trigger keys of a sentence's lower-cased words ("hand-painted" and "art's" count their parts too)."""
    keys = set(words)
    for word in words:
        if _PARTS.search(word):
            keys.update(p for p in _PARTS.split(word) if p)
    for w in list(keys):
        if len(w) > 5:
            keys.add(w[:5])
        if w.endswith("ed"):
            keys.add(PAST_TENSE_KEY)
    return frozenset(keys)


def count(pattern: re.Pattern, text: str) -> int:
    return len(pattern.findall(text))


def count_cues(text: str, keys: frozenset[str]) -> dict[str, int]:
    """Matches of every cue in `text`, running only the expressions whose triggers occur."""
    return {name: (count(pattern, text) if not TRIGGERS[name].isdisjoint(keys) else 0) for name, pattern in CUES.items()}
