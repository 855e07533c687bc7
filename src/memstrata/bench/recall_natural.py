"""``memstrata bench recall-natural``: does the default context bring back what the user
said, when they ask for it in their own words?

The data file (JSON) holds one user's past conversations and questions asked later::

    {"memories": [["My dog Juniper is a border collie.", ...], ...],   # one list per conversation
     "related": [{"q": "What breed is my dog?", "a": "border collie"}, ...],
     "unrelated": ["Who wrote the Odyssey?", ...]}

Each memory is a user message answered by a short acknowledgement. Every question is
asked in a new conversation of that user (its only message) and ``mem.context`` is
assembled with the memory's defaults at :data:`BUDGET` tokens. A related question is a
hit when one of its answer strings (``a``: a string or a list of them, matched without
case) appears in the context outside the question itself; an unrelated question should
bring nothing, so its score is the recall tier's granted tokens.

Two passes, in one process: right after ingest (``--settle`` seconds later, default 0,
with the memory's own background worker running as it would for a user), then again
once every queued job has run. Nothing here tunes memstrata to the data.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.bench.report import envelope, machine_line, percentile, print_table
from memstrata.errors import InvalidInput

__all__ = ["BUDGET", "NaturalSet", "load", "print_result", "run", "score_related"]

BUDGET = 4000
ACKNOWLEDGEMENT = "Got it, I'll remember that."


@dataclass(frozen=True, slots=True)
class NaturalSet:
    memories: list[list[str]]
    related: list[tuple[str, tuple[str, ...]]]
    unrelated: list[str]


def _strings(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(f"{what} must be a list of non-empty strings", field="data")
    return list(value)


def load(path: Path) -> NaturalSet:
    """Read and check a data file of the shape above."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}", field="data") from None
    if not isinstance(raw, dict):
        raise InvalidInput("the data file must hold a JSON object", field="data")
    convs = raw.get("memories")
    if not isinstance(convs, list) or not convs:
        raise InvalidInput("'memories' must be a non-empty list of conversations", field="data")
    memories = [_strings(c, "each conversation in 'memories'") for c in convs]
    related: list[tuple[str, tuple[str, ...]]] = []
    for item in raw.get("related") or []:
        if not isinstance(item, dict) or not isinstance(item.get("q"), str):
            raise InvalidInput("each 'related' item needs a question 'q'", field="data")
        answers = item.get("a")
        found = [answers] if isinstance(answers, str) else answers
        related.append((item["q"], tuple(a.lower() for a in _strings(found, "'a'"))))
    unrelated = _strings(raw.get("unrelated") or [], "'unrelated'")
    if not related and not unrelated:
        raise InvalidInput("the data file has no questions", field="data")
    return NaturalSet(memories, related, unrelated)


def score_related(
    messages: Sequence[Mapping[str, Any]], question: str, answers: Sequence[str]
) -> bool:
    """Whether an answer string appears in the context outside the question (pure)."""
    parts = [str(m.get("content") or "") for m in messages]
    if parts and parts[-1].strip() == question.strip():
        parts = parts[:-1]  # the newest user message is the question itself
    text = " ".join(parts).lower()
    return any(a in text for a in answers)


def _ask(mem: Any, scope: Any, question: str) -> Any:
    conv = mem.conversations.create(scope, title="question")
    try:
        mem.messages.append(scope, conv.id, role="user", content=question)
        return mem.context(scope, conv.id, budget=BUDGET)
    finally:
        mem.conversations.delete(scope, conv.id)  # later questions must not recall it


