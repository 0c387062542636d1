"""What the embedder computed during an ingest, by kind of text: prints one JSON object.

    .venv/bin/python bench/text_kinds.py HOME

Reads a home after its ingest (no engram process may hold it: e.g. `bench/ingest.py --home HOME` once it
has finished). The home's embedding cache (`cache/embeddings.duckdb`) holds one entry per distinct text the
index-time model computed, keyed by the text's sha256; each key is classified by recomputing, from the log
alone, the texts engram embeds at ingest and hashing them:

- `message`: a message as auto-ingest encodes it (its episode text, "Speaker: text");
- `fact`: a fact auto-ingest compared (the content of a trace it kept, or of a fact it skipped);
- `schema`: a consolidation schema's content;
- `reply_context`: for a trace that carries the question its reply answers, the text embedded for it beside
  its content: "Q\\ncontent" (`vector_text`, before `vector_parts`) or the question alone;
- `chunk_memory`: a vector memory of the Summarizer (title, summary and key phrases);
- `other`: anything else (a text none of the above makes, e.g. a memory file's or a query's).

A text that is several kinds at once counts once, under the first kind of that list: e.g. a fact equal to its
message is a `message`. `kinds` gives the texts per kind and per message, and the model tokens they took (as
the embedder tokenizes them: cut at 256, no padding) with each kind's share of all tokens: the model's CPU
grows with tokens, not texts, so a kind's share of tokens is its share of the embedder's work;
`traces_with_reply_context` how many traces carry a question.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from engram.memory.cognitive.indexing import vector_text  # noqa: E402
from engram.providers.embeddings.cache import CACHE_RELATIVE_PATH, text_key  # noqa: E402
from engram.events.store import EventStore  # noqa: E402
from engram.memory.discussion.summarizer import embedding_text  # noqa: E402
from engram.policies.auto_ingest import _episode_text  # noqa: E402

KINDS = ("message", "fact", "schema", "reply_context", "chunk_memory")


def texts_by_kind(logs: list[Path]) -> tuple[dict[str, dict[str, str]], dict]:
    """By kind, the texts ingest embeds (text key -> text), and counts of messages and traces."""
    kinds: dict[str, dict[str, str]] = {k: {} for k in KINDS}
    counts = {"messages": 0, "traces": 0, "traces_with_reply_context": 0}
    for path in logs:
        store = EventStore(path, read_only=True)
        try:
            for rec in store.read(0, types=["MessageAppended", "TraceEncoded", "FactsIngested", "VectorMemoryStored"]):
                ev = rec.event
                if rec.type == "MessageAppended":
                    counts["messages"] += 1
                    episode = _episode_text(rec)
                    if episode:
                        kinds["message"][text_key(episode)] = episode
                elif rec.type == "TraceEncoded":
                    counts["traces"] += 1
                    kinds["schema" if ev.source_type == "schema" else "fact"][text_key(ev.content)] = ev.content
                    context = getattr(ev, "context", "") or ""
                    if context.strip():
                        counts["traces_with_reply_context"] += 1
                        # Embedded as "question\ncontent" (vector_text), or the question alone (vector_parts).
                        for text in (vector_text(ev.content, context), context.strip()):
                            kinds["reply_context"][text_key(text)] = text
                elif rec.type == "FactsIngested":
                    for skipped in ev.skipped:
                        if skipped.reason not in ("category", "below_threshold"):  # those are never embedded
                            kinds["fact"][text_key(skipped.content)] = skipped.content
                else:
                    text = embedding_text(ev)
                    kinds["chunk_memory"][text_key(text)] = text
        finally:
            store.close()
    return kinds, counts


def token_counts(texts: dict[str, list[str]]) -> dict[str, int]:
    """Model tokens of each kind's texts, as the MiniLM embedder tokenizes them (cut at 256, no padding)."""
    from tokenizers import Tokenizer

    from engram.providers.embeddings.minilm import MAX_SEQ_TOKENS, model_files

    files = model_files()
    if files is None:
        return {}
    tokenizer = Tokenizer.from_file(str(files[0]))
    tokenizer.enable_truncation(MAX_SEQ_TOKENS)
    tokenizer.no_padding()  # the file pads every text to 128
    return {k: sum(len(e.ids) for e in tokenizer.encode_batch(v)) if v else 0 for k, v in texts.items()}


def classify(home: Path) -> dict:
    cache = duckdb.connect(str(home / CACHE_RELATIVE_PATH), read_only=True)
    try:
        rows = cache.execute("SELECT model, key FROM embeddings").fetchall()
    finally:
        cache.close()
    logs = sorted((home / "log").glob("shard-*.duckdb"))
    kinds, counts = texts_by_kind(logs)
    out: dict[str, int] = {k: 0 for k in (*KINDS, "other")}
    texts: dict[str, list[str]] = {k: [] for k in KINDS}
    for _, key in rows:
        kind = next((k for k in KINDS if key in kinds[k]), "other")
        out[kind] += 1
        if kind != "other":
            texts[kind].append(kinds[kind][key])
    tokens = token_counts(texts)
    all_tokens = max(sum(tokens.values()), 1)
    messages = max(counts["messages"], 1)
    return {
        "home": str(home),
        "models": sorted({m for m, _ in rows}),
        "texts_computed": len(rows),
        "per_message": round(len(rows) / messages, 3),
        "kinds": {k: {"texts": n, "per_message": round(n / messages, 3),
                      **({"tokens": tokens[k], "tokens_per_text": round(tokens[k] / max(n, 1), 1),
                          "share_of_tokens": round(tokens[k] / all_tokens, 3)} if k in tokens else {})}
                  for k, n in out.items()},
        "tokens_per_message": round(sum(tokens.values()) / messages, 1),
        **counts,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home")
    args = parser.parse_args()
    print(json.dumps(classify(Path(args.home)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
