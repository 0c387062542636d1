"""The retrieval evaluation protocol of `shared/data/README.md` on LoCoMo conversations.

For every QA item with at least one valid evidence id: ask the question as a query, take the
top-k results, map each result back to the dialog ids it was built from, and score
evidence recall@k = |evidence ∩ retrieved| / |evidence|. Report the mean over items, overall
and per category, for k = 5, 10, 25, together with the tokens the top-k results hold.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from engram.kernel.tokens import estimate_tokens

DEFAULT_PATH = Path("/work/shared/data/locomo/locomo-dev.json")
KS = (5, 10, 25)
CATEGORIES = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain", 5: "adversarial"}
# LoCoMo paper, Table 3: DRAGON over dialog turns, all categories.
PUBLISHED_DRAGON = {"recall@5": 56.7, "recall@10": 66.2, "recall@25": 76.7}


@dataclass(frozen=True)
class QaItem:
    sample_id: str
    question: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Hit:
    """One retrieved result: the dialog ids it derives from and the text it puts in a prompt."""

    dialog_ids: frozenset[str]
    text: str


def load(path: str | Path = DEFAULT_PATH) -> list[dict]:
    return json.loads(Path(path).read_text())


def dialog_ids(sample: dict) -> set[str]:
    conv = sample["conversation"]
    return {t["dia_id"] for k, v in conv.items() if re.fullmatch(r"session_\d+", k) for t in v}


def parse_evidence(raw: Iterable[str], valid: set[str]) -> frozenset[str]:
    """Evidence ids, with malformed entries ("D8:6; D9:17", "D", unknown ids) split or dropped."""
    out = set()
    for entry in raw:
        for part in re.split(r"[;\s]+", str(entry)):
            if part in valid:
                out.add(part)
    return frozenset(out)


def qa_items(sample: dict) -> list[QaItem]:
    valid = dialog_ids(sample)
    items = []
    for qa in sample["qa"]:
        ev = parse_evidence(qa.get("evidence", []), valid)
        if ev:
            items.append(QaItem(sample["sample_id"], qa["question"], ev, int(qa["category"])))
    return items


def evaluate(items: Sequence[QaItem], retrieve: Callable[[QaItem, int], list[Hit]], ks: Sequence[int] = KS) -> dict:
    """Mean evidence recall@k overall, per category and per conversation (all items, and multi-hop: the split a
    held-out check reads — settings chosen on one conversation, checked on the others), and mean tokens in the top-k."""
    kmax = max(ks)
    sums = {k: 0.0 for k in ks}
    tokens = {k: 0 for k in ks}
    per_cat: dict[int, dict[int, float]] = defaultdict(lambda: {k: 0.0 for k in ks})
    counts: dict[int, int] = defaultdict(int)
    per_conv: dict[tuple[str, str], list[float]] = defaultdict(list)  # (conversation, "all" | "multi-hop") -> recall@kmid
    kmid = sorted(ks)[len(ks) // 2]
    for item in items:
        hits = retrieve(item, kmax)
        counts[item.category] += 1
        for k in ks:
            got = set().union(*[h.dialog_ids for h in hits[:k]]) if hits else set()
            recall = len(item.evidence & got) / len(item.evidence)
            sums[k] += recall
            per_cat[item.category][k] += recall
            tokens[k] += sum(estimate_tokens(h.text) for h in hits[:k])
            if k == kmid:
                per_conv[(item.sample_id, "all")].append(recall)
                if CATEGORIES.get(item.category) == "multi-hop":
                    per_conv[(item.sample_id, "multi-hop")].append(recall)
    n = max(len(items), 1)
    conversations: dict[str, dict[str, float]] = {}
    for (conv, part), values in sorted(per_conv.items()):
        conversations.setdefault(conv, {})[part] = round(100 * sum(values) / len(values), 1)
    return {
        "items": len(items),
        **{f"recall@{k}": round(100 * sums[k] / n, 1) for k in ks},
        **{f"tokens@{k}": round(tokens[k] / n, 1) for k in ks},
        "per_category": {
            CATEGORIES.get(c, str(c)): {"items": counts[c], **{f"recall@{k}": round(100 * per_cat[c][k] / counts[c], 1) for k in ks}}
            for c in sorted(counts)
        },
        f"per_conversation@{kmid}": conversations,
    }


# ------------------------------------------------------------------ leave one conversation out

LOO_METRICS = ("recall@5", "recall@10", "multi-hop", "open-domain", "tokens@10")


def item_figures(item, hits) -> dict:
    """One item's recall@5/@10 and tokens@10 (as `locomo.evaluate` counts them)."""
    def recall_at(k):
        got = set().union(*[h.dialog_ids for h in hits[:k]]) if hits else set()
        return len(item.evidence & got) / len(item.evidence)

    return {"recall@5": recall_at(5), "recall@10": recall_at(10),
            "tokens@10": sum(estimate_tokens(h.text) for h in hits[:10])}


def conversation_figures(rows: dict) -> dict[str, dict[str, float]]:
    """Per conversation, from one run's rows (item -> hits): LOO_METRICS (multi-hop and open-domain at @10; absent when
    the conversation has no such item)."""
    per: dict[str, dict[str, list[float]]] = {}
    for item, hits in rows.items():
        f = item_figures(item, hits)
        c = per.setdefault(item.sample_id, {m: [] for m in LOO_METRICS})
        for m in ("recall@5", "recall@10", "tokens@10"):
            c[m].append(f[m])
        category = CATEGORIES.get(item.category)
        if category in ("multi-hop", "open-domain"):
            c[category].append(f["recall@10"])
    return {conv: {m: round((1 if m.startswith("tokens") else 100) * sum(v) / len(v), 1) for m, v in c.items() if v}
            for conv, c in sorted(per.items())}


def leave_one_out(runs: dict[str, list[dict]]) -> dict:
    """`runs`: configuration name -> its rows per question order (item -> hits), the default first. For each held-out
    conversation the configuration with the best recall@10 on the other conversations (all their items, every order)
    is chosen and its held-out figures (mean over the orders) reported; then the mean and the worst held-out
    conversation of each of LOO_METRICS (worst: the lowest recall, the most tokens)."""
    def mean_over_orders(rows_list, conv):
        figs = [conversation_figures(rows)[conv] for rows in rows_list]
        return {m: round(sum(f[m] for f in figs) / len(figs), 1) for m in LOO_METRICS if all(m in f for f in figs)}

    names = list(runs)
    convs = sorted({it.sample_id for rows_list in runs.values() for rows in rows_list for it in rows})
    folds = {}
    for held in convs:
        def training_recall(name):
            values = [item_figures(it, hits)["recall@10"] for rows in runs[name] for it, hits in rows.items()
                      if it.sample_id != held]
            return sum(values) / max(len(values), 1)
        best = max(names, key=lambda n: (round(training_recall(n), 6), -names.index(n)))
        folds[held] = {"chosen": best, **mean_over_orders(runs[best], held)}
    summary = {}
    for m in LOO_METRICS:
        values = {conv: f[m] for conv, f in folds.items() if m in f}
        if values:
            worst = (max if m.startswith("tokens") else min)(values, key=lambda conv: values[conv])
            summary[m] = {"mean": round(sum(values.values()) / len(values), 1), "worst": values[worst],
                          "worst_conversation": worst}
    return {"configurations": names, "held_out": folds, "mean_and_worst": summary}
