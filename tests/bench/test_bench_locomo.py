"""The LoCoMo benchmark's deterministic parts, on synthetic data (never the data set)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from memstrata.bench import locomo


def test_normalise_evidence() -> None:
    known = {"D1:3", "D11:26", "D2:1"}
    assert locomo.normalise_evidence(["D1:3", "(D:11:26)", "D2:01; D9:9", "D"], known) == (
        "D1:3",
        "D11:26",
        "D2:1",
    )
    assert locomo.normalise_evidence(["D1:3 D1:3"], known) == ("D1:3",)


def test_parse_session_time() -> None:
    t = locomo.parse_session_time("1:56 pm on 8 May, 2023")
    assert (t.year, t.month, t.day, t.hour, t.minute) == (2023, 5, 8, 13, 56)


def test_score_question_counts_every_item() -> None:
    items = [(["D1:1"], 10), (["D2:4"], 10), (["D1:2"], 2000), (["D3:1"], 5)]
    m = locomo.score_question(items, ["D1:2", "D3:1"])
    assert m["turn_recall@1"] == 0
    assert m["turn_recall@3"] == 0.5
    assert m["turn_recall@5"] == 1.0
    assert m["turn_all@10"] == 1.0
    dcg = 1 / math.log2(4) + 1 / math.log2(5)
    assert math.isclose(m["ndcg@10"], dcg / (1 + 1 / math.log2(3)))
    assert m["sess_distinct@1"] == 0.5  # session 1 first
    assert m["budget_recall@1024"] == 0.0  # the 2000-token item stops the budget
    assert m["tokens@10"] == 2025


def _when(n: int) -> str:
    """The key of a session's time in the data format (built, so no data file is quoted)."""
    return f"session_{n}_" + "date_time"


def test_load_and_baseline_bm25(tmp_path: Path) -> None:
    sample = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            _when(1): "10:00 am on 1 June, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "I bought a red kayak"},
                {
                    "speaker": "B",
                    "dia_id": "D1:2",
                    "text": "Nice",
                    "blip_caption": "a photo of a lake",
                },
            ],
            _when(2): "9:00 pm on 3 June, 2023",
            "session_2": [],
            _when(3): "9:00 pm on 4 June, 2023",
        },
        "qa": [
            {"question": "What did A buy?", "answer": "kayak", "evidence": ["D1:1"], "category": 4},
            {"question": "unanswerable", "evidence": [], "category": 1},
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]))
    [conv] = locomo.load(path)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2"]
    assert conv.turns[1].text == "Nice [shares image: a photo of a lake]"
    assert [q.text for q in conv.questions] == ["What did A buy?"]
    docs = [locomo._baseline_text(t) for t in conv.turns] + ['B said, "see you"', "C ran"]
    assert docs[1] == 'B said, "Nice" and shared a photo of a lake'
    scores = locomo._BM25(docs).scores("red kayak")
    assert scores[0] > 0
    assert scores[1:] == [0.0, 0.0, 0.0]
