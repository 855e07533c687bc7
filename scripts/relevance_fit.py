"""Fit and check a calibrated relevance over the signals ``scripts/relevance_features.py``
wrote: a logistic model P(a candidate holds the answer | its signals), fitted on every
development set together (each set weighing the same) and checked leave-one-set-out
(fitted on the others, scored on the one left out), so that no number comes only from
the data it was fitted on.

Reported per model and held-out set:

- candidates: AUC, log loss, Brier score and expected calibration error (10 bins);
- questions: AUC of the best candidate's relevance between questions whose answer is in
  the searched memory and those whose answer is not (unrelated questions, another
  user's conversation), and at the threshold 0.5 the share of answerable questions whose
  answer clears it and the share of the others where nothing does;
- ranking: the first candidate holding the answer at rank 1 (questions of the natural
  set), TurnRecall@10 (LoCoMo, over the search's first 50) in the search's order, by
  relevance, and by the fused score plus ``w`` times relevance (``w`` chosen on the
  training sets).

The current relevance gate (:class:`memstrata.recall.gate.RelevanceGate`) is scored on
the same questions as the baseline.

Usage: ``python scripts/relevance_fit.py FEATURES.jsonl [--json OUT]``
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.recall.gate import RelevanceGate

F64 = npt.NDArray[np.float64]
Row = dict[str, Any]
Featurizer = Callable[[Row, Row], float]


def _best_cos(q: Row) -> float:
    return max((c["cos"] for c in q["candidates"]), default=0.0)


def _background(q: Row) -> float:
    """How close the scope comes to the query anyway: the mean cosine of the 2nd to 21st
    nearest candidates (of the search's first 50, not of every vector candidate)."""
    if "_background" not in q:
        ranked = sorted((c["cos"] for c in q["candidates"]), reverse=True)[1:21]
        q["_background"] = float(np.mean(ranked)) if len(ranked) >= 5 else 0.15
    return float(q["_background"])


#: Candidate signals by name; each model is a list of these.
SIGNALS: dict[str, Featurizer] = {
    "cos": lambda q, c: c["cos"],
    "cov": lambda q, c: c["cov"],
    "log_rank": lambda q, c: math.log(c["rank"]),
    "log_tokens": lambda q, c: math.log(max(c["tokens"], 1)),
    "cos_x_cov": lambda q, c: c["cos"] * c["cov"],
    "cos_gap": lambda q, c: _best_cos(q) - c["cos"],
    "standout": lambda q, c: c["cos"] - _background(q),
    "cos_content": lambda q, c: c["cos_content"],
}

MODELS: dict[str, tuple[str, ...]] = {
    "cos": ("cos",),
    "cos+cov": ("cos", "cov"),
    "cos+cov+rank+len": ("cos", "cov", "log_rank", "log_tokens"),
    "cos+cov+rank+len+cos*cov": ("cos", "cov", "log_rank", "log_tokens", "cos_x_cov"),
    "cos+cov+rank+len+gap": ("cos", "cov", "log_rank", "log_tokens", "cos_gap"),
    "cos+standout+cov": ("cos", "standout", "cov"),
    "cos+standout+cov+rank+len": ("cos", "standout", "cov", "log_rank", "log_tokens"),
    "cov (keywords only)": ("cov",),
    "cov+rank+len (keywords only)": ("cov", "log_rank", "log_tokens"),
}


@dataclass(frozen=True)
class Logistic:
    names: tuple[str, ...]
    coef: F64  # on raw (unstandardised) signals
    intercept: float

    def prob(self, x: F64) -> F64:
        z = x @ self.coef + self.intercept
        out: F64 = 1.0 / (1.0 + np.exp(-z))
        return out


def fit_logistic(
    x: F64, y: F64, w: F64, names: tuple[str, ...], l2: float = 1e-3, steps: int = 50
) -> Logistic:
    """Weighted L2-regularised logistic regression by Newton's method (on standardised
    signals, so the penalty treats them alike; returned on the raw scale)."""
    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1.0
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2 * w.sum())
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        grad = z.T @ (w * (p - y)) + reg * beta
        hess = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(reg)
        delta = np.linalg.solve(hess, grad)
        beta -= delta
        if np.abs(delta).max() < 1e-9:
            break
    coef = beta[:-1] / sd
    return Logistic(names, coef, float(beta[-1] - (mu / sd) @ beta[:-1]))


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    # average ranks over ties
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def calibration(p: F64, y: F64, bins: int = 10) -> float:
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges) - 1, 0, bins - 1)
    err = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            err += m.sum() / len(p) * abs(p[m].mean() - y[m].mean())
    return err


