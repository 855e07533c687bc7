"""The relevance study scripts (scripts/relevance_features.py, scripts/relevance_fit.py)
run end to end on small sets built here: signals of the search's own candidates, labels
from the data, and a fit with its held-out checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memstrata.embeddings.bundled import bundled_dir
from support import locomo_sample

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

pytestmark = pytest.mark.skipif(bundled_dir() is None, reason="needs the shipped embedder")


def _natural() -> dict[str, Any]:
    return {
        "about": "test set",
        "memories": [
            ["My dog Rex is a beagle.", "I live in Lisbon near the river."],
            ["I play the cello in an orchestra.", "My sister Ana is a pilot."],
        ],
        "related": [
            {"q": "What breed is my dog?", "a": "beagle"},
            {"q": "Which instrument do I play?", "a": ["cello"]},
            {"q": "What is my sister's job?", "a": "pilot"},
        ],
        "unrelated": ["How far is the moon from the earth?", "Translate 'thank you' to French."],
    }


def _locomo() -> list[dict[str, Any]]:
    return [
        locomo_sample(
            "t-1",
            ("Maria", "Tom"),
            [
                "I adopted a kitten called Miso last week!",
                "That's lovely, what colour is Miso?",
                "She is grey with white paws.",
                "I started learning Japanese at night school.",
            ],
            [
                {"question": "What colour is Maria's kitten?", "evidence": ["D1:3"], "category": 4},
                {"question": "What is Maria learning?", "evidence": ["D1:4"], "category": 4},
            ],
        ),
        locomo_sample(
            "t-2",
            ("Omar", "Lee"),
            [
                "I ran my first marathon in Berlin.",
                "How long did it take you?",
                "Four hours and ten minutes.",
                "My brother is moving to Canada.",
            ],
            [
                {"question": "Where did Omar run a marathon?", "evidence": ["D1:1"], "category": 4},
                {
                    "question": "Where is Omar's brother moving?",
                    "evidence": ["D1:4"],
                    "category": 1,
                },
            ],
        ),
    ]


def _run(script: str, *args: object) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_features_then_fit(tmp_path: Path) -> None:
    natural = tmp_path / "natural.json"
    natural.write_text(json.dumps(_natural()), encoding="utf-8")
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps(_locomo()), encoding="utf-8")
    features = tmp_path / "features.jsonl"
    _run(
        "relevance_features.py",
        "--natural",
        natural,
        "--locomo",
        locomo,
        "--out",
        features,
        "--k",
        5,
    )
    rows = [json.loads(line) for line in features.read_text(encoding="utf-8").splitlines()]
    nat = [r for r in rows if r["set"] == "natural"]
    loc = [r for r in rows if r["set"] == "locomo"]
    assert len(nat) == 5
    assert len(loc) == 2 * 4
    for r in nat:
        # 4 statements + 4 acknowledgements: the search returns its first k=5
        assert len(r["candidates"]) == 5
        labelled = [c["text"] for c in r["candidates"] if c["label"]]
        if r["own"]:
            answer = {"What breed is my dog?": "beagle"}.get(r["query"])
            if answer is not None:
                assert labelled
                assert all(answer in t for t in labelled)
        else:
            assert labelled == []
        for c in r["candidates"]:
            assert -1.0 <= c["cos"] <= 1.0
            assert 0.0 <= c["cov"] <= 1.0
        assert [c["rank"] for c in r["candidates"]] == [1, 2, 3, 4, 5]
    for r in loc:
        evidenced = {c["dia"] for c in r["candidates"] if c["label"]}
        assert evidenced <= set(r["evidence"])
        if not r["own"]:
            assert evidenced == set()  # another conversation holds no evidence
    marathon = next(r for r in loc if r["own"] and "marathon" in r["query"])
    assert marathon["candidates"][0]["dia"] == "t-2/D1:1"

    out = tmp_path / "fit.json"
    _run("relevance_fit.py", features, "--json", out, "--given", "intercept=-6,cos=8,cov=3")
    result = json.loads(out.read_text(encoding="utf-8"))
    model = result["models"]["cos+cov"]
    assert set(model) == {"fit_all", "held_out_locomo", "held_out_natural"}
    assert model["fit_all"]["coef"]["cos"] > 0  # nearer means more likely relevant
    assert result["given"]["coef"] == {"cos": 8.0, "cov": 3.0}
    gate, wider = result["rules"]["gate"], result["rules"]["gate+standout+nearest2@0.25"]
    for name in ("natural", "locomo"):
        # a rule that only adds admissions never lets fewer answers in, nor fewer tokens
        assert wider[name]["answer_in"] >= gate[name]["answer_in"]
        assert wider[name]["others_tokens"] >= gate[name]["others_tokens"]
    assert 0.0 <= result["given"]["natural"]["natural_others_silent"] <= 1.0
