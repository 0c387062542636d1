"""Issue 27 ("embed once"), measured and not taken: LoCoMo dev recall with facts' or reply contexts' vectors taken
as late-chunked spans of the messages they come from.

    .venv/bin/python bench/span_recall.py --spans index|all [--pool speaker|sentence] [--of facts|contexts|both]
                                          [bench/recall.py's arguments, e.g. --runtime inprocess --no-ablations --order both]
    .venv/bin/python bench/span_recall.py --cosines [LOCOMO_JSON]

A measuring harness, not a feature: it runs `bench/recall.py` unchanged (same protocol, same JSON, the same
leave-one-conversation-out section) with some vectors swapped in this process, so it needs `--runtime inprocess`.
Each message's episode text ("Speaker: text", what auto-ingest embeds) is run through the model once; a span's
vector is the normalised mean of the token states of its tokens in that run ("late chunking"), in the same pass
that gives the message its vector:

- a fact (`--of facts`): the sentence of the message the offline extraction rewrote into it (the facts and their
  sentences are found beforehand by running the offline extraction on every message: deterministic, the facts
  auto-ingest gets);
- a reply context (`--of contexts`): "Asker: question sentences" (`engram.memory.cognitive.indexing.reply_context`),
  its question sentences in the run of the message that asked them.

`--pool speaker` (the default) pools the speaker's name with the sentences (a fact's and a context's text name their
speaker); `--pool sentence` the sentences alone. `--spans index`: only what recall ranks changes (the trace index, the
reader, consolidation's clustering); auto-ingest decides with the texts' own embeddings, so memory holds the same
traces: the quality of span vectors for ranking, alone. `--spans all`: the model answers a fact's text with its span
vector everywhere (deduplication and same-topic links too), as a system that embeds no fact text would.
Prints bench/recall.py's JSON on stdout, the harness's counts on stderr. `--cosines` runs no recall: it prints how
the span vectors of the facts auto-ingest embeds (default settings) stand to their own embeddings, their messages'
vectors and each other (what the deduplication threshold compares). Results: docs/scaling.md, "What ingest
embeds, per message".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engram.config import defaults as d  # noqa: E402
from engram.evaluation import locomo  # noqa: E402


def episode_of(name: str, content: str) -> str:
    """The text auto-ingest embeds for a message (`engram.policies.auto_ingest._episode_text`)."""
    return f"{name}: {' '.join(content.split())}"[: d.EPISODE_MAX_CHARS]


class Run:
    """One message's pass through the model: its episode text, token offsets and token states."""

    def __init__(self, model, name: str, content: str):
        self.episode = episode_of(name, content)
        enc = model.tokenizer.encode(self.episode)
        ids = np.array([enc.ids], dtype=np.int64)
        mask = np.array([enc.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        self.hidden = model.session.run(["last_hidden_state"], feeds)[0][0]
        self.offsets = list(enc.offsets)
        self.speaker = [i for i, (a, b) in enumerate(self.offsets) if b > a and b <= len(name) + 1]

    def rows(self, sentence: str) -> list[int]:
        """The tokens of `sentence` in this run (none when it is not in the text the model saw)."""
        sentence = " ".join(sentence.split())
        start = self.episode.find(sentence)
        if start < 0:
            return []
        end = start + len(sentence)
        return [i for i, (a, b) in enumerate(self.offsets) if b > a and a >= start and b <= end]

    def pooled(self, rows: list[int], pool: str) -> np.ndarray:
        from engram.providers.embeddings.base import l2_normalise

        rows = (self.speaker if pool == "speaker" else []) + rows
        return l2_normalise(self.hidden[rows].mean(axis=0, keepdims=True))[0]


def span_vectors(path: Path, pool: str, of: set[str]) -> tuple[dict[str, np.ndarray], dict]:
    """Text -> its span vector, for every offline fact and/or reply context of the conversations of `path`; counts."""
    from engram.memory.cognitive.indexing import _SENTENCE_END, reply_context
    from engram.memory.ingest.formats import parse_file
    from engram.providers.embeddings.minilm import MiniLmEmbedder
    from engram.providers.llm.focus import Traits
    from engram.providers.llm.offline import facts as offline
    from engram.providers.llm.offline.text import clip_words
    from engram.providers.llm.types import ChatLine

    sentence_of: dict[str, str] = {}  # a fact's text -> the sentence it was rendered from
    render = offline.render_unit

    def recording(u):
        text = render(u)
        sentence_of[clip_words(text, offline._MAX_FACT_CHARS)] = u.text
        return text

    model = MiniLmEmbedder()
    out: dict[str, np.ndarray] = {}
    counts = {"facts": 0, "fact_spans": 0, "context_spans": 0, "not_found": 0, "same_text_twice": 0}

    def put(text: str, vector: np.ndarray, kind: str) -> None:
        if text in out:  # the same text from two messages: the first one's span (rare: 15 facts, 3 contexts)
            counts["same_text_twice"] += 1
            return
        out[text] = vector
        counts[kind] += 1

    offline.render_unit = recording
    try:
        for conv in parse_file(path, fmt="locomo", now_us=0):
            before: tuple[str, str, Run] | None = None  # the message before: speaker, content, its run
            for m in conv.messages:
                run = Run(model, m.name, m.content)
                if "contexts" in of and before is not None and (context := reply_context(before[:2], m.name)):
                    questions = [s for s in _SENTENCE_END.split(" ".join(before[1].split())) if s.strip().endswith("?")]
                    rows = [r for q in questions for r in before[2].rows(q)]
                    if rows:
                        put(context, before[2].pooled(rows, pool), "context_spans")
                    else:
                        counts["not_found"] += 1
                before = (m.name, m.content, run)
                if "facts" not in of:
                    continue
                sentence_of.clear()
                line = ChatLine(role="user", content=m.content, seq=0, ts_us=0, message_id=m.message_id, name=m.name)
                for f in offline.extract_facts([line], Traits(), 0.0, d.EXTRACT_MAX_FACTS):
                    counts["facts"] += 1
                    rows = run.rows(sentence_of[f.content])
                    if rows:
                        put(f.content, run.pooled(rows, pool), "fact_spans")
                    else:
                        counts["not_found"] += 1
    finally:
        offline.render_unit = render
    return out, counts


def cosines(path: Path) -> dict:
    """For each fact auto-ingest embeds under the default settings: the cosine of its span vector (speaker + sentence,
    and sentence alone) with its own embedding and with its message's vector, and of its own embedding with the
    message's; for each two facts of one message, the cosine of their own embeddings and of their spans."""
    from itertools import combinations

    from engram.config.agent import AgentConfig
    from engram.memory.cognitive.ingest import Candidate, ingest_rules, unembedded_skip
    from engram.memory.ingest.formats import parse_file
    from engram.providers.embeddings.base import l2_normalise
    from engram.providers.embeddings.minilm import MiniLmEmbedder
    from engram.providers.llm.focus import Traits
    from engram.providers.llm.offline import facts as offline
    from engram.providers.llm.offline.text import clip_words
    from engram.providers.llm.types import ChatLine

    model, rules = MiniLmEmbedder(), ingest_rules(AgentConfig())
    sentence_of: dict[str, str] = {}
    render = offline.render_unit

    def recording(u):
        text = render(u)
        sentence_of[clip_words(text, offline._MAX_FACT_CHARS)] = u.text
        return text

    values: dict[str, list[float]] = {k: [] for k in (
        "span_own", "sentence_own", "own_message", "span_message", "sentence_message", "pair_own", "pair_span")}
    offline.render_unit = recording
    try:
        for conv in parse_file(path, fmt="locomo", now_us=0):
            for m in conv.messages:
                sentence_of.clear()
                line = ChatLine(role="user", content=m.content, seq=0, ts_us=0, message_id=m.message_id, name=m.name)
                facts = [f for f in offline.extract_facts([line], Traits(), 0.0, d.EXTRACT_MAX_FACTS)
                         if unembedded_skip(Candidate(f.category, f.content, f.importance), rules) is None]
                if not facts:
                    continue
                run = Run(model, m.name, m.content)
                message = l2_normalise(run.hidden.mean(axis=0, keepdims=True))[0]  # the model's vector of the episode
                own = model.embed([f.content for f in facts])
                mine = []
                for f, v in zip(facts, own):
                    rows = run.rows(sentence_of[f.content])
                    span, sentence = run.pooled(rows, "speaker"), run.pooled(rows, "sentence")
                    mine.append((v, span))
                    for key, a, b in (("span_own", span, v), ("sentence_own", sentence, v), ("own_message", v, message),
                                      ("span_message", span, message), ("sentence_message", sentence, message)):
                        values[key].append(float(a @ b))
                for (a, sa), (b, sb) in combinations(mine, 2):
                    values["pair_own"].append(float(a @ b))
                    values["pair_span"].append(float(sa @ sb))
    finally:
        offline.render_unit = render
    threshold = ingest_rules(AgentConfig()).dedup_threshold
    return {"facts": len(values["span_own"]), "same_message_pairs": len(values["pair_own"]), "dedup_threshold": threshold,
            **{k: {"mean": round(float(np.mean(v)), 3), "p10": round(float(np.percentile(v, 10)), 3),
                   "share_at_or_above_threshold": round(float(np.mean(np.array(v) >= threshold)), 3)}
               for k, v in values.items()}}


def swapping(spans: dict[str, np.ndarray], embed: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
    def swapped(texts: list[str]) -> np.ndarray:
        out = np.array(embed(texts), dtype=np.float32)
        for row, text in enumerate(texts):
            if text in spans:
                out[row] = spans[text]
        return out

    return swapped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", choices=("index", "all"))
    ap.add_argument("--cosines", action="store_true", help="print the span vectors' cosines, run no recall")
    ap.add_argument("--pool", choices=("speaker", "sentence"), default="speaker")
    ap.add_argument("--of", choices=("facts", "contexts", "both"), default="facts")
    args, rest = ap.parse_known_args(argv)
    path = Path(rest[0]) if rest and not rest[0].startswith("-") else locomo.DEFAULT_PATH
    if args.cosines:
        print(json.dumps(cosines(path), indent=1))
        return 0
    if args.spans is None:
        ap.error("give --spans index|all (or --cosines)")
    if "inprocess" not in rest:
        ap.error("the vectors are swapped in this process: give --runtime inprocess")
    of = {"facts", "contexts"} if args.of == "both" else {args.of}
    spans, counts = span_vectors(path, args.pool, of)
    print(json.dumps({"span_prototype": args.spans, "pool": args.pool, "of": args.of, **counts}), file=sys.stderr)

    if args.spans == "all":
        from engram.providers.embeddings import minilm

        plain = minilm.MiniLmEmbedder.embed
        minilm.MiniLmEmbedder.embed = lambda self, texts: swapping(spans, lambda t: plain(self, t))(list(texts))  # type: ignore[method-assign]
    else:
        from engram.memory.cognitive import memory

        plain_vectors = memory.AgentMemory.vectors_of

        def vectors_of(self, pairs, embed):
            # auto-ingest's memories (content vectors) decide as now; every index recall ranks gets the spans
            return plain_vectors(self, pairs, embed if self.content_vectors else swapping(spans, embed))

        memory.AgentMemory.vectors_of = vectors_of  # type: ignore[method-assign]
    import recall

    return recall.main(rest)


if __name__ == "__main__":
    sys.exit(main())