def matrix(rows: Sequence[Row], names: Sequence[str]) -> tuple[F64, F64]:
    xs, ys = [], []
    for q in rows:
        for c in q["candidates"]:
            xs.append([SIGNALS[n](q, c) for n in names])
            ys.append(c["label"])
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)


def _questions(rows: Sequence[Row]) -> list[Row]:
    """The questions scored (LoCoMo's adversarial category is reported apart by the protocol)."""
    return [q for q in rows if q["candidates"] and q.get("category", 0) != 5]


def set_weights(rows: Sequence[Row]) -> F64:
    """Each set weighs the same in a fit, whatever its number of candidates."""
    per_set: dict[str, int] = defaultdict(int)
    for q in rows:
        per_set[q["set"]] += len(q["candidates"])
    return np.asarray(
        [1.0 / per_set[q["set"]] for q in rows for _ in q["candidates"]], dtype=np.float64
    ) * len(per_set)


def relevances(model: Logistic, q: Row) -> F64:
    x = np.asarray(
        [[SIGNALS[n](q, c) for n in model.names] for c in q["candidates"]], dtype=np.float64
    )
    return model.prob(x) if len(x) else np.zeros(0)


def turn_recall_at(q: Row, order: Sequence[int], k: int = 10) -> float:
    evidence = set(q["evidence"])
    got = {q["candidates"][i]["dia"] for i in order[:k]}
    return len(evidence & got) / len(evidence)


def blend_order(q: Row, rel: F64, w: float) -> list[int]:
    fused = np.asarray([c["fused"] for c in q["candidates"]])
    top = fused.max() if len(fused) else 1.0
    score = fused / (top or 1.0) + w * rel
    return sorted(range(len(score)), key=lambda i: (-score[i], i))


def mean_recall(rows: Sequence[Row], orderer: Callable[[Row], list[int]]) -> float:
    own = [q for q in rows if q["set"] == "locomo" and q["own"] and q.get("category", 0) <= 4]
    return float(np.mean([turn_recall_at(q, orderer(q)) for q in own])) if own else float("nan")


def evaluate(model: Logistic, rows: Sequence[Row], w: float, threshold: float) -> dict[str, Any]:
    x, y = matrix(rows, model.names)
    p = model.prob(x)
    eps = 1e-12
    out: dict[str, Any] = {
        "cand_auc": auc(p.tolist(), y.astype(int).tolist()),
        "log_loss": float(-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))),
        "brier": float(np.mean((p - y) ** 2)),
        "ece": calibration(p, y),
        "mean_p": float(p.mean()),
        "base_rate": float(y.mean()),
    }
    qs = _questions(rows)
    best = [float(relevances(model, q).max()) for q in qs]
    out["query_auc"] = auc(best, [int(q["own"]) for q in qs])
    out.update(decisions(model, rows, threshold))
    nat = [q for q in rows if q["set"] == "natural" and q["own"]]
    if nat:
        out["right_first_search"] = sum(q["candidates"][0]["label"] for q in nat)
        out["right_first_relevance"] = sum(
            q["candidates"][int(np.argmax(relevances(model, q)))]["label"] for q in nat
        )
        out["natural_questions"] = len(nat)
    if any(q["set"] == "locomo" for q in rows):
        out["turn_recall@10_search"] = mean_recall(
            rows, lambda q: list(range(len(q["candidates"])))
        )
        out["turn_recall@10_relevance"] = mean_recall(
            rows, lambda q: blend_order(q, relevances(model, q), 1e6)
        )
        out[f"turn_recall@10_blend_w{w:g}"] = mean_recall(
            rows, lambda q: blend_order(q, relevances(model, q), w)
        )
    return out


THRESHOLDS = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)


