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
