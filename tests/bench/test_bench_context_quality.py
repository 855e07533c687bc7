"""``memstrata bench context-quality`` on a tiny synthetic LoCoMo-format file."""

from __future__ import annotations

import json
from pathlib import Path

from memstrata.bench import context_quality as cq
from support import locomo_sample


def _data(tmp_path: Path) -> Path:
    samples = [
        locomo_sample(
            "s1",
            ("Ada", "Bo"),
            [
                "I bought a red kayak for the lake trips this summer",
                "A red kayak sounds great, where will you paddle?",
                "My beagle Pixel will ride in the kayak with me",
                "Pixel in a life jacket would be adorable",
            ],
            [
                {"question": "What colour is Ada's kayak?", "evidence": ["D1:1"], "category": 4},
                {"question": "Who rides in Ada's kayak?", "evidence": ["D1:3"], "category": 1},
                {"question": "Does Bo own a kayak?", "evidence": ["D1:2"], "category": 5},
            ],
        ),
        locomo_sample(
            "s2",
            ("Cy", "Di"),
            [
                "I am learning the Sicilian defence in chess",
                "Chess openings take a while, try the Najdorf",
                "I baked sourdough bread with rye flour yesterday",
                "Rye sourdough needs a long proof",
            ],
            [
                {
                    "question": "Which chess opening is Cy learning?",
                    "evidence": ["D1:1"],
                    "category": 4,
                }
            ],
        ),
    ]
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(samples))
    return path


def test_the_run_scores_evidence_tokens_and_the_off_topic_run(tmp_path: Path) -> None:
    result = cq.run(data=_data(tmp_path))
    assert set(result) == {"name", "machine", "params", "headline", "rows", "baselines"}
    assert result["name"] == "context-quality"
    assert result["params"]["budgets"] == [1000, 2000, 4000]
    h = result["headline"]
    for b in (1000, 2000, 4000):
        assert h[f"evidence_recall@{b}"] == 1.0  # every evidence turn is recalled
        assert h[f"recalled_tokens@{b}"] > 0
        assert 0.0 <= h[f"off_evidence_share@{b}"] <= 1.0
        # Asked where nothing about it exists, far less (here: nothing) is recalled.
        assert h[f"off_topic_recalled_tokens@{b}"] < h[f"recalled_tokens@{b}"]
    groups = {(r["budget"], r["group"]) for r in result["rows"]}
    assert {
        (2000, "cats1-4"),
        (2000, "c4"),
        (2000, "c1"),
        (2000, "c5"),
        (2000, "off-topic"),
    } <= groups
    c5 = next(r for r in result["rows"] if r["group"] == "c5" and r["budget"] == 2000)
    assert c5["n"] == 1  # apart from the headline
    head = next(r for r in result["rows"] if r["group"] == "cats1-4" and r["budget"] == 2000)
    assert head["n"] == 3


def test_score_context_counts_evidence_and_off_evidence_tokens() -> None:
    messages = [
        {"role": "system", "content": "<recalled-messages>\nL1\nL2\nL3\n</recalled-messages>"},
        {"role": "user", "content": "question?"},
    ]
    turns = {"L1": "D1:1", "L2": "D1:5", "L3": "D2:1"}
    s = cq.score_context(
        messages,
        30,
        ["L1", "missing  text"],
        turns.get,
        ["D1:1", "D3:3"],
        lambda text: 10,
    )
    assert s.evidence_recall == 0.5
    assert s.recalled_tokens == 30
    assert s.off_evidence_tokens == 10  # L3: neither evidence nor an evidence session


def test_a_date_heading_counts_with_the_line_under_it() -> None:
    messages = [
        {
            "role": "system",
            "content": "<recalled-messages>\n[2023-05-08]\nL1\n[2023-06-01]\nL3\n</recalled-messages>",
        },
    ]
    turns = {"L1": "D1:1", "L3": "D2:1"}
    s = cq.score_context(messages, 40, ["L1"], turns.get, ["D1:1"], lambda text: 10)
    assert s.evidence_recall == 1.0
    assert s.off_evidence_tokens == 20  # L3 and its heading; L1's heading goes with L1
