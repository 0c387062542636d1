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
