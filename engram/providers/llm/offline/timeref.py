"""Resolve the time a sentence refers to ("next Friday", "yesterday", "8 May 2023") against its event time.

Results are ISO-8601 dates; a reference only as precise as a month or a year gives "YYYY-MM" or
"YYYY" (reduced-precision ISO 8601) rather than inventing a day.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from engram.events.envelope import from_us
from engram.providers.llm.offline.entities import MONTHS, WEEKDAYS

_MONTH_KEYS = {m[:3]: k + 1 for k, m in enumerate(MONTHS)}
_WORD_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a few": 3, "a couple of": 2}
_UNIT_DAYS = {"day": 1, "week": 7}
_DAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MON = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_PAST_WORDS = re.compile(r"\b(?:was|were|went|did|had|got|saw|met|took|made|gave|came|bought|ran|last|ago|yesterday|\w{3,}ed)\b", re.I)
# Words ending in -ed that are not past tense.
_NOT_PAST = frozenset({"need", "feed", "speed", "seed", "proceed", "indeed", "exceed", "succeed", "bed", "red", "shed", "bred"})


# Future tense and plans.
_FUTURE_WORDS = re.compile(
    r"\b(?:will|shall|gonna|going to|plan(?:s|ning)? to|planning|next|upcoming|coming up|soon|tomorrow|"
    r"looking forward|can['’]t wait|scheduled|booked)\b|['’]ll\b",
    re.I,
)
# An -ed word after these is an adjective ("I'm so excited", "we are booked"), not the past tense.
_STATE_BEFORE = frozenset({"am", "is", "are", "be", "been", "being", "so", "very", "really", "feel", "feeling", "get",
                           "getting", "i'm", "you're", "we're", "they're", "she's", "he's", "it's", "too", "super"})


def _is_past(text: str) -> bool:
    low = text.lower().replace("’", "'")
    for m in _PAST_WORDS.finditer(low):
        word = m.group(0)
        if word in _NOT_PAST:
            continue
        if word.endswith("ed") and word not in ("was", "were"):
            before = low[: m.start()].split()
            if before and before[-1] in _STATE_BEFORE:
                continue  # "so excited", "I'm booked": a state now
        return True
    return False


def _is_future(text: str) -> bool:
    return _FUTURE_WORDS.search(text) is not None

_RULES: list[tuple[str, re.Pattern]] = [
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("day_month_year", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+{_MON},?\s+(\d{{4}})\b", re.I)),
    ("month_day_year", re.compile(rf"\b{_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)),
    ("day_month", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+{_MON}(?!\w)", re.I)),
    ("month_day", re.compile(rf"\b{_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", re.I)),
    ("relative_day", re.compile(r"\b(yesterday|today|tonight|tomorrow)\b", re.I)),
    ("ago", re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|a few|a couple of)\s+(day|week|month|year)s?\s+ago\b", re.I)),
    ("in_n", re.compile(r"\bin\s+(\d+|a|an|one|two|three|four|five|six|a few|a couple of)\s+(day|week|month|year)s?\b", re.I)),
    ("shifted_weekday", re.compile(rf"\b(last|next|this|coming)\s+{_DAY}\b", re.I)),
    ("shifted_period", re.compile(r"\b(last|next|this|coming)\s+(weekend|week|month|year)\b", re.I)),
    ("month_year", re.compile(rf"\b{_MON}\s+(\d{{4}})\b", re.I)),
    ("weekday", re.compile(rf"\b(?:on\s+)?{_DAY}\b", re.I)),
    ("year", re.compile(r"\b((?:19|20)\d{2})\b")),
]


def _shift_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    for day in (d.day, 30, 29, 28):
        try:
            return date(year, month, day)
        except ValueError:
            continue
    raise AssertionError("unreachable")


def _count(word: str) -> int:
    w = word.lower()
    return int(w) if w.isdigit() else _WORD_NUMBERS.get(w, 1)


def _weekday_after(d: date, weekday: int, weeks_ahead: int) -> date:
    """The `weekday` in the week `weeks_ahead` from d's week (Monday-based weeks)."""
    monday = d - timedelta(days=d.weekday())
    return monday + timedelta(days=7 * weeks_ahead + weekday)