def _pass(mem: Any, scope: Any, data: NaturalSet, label: str) -> dict[str, Any]:
    hits: list[bool] = []
    missed: list[str] = []
    pending: list[int] = []
    ms: list[float] = []
    for q, answers in data.related:
        t0 = time.perf_counter()
        ctx = _ask(mem, scope, q)
        ms.append((time.perf_counter() - t0) * 1000)
        ok = score_related(ctx.messages, q, answers)
        hits.append(ok)
        pending.append(int(getattr(ctx.report.tiers["recall"], "pending", 0) or 0))
        if not ok:
            missed.append(q)
    tokens: list[int] = []
    for q in data.unrelated:
        t0 = time.perf_counter()
        ctx = _ask(mem, scope, q)
        ms.append((time.perf_counter() - t0) * 1000)
        tokens.append(ctx.report.tiers["recall"].granted)
    return {
        "pass": label,
        "related": len(hits),
        "related_hits": round(sum(hits) / len(hits), 4) if hits else None,
        "unrelated": len(tokens),
        "unrelated_recalled_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
        "pending_max": max(pending, default=0),
        "context_p50_ms": round(percentile(ms, 50), 2) if ms else None,
        "missed": missed,
    }


def run(
    *,
    data: Path | None = None,
    db: str | None = None,
    settle: float = 0.0,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    from memstrata import Memory, Scope
    from memstrata.config import Settings

    if data is None:
        raise InvalidInput("bench recall-natural needs --data FILE", field="data")
    if settle < 0:
        raise InvalidInput("--settle must be >= 0 seconds", field="settle")
    natural = load(data)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp))
        mem = Memory.open(db or f"sqlite:///{Path(tmp) / 'natural.db'}", settings=settings)
        try:
            emb = mem.recall.embedder
            progress(f"embedder: {emb.identity if emb else 'none (keywords only)'}")
            scope = Scope("recall-natural", f"user-{int(time.time() * 1000)}")
            t0 = time.perf_counter()
            for statements in natural.memories:
                conv = mem.conversations.create(scope, title="past")
                for text in statements:
                    mem.messages.append(scope, conv.id, role="user", content=text)
                    mem.messages.append(scope, conv.id, role="assistant", content=ACKNOWLEDGEMENT)
            ingest_s = time.perf_counter() - t0
            if settle:
                time.sleep(settle)
            progress(f"asking {len(natural.related) + len(natural.unrelated)} questions")
            first = _pass(mem, scope, natural, f"settle {settle:g} s")
            while mem.jobs.run_pending():
                pass
            progress("asking again after the jobs ran")
            second = _pass(mem, scope, natural, "after jobs")
        finally:
            mem.close()
    rows = [first, second]
    headline = {
        "related_hits@settle": first["related_hits"],
        "related_hits@after_jobs": second["related_hits"],
        "unrelated_recalled_tokens@settle": first["unrelated_recalled_tokens"],
        "unrelated_recalled_tokens@after_jobs": second["unrelated_recalled_tokens"],
    }
    return envelope(
        "recall-natural",
        params={
            "data": Path(data).name,
            "budget": BUDGET,
            "settle_s": settle,
            "memories": sum(len(c) for c in natural.memories),
            "embedder": emb.identity if emb else None,
            "ingest_s": round(ingest_s, 3),
            "related_hits": "share of related questions whose answer string is in the "
            "context outside the question",
            "unrelated_recalled_tokens": "mean tokens granted to the recall tier on "
            "unrelated questions",
        },
        headline=headline,
        rows=rows,
    )


_COLUMNS = [
    ("pass", "asked"),
    ("related", "related"),
    ("related_hits", "related hits"),
    ("unrelated", "unrelated"),
    ("unrelated_recalled_tokens", "unrelated recalled tokens"),
    ("pending_max", "pending (max)"),
    ("context_p50_ms", "context p50 ms"),
]


def print_result(result: Mapping[str, Any], console: Console) -> None:
    notes = [machine_line(result["machine"])]
    for row in result["rows"]:
        if row["missed"]:
            notes.append(f"missed ({row['pass']}): " + "; ".join(row["missed"]))
    print_table(
        "Natural recall: the user's own statements in the default context "
        f"(budget {result['params']['budget']})",
        _COLUMNS,
        result["rows"],
        notes=notes,
        console=console,
    )
