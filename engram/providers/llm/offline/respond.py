"""The offline responder: not a language model, and it says so.

It cannot write an answer, so it quotes one: the sentences of the memory context that share the
most (BM25-weighted) words with the last user message, best first, within the token budget, under
a label that says what they are. One concept is matched beyond shared words: a question about what
to avoid or what is not possible ("What food should I avoid?") matches the stated constraints of the
context (allergies, diets, deadlines: `cues.CONSTRAINT`), which rarely share its words. The memory context is `context`; without it, the sentences of a
rendered `prompt` (where a Standard node puts earlier nodes' outputs), less those that only repeat
the question. No context, or no sentence sharing a word, gets a labelled sentence saying so.
"""

from __future__ import annotations

import re
from typing import Sequence

from engram.kernel.tokens import CHARS_PER_TOKEN
from engram.providers.llm.offline import tuning as k
from engram.providers.llm.offline.analysis import joined_sentences
from engram.providers.llm.offline.cues import CONSTRAINT
from engram.providers.llm.offline.text import clip_words, normalise
from engram.providers.llm.types import ChatLine
from engram.providers.search.bm25 import BM25, tokenize

TAG = "[offline heuristic, not a language model]"
QUOTING = f"{TAG} The memories most relevant to the last message:"
NO_CONTEXT = f"{TAG} No memory context was given, so there is nothing to answer from."
NO_MATCH = f"{TAG} Nothing in the memory context matches the last message."
NOTHING_ASKED = f"{TAG} There is no message to answer."
BULLET = "- "
# A question about limits: what to avoid, what cannot or must not be, restrictions, allergies, deadlines.
ASKS_CONSTRAINTS = re.compile(
    r"\b(?:avoid\w*|allerg\w*|can['’]?t|cannot|shouldn['’]t|should not|must not|not allowed|restrict\w*|safe to|"
    r"diet\w*|deadline|due)\b", re.IGNORECASE)
# The word both sides get when the question asks about constraints and a sentence states one (no real word is it).
CONSTRAINT_MARK = "constraintstated"


def labelled(role: str, text: str) -> bool:
    """Whether a message is a reply of this responder (an assistant message under its label): it keeps its label in
    the log, and no memory is made of it (it says what the memory already holds, or that it holds nothing)."""
    return role == "assistant" and text.lstrip().startswith(TAG)


def last_user_message(lines: Sequence[ChatLine]) -> str:
    return next((line.content for line in reversed(lines) if line.role == "user" and line.content.strip()), "")


def _key(text: str) -> str:
    return " ".join(normalise(text).split())


def candidate_sentences(context: Sequence[str], prompt: str, question: str) -> list[str]:
    """Sentences the answer may quote, in order, each once."""
    if context:
        texts = list(context)
    else:
        texts = [prompt] if prompt.strip() else []
    asked = _key(question)
    seen: set[str] = set()
    out = []
    for text in texts:
        for sentence in joined_sentences(text):
            key = _key(sentence)
            repeats_question = bool(asked) and (key in asked or asked in key)
            if not key or key in seen or (not context and repeats_question):
                continue
            seen.add(key)
            out.append(sentence.strip())
    return out


def respond(lines: Sequence[ChatLine], prompt: str, context: Sequence[str], max_tokens: int) -> str:
    question = last_user_message(lines) or (prompt if context else "")
    candidates = candidate_sentences(context, prompt, question)
    if not candidates:
        return NO_CONTEXT
    terms = tokenize(question)
    if not terms:
        return NOTHING_ASKED
    asks_constraints = ASKS_CONSTRAINTS.search(question) is not None
    if asks_constraints:
        terms += tokenize(CONSTRAINT_MARK)
    index = BM25()
    for n, sentence in enumerate(candidates):
        marked = f"{sentence} {CONSTRAINT_MARK}" if asks_constraints and CONSTRAINT.search(sentence) else sentence
        index.add(f"{n:06d}", marked)  # ties rank by position: ids sort as positions do
    ranked = index.search(terms, k.RESPOND_MAX_SENTENCES)
    if not ranked:
        return NO_MATCH
    budget = max(0, max_tokens * CHARS_PER_TOKEN - len(QUOTING))
    out = QUOTING
    for n, (key, _) in enumerate(ranked):
        line = "\n" + BULLET + candidates[int(key)]
        if len(line) > budget:
            if n == 0:
                out += clip_words(line, budget)  # the best match, cut to fit
            break
        out += line
        budget -= len(line)
    return out