def _safe_date(y: int, m: int, dd: int) -> date | None:
    try:
        return date(y, m, dd)
    except ValueError:
        return None


# Tense detection is lexical and errs ("an app called Acme, due on March 9" reads as past), so a
# past-tense sentence keeps a date this close ahead, and a future-tense one a date this close behind;
# only a date further off moves a year (back for the past, forward for the future: the same rule both ways).
_TENSE_SLACK = timedelta(days=14)


def _nearest_year(event: date, month: int, day: int, past: bool, future: bool = False) -> date | None:
    """A day-and-month without a year, resolved the same way in both directions: in a past-tense
    sentence, the latest such day up to a little after the event; in a future-tense one, the earliest
    from a little before it; with no tense (or both), the candidate nearest the event."""
    candidates = [d for d in (_safe_date(event.year + k, month, day) for k in (-1, 0, 1)) if d is not None]
    if not candidates:
        return None
    nearest = min(candidates, key=lambda d: (abs((d - event).days), d))
    if past and not future and nearest > event + _TENSE_SLACK:
        earlier = [d for d in candidates if d <= event + _TENSE_SLACK]
        if earlier:
            return max(earlier)
    if future and not past and nearest < event - _TENSE_SLACK:
        later = [d for d in candidates if d >= event - _TENSE_SLACK]
        if later:
            return min(later)
    return nearest


def resolve(text: str, ts_us: int) -> str | None:
    """The ISO date `text` refers to, relative to its event time `ts_us`; None if it names no time."""
    event = from_us(ts_us).date()
    past, future = _is_past(text), _is_future(text)
    for kind, pattern in _RULES:
        m = pattern.search(text)
        if not m:
            continue
        g = m.groups()
        if kind == "iso":
            d = _safe_date(int(g[0]), int(g[1]), int(g[2]))
        elif kind == "day_month_year":
            d = _safe_date(int(g[2]), _MONTH_KEYS[g[1][:3].lower()], int(g[0]))
        elif kind == "month_day_year":
            d = _safe_date(int(g[2]), _MONTH_KEYS[g[0][:3].lower()], int(g[1]))
        elif kind == "day_month":
            d = _nearest_year(event, _MONTH_KEYS[g[1][:3].lower()], int(g[0]), past, future)
        elif kind == "month_day":
            d = _nearest_year(event, _MONTH_KEYS[g[0][:3].lower()], int(g[1]), past, future)
        elif kind == "relative_day":
            d = event + timedelta(days={"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[g[0].lower()])
        elif kind in ("ago", "in_n"):
            n, unit = _count(g[0]), g[1].lower()
            n = -n if kind == "ago" else n
            if unit in _UNIT_DAYS:
                d = event + timedelta(days=n * _UNIT_DAYS[unit])
            elif unit == "month":
                return _shift_months(event, n).isoformat()[:7]
            else:
                return str(event.year + n)
        elif kind == "shifted_weekday":
            which, wd = g[0].lower(), WEEKDAYS.index(g[1].lower())
            if which == "last":  # the most recent such day before the event
                d = event - timedelta(days=(event.weekday() - wd) % 7 or 7)
            elif which == "next":  # that day in the following week
                d = _weekday_after(event, wd, 1)
            else:  # this / coming: the next such day from the event on
                d = event + timedelta(days=(wd - event.weekday()) % 7)
        elif kind == "shifted_period":
            which, unit = g[0].lower(), g[1].lower()
            step = {"last": -1, "next": 1, "this": 0, "coming": 1}[which]
            if unit == "weekend":
                d = _weekday_after(event, 5, step)
            elif unit == "week":
                d = event + timedelta(days=7 * step)
            elif unit == "month":
                return _shift_months(event, step).isoformat()[:7]
            else:
                return str(event.year + step)
        elif kind == "month_year":
            return f"{int(g[1]):04d}-{_MONTH_KEYS[g[0][:3].lower()]:02d}"
        elif kind == "year":
            return g[0]
        else:  # a bare weekday: the previous one in past tense, else the coming one
            wd = WEEKDAYS.index(g[0].lower())
            if past:
                d = event - timedelta(days=(event.weekday() - wd) % 7 or 7)
            else:
                d = event + timedelta(days=(wd - event.weekday()) % 7)
        if d is not None:
            return d.isoformat()
    return None