def decisions(model: Logistic, rows: Sequence[Row], threshold: float) -> dict[str, float]:
    """Per set: the share of answerable questions whose answer clears ``threshold``, and
    of the others where no candidate does."""
    out: dict[str, float] = {}
    for s in sorted({q["set"] for q in rows}):
        hit, passed, silent = [], [], []
        for q in _questions(rows):
            if q["set"] != s:
                continue
            rel = relevances(model, q)
            cleared = rel >= threshold
            if q["own"]:
                labels = np.asarray([c["label"] for c in q["candidates"]], dtype=bool)
                hit.append(bool((cleared & labels).any()))
                passed.append(bool(cleared.any()))
            else:
                silent.append(not cleared.any())
        for name, values in (
            ("answer_clears", hit),
            ("answerable_pass", passed),
            ("others_silent", silent),
        ):
            out[f"{s}_{name}"] = round(float(np.mean(values)), 3) if values else float("nan")
    return out


def choose_threshold(model: Logistic, rows: Sequence[Row]) -> float:
    """The threshold that does best on the worst of the training sets' two rates."""

    def worst(t: float) -> float:
        d = decisions(model, rows, t)
        return min(v for k, v in d.items() if not k.endswith("_pass"))

    return max(THRESHOLDS, key=worst)


def choose_blend(model: Logistic, rows: Sequence[Row]) -> float:
    """The blend weight that maximises TurnRecall@10 on ``rows`` (0 without LoCoMo)."""
    if not any(q["set"] == "locomo" for q in rows):
        return 0.0
    grid = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
    return max(
        grid, key=lambda w: mean_recall(rows, lambda q: blend_order(q, relevances(model, q), w))
    )


#: A standout (cosine at least this, and this far above the query's background).
STANDOUT_COSINE, STANDOUT_ABOVE = 0.35, 0.25


def rule_outcomes(
    rows: Sequence[Row], *, standout: bool = False, weak_m: int = 0, weak_floor: float = 1.0
) -> dict[str, dict[str, float]]:
    """Per set, what a rule-based tier would let in: the current gate's admissions, plus
    (``standout``) candidates that stand out above the query's background, plus the
    ``weak_m`` nearest by cosine when the best cosine reaches ``weak_floor``. For
    answerable questions: is an answer among them; for the others: is anything, and
    how many tokens (content + 4 per line) come in, on average."""
    gate = RelevanceGate()
    per_set: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for q in _questions(rows):
        cands = q["candidates"]
        bc = max(c["cov"] for c in cands)
        bs = max(c["cos"] for c in cands)
        admitted = gate.admit([gate.evidence(c["cov"], c["cos"]) for c in cands], bc, bs)
        nearest = sorted(range(len(cands)), key=lambda i: -cands[i]["cos"])[:weak_m]
        inside = []
        for i, (ok, c) in enumerate(zip(admitted, cands, strict=True)):
            stands = standout and (
                c["cos"] >= STANDOUT_COSINE and c["cos"] - _background(q) >= STANDOUT_ABOVE
            )
            inside.append(ok or stands or (i in nearest and bs >= weak_floor))
        d = per_set[q["set"]]
        if q["own"]:
            d["answer_in"].append(
                any(ok and c["label"] for ok, c in zip(inside, cands, strict=True))
            )
        else:
            d["others_any"].append(any(inside))
            d["others_tokens"].append(
                sum(c["tokens"] + 4 for ok, c in zip(inside, cands, strict=True) if ok)
            )
    return {s: {k: round(float(np.mean(v)), 3) for k, v in d.items()} for s, d in per_set.items()}


def rules(rows: Sequence[Row]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "gate": rule_outcomes(rows),
        "gate+standout": rule_outcomes(rows, standout=True),
    }
    for m in (1, 2):
        for floor in (0.25, 0.28, 0.30, 0.33):
            out[f"gate+standout+nearest{m}@{floor}"] = rule_outcomes(
                rows, standout=True, weak_m=m, weak_floor=floor
            )
    return out


