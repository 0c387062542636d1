"""The LoCoMo evidence-recall protocol's report (engram.evaluation.locomo), on a two-conversation toy set."""

from engram.evaluation.locomo import Hit, QaItem, evaluate


def test_the_report_splits_recall_by_conversation_for_held_out_checks():
    items = [
        QaItem("conv-a", "q1", frozenset({"D1:1", "D2:1"}), 1),  # multi-hop, half of its evidence found
        QaItem("conv-a", "q2", frozenset({"D1:2"}), 4),  # single-hop, found
        QaItem("conv-b", "q3", frozenset({"D3:1"}), 1),  # multi-hop, not found
    ]
    found = {"q1": ["D1:1"], "q2": ["D1:2"], "q3": ["D9:9"]}

    def retrieve(item, k):
        return [Hit(frozenset([d]), "some text") for d in found[item.question]][:k]

    report = evaluate(items, retrieve)
    assert report["recall@10"] == 50.0
    assert report["per_conversation@10"] == {"conv-a": {"all": 75.0, "multi-hop": 50.0}, "conv-b": {"all": 0.0, "multi-hop": 0.0}}
    assert report["per_category"]["multi-hop"]["recall@10"] == 25.0


def test_leave_one_out_chooses_on_the_other_conversations_and_reports_the_worst_held_out_one():
    from engram.evaluation.locomo import leave_one_out
    from engram.kernel.tokens import estimate_tokens

    items = {c: QaItem(c, f"q-{c}", frozenset({f"{c}:1"}), 1) for c in ("a", "b", "c")}

    def rows(found: set[str]):
        return {it: [Hit(frozenset({f"{c}:1"} if c in found else {"x"}), "two words")] for c, it in items.items()}

    # "tuned" finds conversation a's evidence only; "broad" a's and b's. Held out a: chosen on b and c -> broad (finds a).
    # Held out b: on a and c, a tie -> the first configuration, tuned (misses b). Held out c: on a and b -> broad.
    out = leave_one_out({"tuned": [rows({"a"})], "broad": [rows({"a", "b"})]})
    assert {c: f["chosen"] for c, f in out["held_out"].items()} == {"a": "broad", "b": "tuned", "c": "broad"}
    assert {c: f["recall@10"] for c, f in out["held_out"].items()} == {"a": 100.0, "b": 0.0, "c": 0.0}
    assert out["mean_and_worst"]["recall@10"] == {"mean": 33.3, "worst": 0.0, "worst_conversation": "b"}
    assert out["mean_and_worst"]["multi-hop"]["mean"] == 33.3
    assert "open-domain" not in out["mean_and_worst"]  # no such item held out anywhere
    assert out["mean_and_worst"]["tokens@10"]["worst"] == estimate_tokens("two words")
