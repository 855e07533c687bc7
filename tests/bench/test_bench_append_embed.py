"""``memstrata bench append-embed`` at a small size: the JSON envelope, both modes, and
what inline embedding leaves waiting (nothing after single appends)."""

from __future__ import annotations

from memstrata.bench import append_embed


def test_append_embed_reports_both_modes() -> None:
    result = append_embed.run(sizes=[20], singles=6, warmup=2, rounds=1)
    assert result["name"] == "append-embed"
    assert set(result) >= {"machine", "params", "headline", "rows", "baselines"}
    rows = {r["mode"]: r for r in result["rows"]}
    assert set(rows) == {"search", "inline"}
    # Inline: every single append embedded its message; the default mode left them all.
    assert rows["inline"]["pending_after_singles"] == 0
    assert rows["search"]["pending_after_singles"] == 8
    # A bulk loop is a burst: the inline mode embeds only its first message itself.
    assert rows["inline"]["bulk_waiting_after_appends"] >= 10
    assert rows["search"]["bulk_waiting_after_appends"] == 20
    for row in rows.values():
        assert row["append_p50_ms"] > 0
        assert row["bulk_turns_per_s"] > 0