#: Question-level signals (over the search's candidates): is anything relevant at all?
QUERY_SIGNALS: dict[str, Callable[[Row], float]] = {
    "best_cos": lambda q: max(c["cos"] for c in q["candidates"]),
    "best_cov": lambda q: max(c["cov"] for c in q["candidates"]),
    # the cosine of the content alone (without the speaker's name the index puts first)
    "best_cos_content": lambda q: max(c["cos_content"] for c in q["candidates"]),
    "standout": lambda q: max(c["cos"] for c in q["candidates"]) - _background(q),
    "mean_cos": lambda q: float(np.mean([c["cos"] for c in q["candidates"]])),
    "gate_strength": lambda q: (
        max(c["cos"] for c in q["candidates"])
        + RelevanceGate().keyword_weight * max(c["cov"] for c in q["candidates"])
    ),
}
QUERY_MODELS: dict[str, tuple[str, ...]] = {
    "best_cos": ("best_cos",),
    "best_cos+best_cov": ("best_cos", "best_cov"),
    "best_cos+best_cov+mean_cos": ("best_cos", "best_cov", "mean_cos"),
    "best_cos+standout+best_cov": ("best_cos", "standout", "best_cov"),
}


def query_matrix(rows: Sequence[Row], names: Sequence[str]) -> tuple[F64, F64, F64]:
    qs = _questions(rows)
    per_set: dict[str, int] = defaultdict(int)
    for q in qs:
        per_set[q["set"]] += 1
    x = np.asarray([[QUERY_SIGNALS[n](q) for n in names] for q in qs], dtype=np.float64)
    y = np.asarray([int(q["own"]) for q in qs], dtype=np.float64)
    w = np.asarray([len(per_set) / per_set[q["set"]] for q in qs], dtype=np.float64)
    return x, y, w


def operating(p: F64, y: F64, threshold: float) -> dict[str, float]:
    return {
        "answerable_pass": float((p[y == 1] >= threshold).mean()),
        "others_silent": float((p[y == 0] < threshold).mean()),
    }


def separating_range(values: F64, y: F64) -> tuple[float, float] | None:
    """Thresholds on one signal that pass >= 95% of answerable questions and silence
    >= 95% of the others (None when no threshold does both)."""
    pos, neg = values[y == 1], values[y == 0]
    lo, hi = float(np.percentile(neg, 95)), float(np.percentile(pos, 5))
    return (round(lo, 3), round(hi, 3)) if lo <= hi else None


def run_queries(rows: Sequence[Row]) -> dict[str, Any]:
    sets = sorted({q["set"] for q in rows})
    out: dict[str, Any] = {"per_signal": {}, "models": {}}
    for s in sets:
        qs = [q for q in _questions(rows) if q["set"] == s]
        y = np.asarray([int(q["own"]) for q in qs], dtype=np.float64)
        for name, signal in QUERY_SIGNALS.items():
            v = np.asarray([signal(q) for q in qs], dtype=np.float64)
            out["per_signal"].setdefault(name, {})[s] = {
                "auc": round(auc(v.tolist(), y.astype(int).tolist()), 4),
                "answerable_p5": round(float(np.percentile(v[y == 1], 5)), 3),
                "others_p95": round(float(np.percentile(v[y == 0], 95)), 3),
                "separating_range": separating_range(v, y),
                **(operating(v, y, RelevanceGate().floor) if name == "gate_strength" else {}),
            }
    for name, signals in QUERY_MODELS.items():
        entry: dict[str, Any] = {}
        x, y, w = query_matrix(rows, signals)
        m = fit_logistic(x, y, w, signals)
        entry["fit_all"] = {
            "coef": dict(zip(signals, np.round(m.coef, 4).tolist(), strict=True)),
            "intercept": round(m.intercept, 4),
            **{
                s: operating(
                    m.prob(query_matrix([q for q in rows if q["set"] == s], signals)[0]),
                    query_matrix([q for q in rows if q["set"] == s], signals)[1],
                    0.5,
                )
                for s in sets
            },
        }
        for held in sets:
            xt, yt, wt = query_matrix([q for q in rows if q["set"] != held], signals)
            mt = fit_logistic(xt, yt, wt, signals)
            xh, yh, _ = query_matrix([q for q in rows if q["set"] == held], signals)
            ph = mt.prob(xh)
            entry[f"held_out_{held}"] = {
                "coef": dict(zip(signals, np.round(mt.coef, 4).tolist(), strict=True)),
                "intercept": round(mt.intercept, 4),
                "auc": round(auc(ph.tolist(), yh.astype(int).tolist()), 4),
                **operating(ph, yh, 0.5),
            }
        out["models"][name] = entry
    return out


