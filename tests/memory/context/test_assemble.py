"""The context that would be sent: block order and budgets (engram.memory.context.assemble)."""

from __future__ import annotations

from engram.kernel.tokens import estimate_tokens
from engram.memory.context.assemble import ChainEntry, RawTurn, Recalled, assemble


def test_blocks_come_in_order_within_their_budgets():
    ctx = assemble(
        agent="a", discussion="d", window_tokens=2_000, threshold_tokens=1_500,
        working_memory="# Working Memory\n" + "- a slot that matters\n" * 100,
        rolling_summary="Priya is building Acme Dashboard. " * 40,
        chain=[ChainEntry("[L1: turns 1-40]", "Older story.", 3), ChainEntry("[L0: turns 41-60]", "Newer story.", 3)],
        recalled=[Recalled(0.95, "Priya: What did Marco and I agree?", source_seqs=(200,)),  # a raw turn already
                  Recalled(0.9, "Priya prefers Tailwind. " * 30), Recalled(0.8, "Marco owns the schema."),
                  Recalled(0.7, "Dana renamed the app Acme Insights.", source_seqs=(120, 200))],
        turns=[RawTurn(61, 200, "user", "Priya", "What did Marco and I agree?")],
        query="What did Marco and I agree?",
    )
    assert [b.name for b in ctx.blocks] == ["working_memory", "rolling_summary", "chain", "recalled"]
    assert ctx.block("working_memory").tokens <= 100 and ctx.block("working_memory").text.endswith("…")  # 5%
    assert ctx.block("rolling_summary").tokens <= 100  # half of the 10% memory share
    recalled = ctx.block("recalled")
    assert ctx.block("rolling_summary").tokens + recalled.tokens <= 200
    # The first trace does not fit what is left; the shorter ones that follow do.
    assert recalled.text == "- Marco owns the schema.\n- Dana renamed the app Acme Insights."
    assert ctx.block("chain").text == "[L1: turns 1-40] Older story.\n[L0: turns 41-60] Newer story."
    assert ctx.memory_passages()[:2] == ["Marco owns the schema.", "Dana renamed the app Acme Insights."]
    assert ctx.tokens == sum(b.tokens for b in ctx.blocks) + estimate_tokens("What did Marco and I agree?")
    text = ctx.render()
    assert text.index("--- working memory ---") < text.index("--- rolling summary ---") < \
        text.index("--- compaction chain ---") < text.index("--- recalled memories ---") < text.index("--- recent turns")
    assert "[61] user (Priya): What did Marco and I agree?" in text
