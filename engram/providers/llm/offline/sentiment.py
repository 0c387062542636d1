"""A PAD (pleasure/valence, arousal, dominance) estimate from a small hand-made lexicon.

Values are in [-1, 1], set by hand in the spirit of affective norms (NRC-VAD, Warriner et al.):
a coarse signal for mood and flashbulb encoding, not a trained sentiment model.
"""

from __future__ import annotations

import msgspec

from engram.providers.llm.offline.text import normalise, words

# word -> (valence, arousal, dominance)
PAD_LEXICON: dict[str, tuple[float, float, float]] = {
    # positive, high arousal
    "excited": (0.8, 0.8, 0.4), "thrilled": (0.9, 0.8, 0.5), "amazing": (0.8, 0.6, 0.4), "awesome": (0.8, 0.6, 0.4),
    "fantastic": (0.8, 0.6, 0.4), "incredible": (0.7, 0.6, 0.3), "love": (0.9, 0.5, 0.4), "loved": (0.9, 0.5, 0.4),
    "loves": (0.9, 0.5, 0.4), "ecstatic": (0.9, 0.9, 0.5), "powerful": (0.6, 0.6, 0.7), "proud": (0.8, 0.5, 0.7),
    "inspired": (0.8, 0.6, 0.5), "inspiring": (0.8, 0.6, 0.5), "fun": (0.8, 0.6, 0.4), "wonderful": (0.9, 0.5, 0.4),
    "congrats": (0.8, 0.6, 0.4), "congratulations": (0.8, 0.6, 0.4), "passionate": (0.7, 0.7, 0.5),
    # positive, low arousal
    "happy": (0.8, 0.4, 0.5), "glad": (0.7, 0.3, 0.4), "grateful": (0.8, 0.2, 0.3), "thankful": (0.8, 0.2, 0.3),
    "calm": (0.5, -0.6, 0.3), "relaxed": (0.6, -0.6, 0.3), "peaceful": (0.6, -0.6, 0.3), "content": (0.6, -0.3, 0.4),
    "accepted": (0.6, -0.1, 0.3), "supported": (0.6, 0.0, 0.3), "safe": (0.6, -0.3, 0.4), "hopeful": (0.6, 0.2, 0.3),
    "comfortable": (0.6, -0.4, 0.4), "enjoy": (0.7, 0.3, 0.4), "enjoyed": (0.7, 0.3, 0.4), "nice": (0.6, 0.1, 0.3),
    "great": (0.7, 0.4, 0.4), "good": (0.6, 0.1, 0.3), "beautiful": (0.8, 0.3, 0.3), "lovely": (0.8, 0.2, 0.3),
    "meaningful": (0.7, 0.2, 0.4), "special": (0.7, 0.3, 0.3), "fulfilling": (0.7, 0.2, 0.4), "confident": (0.6, 0.3, 0.8),
    "brave": (0.6, 0.4, 0.7), "courage": (0.6, 0.4, 0.7), "relieved": (0.6, -0.3, 0.3), "blessed": (0.8, 0.2, 0.3),
    "cozy": (0.7, -0.5, 0.3), "like": (0.5, 0.1, 0.3), "likes": (0.5, 0.1, 0.3), "favorite": (0.7, 0.3, 0.4),
    "favourite": (0.7, 0.3, 0.4), "kind": (0.6, 0.0, 0.3), "support": (0.5, 0.1, 0.3),
    # negative, high arousal
    "angry": (-0.7, 0.8, 0.3), "furious": (-0.8, 0.9, 0.3), "mad": (-0.6, 0.7, 0.2), "frustrated": (-0.6, 0.6, -0.2),
    "frustrating": (-0.6, 0.6, -0.2), "annoyed": (-0.5, 0.5, 0.0), "stressed": (-0.6, 0.7, -0.4), "stressful": (-0.6, 0.7, -0.4),
    "anxious": (-0.6, 0.7, -0.5), "worried": (-0.5, 0.5, -0.4), "scared": (-0.7, 0.8, -0.6), "afraid": (-0.7, 0.7, -0.6),
    "terrified": (-0.8, 0.9, -0.7), "panic": (-0.7, 0.9, -0.6), "overwhelmed": (-0.5, 0.7, -0.6), "overwhelming": (-0.5, 0.7, -0.6),
    "swamped": (-0.4, 0.6, -0.4), "nervous": (-0.4, 0.7, -0.4), "hate": (-0.8, 0.6, 0.2), "hated": (-0.8, 0.6, 0.2),
    "awful": (-0.8, 0.5, -0.2), "terrible": (-0.8, 0.5, -0.2), "horrible": (-0.8, 0.6, -0.2), "upset": (-0.6, 0.5, -0.3),
    "shocked": (-0.4, 0.8, -0.3), "hurt": (-0.7, 0.5, -0.4), "tough": (-0.4, 0.4, 0.0), "hard": (-0.3, 0.3, 0.0),
    "difficult": (-0.4, 0.4, -0.2), "struggle": (-0.5, 0.5, -0.3), "struggling": (-0.5, 0.5, -0.3), "crisis": (-0.7, 0.8, -0.4),
    # negative, low arousal
    "sad": (-0.7, -0.3, -0.4), "lonely": (-0.7, -0.3, -0.5), "tired": (-0.4, -0.6, -0.3), "exhausted": (-0.5, -0.4, -0.4),
    "bored": (-0.4, -0.6, -0.2), "depressed": (-0.8, -0.4, -0.6), "disappointed": (-0.6, -0.1, -0.3), "sorry": (-0.4, 0.0, -0.3),
    "miss": (-0.4, 0.0, -0.2), "missed": (-0.4, 0.0, -0.2), "lost": (-0.6, 0.1, -0.5), "sick": (-0.6, 0.0, -0.4),
    "ill": (-0.6, 0.0, -0.4), "grief": (-0.8, 0.1, -0.5), "passed": (-0.3, 0.0, -0.2),
    "alone": (-0.5, -0.3, -0.4), "rejected": (-0.7, 0.3, -0.6), "bad": (-0.6, 0.2, -0.2), "worse": (-0.6, 0.3, -0.3),
    "broke": (-0.5, 0.3, -0.4), "injured": (-0.6, 0.4, -0.4), "pain": (-0.7, 0.5, -0.4),
    # Major life events and their superlatives: as intense one way as the other (a death is no calmer news than a
    # promotion; affective norms rate both far from neutral and arousing).
    "died": (-0.9, 0.8, -0.5), "death": (-0.9, 0.7, -0.5), "funeral": (-0.8, 0.6, -0.4), "killed": (-0.9, 0.8, -0.5),
    "cancer": (-0.9, 0.8, -0.6), "diagnosed": (-0.6, 0.7, -0.5), "accident": (-0.8, 0.8, -0.5),
    "divorce": (-0.8, 0.7, -0.4), "fired": (-0.8, 0.7, -0.6), "miscarriage": (-0.9, 0.7, -0.6),
    "devastated": (-0.9, 0.7, -0.6), "heartbroken": (-0.9, 0.6, -0.6), "tragedy": (-0.9, 0.7, -0.5),
    "worst": (-0.9, 0.7, -0.3), "best": (0.9, 0.7, 0.5),
    "promoted": (0.8, 0.7, 0.6), "promotion": (0.8, 0.7, 0.6), "married": (0.9, 0.8, 0.5), "wedding": (0.9, 0.8, 0.5),
    "engaged": (0.8, 0.8, 0.5), "pregnant": (0.7, 0.8, 0.3), "graduated": (0.8, 0.7, 0.6), "born": (0.8, 0.7, 0.4),
}
# Phrases read as one lexicon word ("passed away" is a death, not a pass).
PHRASES = {"passed away": "died", "lost my job": "fired", "laid off": "fired"}
_NEGATIONS = frozenset({"not", "no", "never", "don't", "didn't", "doesn't", "isn't", "wasn't", "aren't", "can't", "won't", "hardly"})
_INTENSIFIERS = frozenset({"very", "so", "really", "super", "extremely", "incredibly", "totally", "absolutely", "truly"})
# A negated word keeps this share of its valence, with the sign flipped ("not happy" is mildly negative).
NEGATION_FACTOR = -0.5
INTENSIFIER_FACTOR = 1.3
# Each "!" raises arousal by this much (up to EXCLAMATION_CAP marks count).
EXCLAMATION_AROUSAL = 0.1
EXCLAMATION_CAP = 3
# |valence| under this counts as neutral; valence spread above MIXED_SPREAD with both signs is "mixed".
NEUTRAL_VALENCE = 0.15
MIXED_SPREAD = 0.5