def run(rows: Sequence[Row]) -> dict[str, Any]:
    sets = sorted({q["set"] for q in rows})
    result: dict[str, Any] = {
        "rules": rules(rows),
        "questions": run_queries(rows),
        "models": {},
    }
    for name, signals in MODELS.items():
        entry: dict[str, Any] = {}
        every = list(rows)
        x, y = matrix(every, signals)
        model = fit_logistic(x, y, set_weights(every), signals)
        w = choose_blend(model, every)
        t = choose_threshold(model, every)
        entry["fit_all"] = {
            "coef": dict(zip(signals, np.round(model.coef, 4).tolist(), strict=True)),
            "intercept": round(model.intercept, 4),
            "blend_w": w,
            "threshold": t,
            "in_sample": {
                s: evaluate(model, [q for q in rows if q["set"] == s], w, t) for s in sets
            },
            "tradeoff": {str(th): decisions(model, every, th) for th in THRESHOLDS},
        }
        for held in sets:
            train = [q for q in rows if q["set"] != held]
            test = [q for q in rows if q["set"] == held]
            xt, yt = matrix(train, signals)
            m = fit_logistic(xt, yt, set_weights(train), signals)
            wt = choose_blend(m, train) if any(q["set"] == "locomo" for q in train) else 0.5
            tt = choose_threshold(m, train)
            entry[f"held_out_{held}"] = {
                "coef": dict(zip(signals, np.round(m.coef, 4).tolist(), strict=True)),
                "intercept": round(m.intercept, 4),
                "threshold": tt,
                **evaluate(m, test, wt, tt),
            }
        result["models"][name] = entry
    return result


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("features", type=Path)
    ap.add_argument("--json", type=Path, default=None, help="write the full result here")
    ap.add_argument(
        "--given",
        default=None,
        help="also score fixed coefficients, e.g. 'intercept=-5.9,cos=2.5,standout=12.3,cov=4.8'",
    )
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.features.read_text(encoding="utf-8").splitlines()]
    result = run(rows)
    if args.given:
        pairs = {k: float(v) for k, v in (p.split("=") for p in args.given.split(","))}
        intercept = pairs.pop("intercept", 0.0)
        given = Logistic(tuple(pairs), np.asarray(list(pairs.values())), intercept)
        sets = sorted({q["set"] for q in rows})
        t = choose_threshold(given, rows)
        result["given"] = {
            "coef": pairs,
            "intercept": intercept,
            "threshold": t,
            **{s: evaluate(given, [q for q in rows if q["set"] == s], 0.5, t) for s in sets},
            "tradeoff": {str(th): decisions(given, rows, th) for th in THRESHOLDS},
        }
    print("rules (the current gate, and what a standout / nearest-by-cosine path adds):")
    for name, per in result["rules"].items():
        print(f"  {name}: {json.dumps(per)}")
    print("\nquestion level (is anything relevant?):")
    for name, per in result["questions"]["per_signal"].items():
        print(f"  signal {name}: {json.dumps(per)}")
    for name, entry in result["questions"]["models"].items():
        print(f"  model {name}:")
        for key, metrics in entry.items():
            print(f"    {key}: {json.dumps(metrics)}")
    print("\ncandidate level (does this message hold the answer?):")
    for name, entry in result["models"].items():
        fit = entry["fit_all"]
        print(
            f"\n== {name}: coef {fit['coef']} intercept {fit['intercept']} "
            f"blend w {fit['blend_w']} threshold {fit['threshold']}"
        )
        for key, metrics in entry.items():
            if key.startswith("held_out"):
                shown = {k: v for k, v in metrics.items() if k not in ("coef", "intercept")}
                print(f"  {key}: " + ", ".join(f"{k} {_fmt(v)}" for k, v in shown.items()))
        for s, metrics in fit["in_sample"].items():
            print(f"  in-sample {s}: " + ", ".join(f"{k} {_fmt(v)}" for k, v in metrics.items()))
    if "given" in result:
        print("\n== given coefficients:", json.dumps(result["given"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
