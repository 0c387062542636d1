"""Benchmark of the offline heuristic provider on LoCoMo conversations. Prints one JSON object.

    python bench/offline_tasks.py [path/to/locomo-dev.json]

Only the conversations themselves are fed to the tasks (turns, speakers, session dates, and the
captions of shared photos, which are part of what was said). The `observation` annotations are
read only to score recall; `session_summary` and `event_summary` are never read.

Figures:
- chunk summaries: compression (conversation tokens / summary tokens) over WilmerAI chunks of
  chunkEstimatedTokenSize tokens, and latency per chunk;
- observations: compression of each session into Observer notes (the Wunderland guide promises
  5-40x), next to the compression of LoCoMo's own annotated observations for reference;
- fact recall: share of annotated `observation` facts whose key terms appear in a fact that the
  offline extraction (run per turn, with auto-ingest's threshold and per-turn limit) produced in
  the same session. Key terms = the annotation's names, places and numbers other than the two
  speakers; when it has none, its three rarest content words. "Covered" = at least half of the
  key terms occur in one extracted fact (strict: all of them).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from engram.config import defaults as d
from engram.events.envelope import to_us
from engram.kernel.tokens import estimate_tokens
from engram.providers.llm.offline.entities import extract
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.offline.text import content_words, stem
from engram.providers.llm.types import ChatLine

DEFAULT_PATH = Path("/work/shared/data/locomo/locomo-dev.json")
SESSION_KEY = re.compile(r"^session_(\d+)$")
# A turn for auto-ingest: one message and the reply to it.
TURN_MESSAGES = 2


def session_time(text: str) -> int:
    return to_us(datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc))


def sessions(sample: dict) -> list[tuple[int, list[ChatLine]]]:
    conv = sample["conversation"]
    out, seq = [], 0
    numbers = sorted(int(m.group(1)) for k in conv if (m := SESSION_KEY.match(k)))
    for n in numbers:
        ts = session_time(conv[f"session_{n}_date_time"])
        lines = []
        for turn in conv[f"session_{n}"]:
            seq += 1
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares a photo of {turn['blip_caption']}]"
            lines.append(ChatLine(role="user", name=turn["speaker"], content=text, seq=seq, ts_us=ts, message_id=turn["dia_id"]))
        out.append((n, lines))
    return out


def chunks(lines: list[ChatLine], size: int) -> list[list[ChatLine]]:
    out, cur, tokens = [], [], 0
    for line in lines:
        cur.append(line)
        tokens += estimate_tokens(line.content)
        if tokens >= size:
            out.append(cur)
            cur, tokens = [], 0
    if cur:
        out.append(cur)
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def key_terms(text: str, speakers: set[str], rarity: dict[str, int]) -> list[str]:
    names = [e.text for e in extract(text) if e.kind in ("person", "place", "name", "number") and e.text.lower() not in speakers]
    terms = list(dict.fromkeys(stem(w) for n in names for w in n.split()))
    if terms:
        return terms
    words = [stem(w) for w in content_words(text) if w not in speakers]
    return sorted(dict.fromkeys(words), key=lambda w: (rarity.get(w, 0), w))[:3]


def covered(terms: list[str], fact_stems: list[set[str]], strict: bool) -> bool:
    need = len(terms) if strict else math.ceil(len(terms) / 2)
    return any(sum(1 for t in terms if t in stems) >= need for stems in fact_stems)


def main(path: Path) -> dict:
    data = json.loads(path.read_text())
    tasks = OfflineTasks()
    names = ("summarize_chunk", "observe_session", "extract_facts_turn", "extract_memory")
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}

    def timed(name, fn, *args, **kw):
        # CPU time beside wall time: on a shared machine the wall clock also counts other processes.
        start, start_cpu = time.perf_counter(), time.process_time()
        value = fn(*args, **kw).value
        cpu[name].append((time.process_time() - start_cpu) * 1000)
        wall[name].append((time.perf_counter() - start) * 1000)
        return value

    conv_tokens = summary_tokens = obs_in = obs_out = annotated_obs_tokens = 0
    n_chunks = n_notes = n_facts = fact_tokens = 0
    total = hits = strict_hits = aligned_hits = 0
    for sample in data:
        conv = sample["conversation"]
        speakers = {conv["speaker_a"].lower(), conv["speaker_b"].lower()}
        all_lines = [l for _, ls in sessions(sample) for l in ls]
        for chunk in chunks(all_lines, d.CHUNK_ESTIMATED_TOKEN_SIZE):
            tokens = sum(estimate_tokens(l.content) for l in chunk)
            summary = timed("summarize_chunk", tasks.summarize_chunk, chunk)
            timed("extract_memory", tasks.extract_memory, chunk)
            conv_tokens += tokens
            summary_tokens += estimate_tokens(summary)
            n_chunks += 1
        annotations = sample.get("observation", {})
        rarity: dict[str, int] = {}
        for per_speaker in annotations.values():
            for items in per_speaker.values():
                for text, *_ in items:
                    for w in set(stem(x) for x in content_words(text)):
                        rarity[w] = rarity.get(w, 0) + 1
        for n, lines in sessions(sample):
            notes = timed("observe_session", tasks.observe, lines)
            obs_in += sum(estimate_tokens(l.content) for l in lines)
            obs_out += sum(estimate_tokens(x.text) for x in notes)
            n_notes += len(notes)
            facts = []
            for k in range(0, len(lines), TURN_MESSAGES):
                facts += timed("extract_facts_turn", tasks.extract_facts, lines[k : k + TURN_MESSAGES])
            n_facts += len(facts)
            fact_tokens += sum(estimate_tokens(f.content) for f in facts)
            fact_stems = [{stem(w) for w in re.findall(r"[A-Za-z0-9$][A-Za-z0-9'’\-,.]*", f.content.lower())} | {stem(w) for w in content_words(f.content)} for f in facts]
            fact_ids = [f.message_id for f in facts]
            for per_speaker in annotations.get(f"session_{n}_observation", {}).values():
                for text, evidence, *_ in per_speaker:
                    annotated_obs_tokens += estimate_tokens(text)
                    terms = key_terms(text, speakers, rarity)
                    if not terms:
                        continue
                    total += 1
                    hits += covered(terms, fact_stems, strict=False)
                    strict_hits += covered(terms, fact_stems, strict=True)
                    evidence_ids = set(str(evidence).replace(";", " ").split())
                    aligned = [s for s, mid in zip(fact_stems, fact_ids) if mid in evidence_ids]
                    aligned_hits += covered(terms, aligned, strict=False)

    latency = {
        name: {
            "cpu_p50_ms": round(statistics.median(cpu[name]), 3),
            "cpu_p95_ms": round(pct(cpu[name], 0.95), 3),
            "wall_p50_ms": round(statistics.median(wall[name]), 3),
            "wall_p95_ms": round(pct(wall[name], 0.95), 3),
            "n": len(wall[name]),
        }
        for name in names
    }
    latency["load_average_1m"] = round(os.getloadavg()[0], 2)
    return {
        "benchmark": "offline_tasks",
        "model": OfflineTasks.model,
        "data": str(path),
        "conversations": len(data),
        "conversation_tokens": conv_tokens,
        "chunk_summaries": {
            "chunk_tokens": d.CHUNK_ESTIMATED_TOKEN_SIZE,
            "chunks": n_chunks,
            "summary_tokens": summary_tokens,
            "compression_ratio": round(conv_tokens / max(1, summary_tokens), 2),
        },
        "observations": {
            "sessions_tokens": obs_in,
            "notes": n_notes,
            "note_tokens": obs_out,
            "compression_ratio": round(obs_in / max(1, obs_out), 2),
            "locomo_annotated_observations_compression_ratio": round(obs_in / max(1, annotated_obs_tokens), 2),
        },
        "fact_recall": {
            "annotated_facts": total,
            "recall": round(hits / max(1, total), 4),
            "recall_strict": round(strict_hits / max(1, total), 4),
            "recall_from_evidence_turns": round(aligned_hits / max(1, total), 4),
            "facts_extracted": n_facts,
            "fact_tokens_share_of_conversation": round(fact_tokens / max(1, obs_in), 4),
            "per_turn": {"messages": TURN_MESSAGES, "max_facts": d.AUTO_INGEST_MAX_PER_TURN, "importance_threshold": d.AUTO_INGEST_IMPORTANCE},
        },
        "latency": latency,
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH)))