class Pad(msgspec.Struct, frozen=True):
    valence: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0
    hits: int = 0  # lexicon words found

    @property
    def intensity(self) -> float:
        """Emotional intensity in [0, 1] (what flashbulb encoding compares with its threshold).

        The mean of |valence| and positive arousal: strong feeling that is also activated. "Thrilled!!"
        passes the flashbulb threshold of 0.8; "happy" (0.6) and calm contentment do not.
        """
        return round((abs(self.valence) + max(self.arousal, 0.0)) / 2, 4)


def _clamp(x: float) -> float:
    return max(-1.0, min(1.0, x))


def pad(text: str) -> Pad:
    """The mean PAD of the lexicon words in `text`, with negation, intensifiers and exclamation marks."""
    low = normalise(text)
    for phrase, word in PHRASES.items():
        if phrase in low:
            low = low.replace(phrase, word)
    toks = words(low)
    v = a = dm = 0.0
    hits = 0
    for k, tok in enumerate(toks):
        entry = PAD_LEXICON.get(tok)
        if entry is None:
            continue
        ev, ea, ed = entry
        window = toks[max(0, k - 3) : k]
        if any(w in _NEGATIONS for w in window):
            ev, ed = ev * NEGATION_FACTOR, ed * NEGATION_FACTOR
        if k and toks[k - 1] in _INTENSIFIERS:
            ev, ea = ev * INTENSIFIER_FACTOR, ea * INTENSIFIER_FACTOR
        v, a, dm = v + ev, a + ea, dm + ed
        hits += 1
    if not hits:
        return Pad()
    bangs = min(text.count("!"), EXCLAMATION_CAP)
    return Pad(
        valence=round(_clamp(v / hits), 4),
        arousal=round(_clamp(a / hits + bangs * EXCLAMATION_AROUSAL), 4),
        dominance=round(_clamp(dm / hits), 4),
        hits=hits,
    )


def sentiment_label(texts: list[str]) -> str:
    """positive | negative | neutral | mixed, from the valence of each text."""
    vals = [p.valence for p in (pad(t) for t in texts) if p.hits]
    if not vals:
        return "neutral"
    if max(vals) - min(vals) > MIXED_SPREAD and max(vals) > NEUTRAL_VALENCE and min(vals) < -NEUTRAL_VALENCE:
        return "mixed"
    mean = sum(vals) / len(vals)
    if mean > NEUTRAL_VALENCE:
        return "positive"
    if mean < -NEUTRAL_VALENCE:
        return "negative"
    return "neutral"
