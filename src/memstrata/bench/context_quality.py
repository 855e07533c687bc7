"""``memstrata bench context-quality``: what the recall tier puts into a model's input.

On LoCoMo-format data (the loader of :mod:`memstrata.bench.locomo`): each
conversation is ingested turn by turn into a scope of its own (one user). For each
question a fresh conversation of that user is started with the question as its only
(newest) user message, and ``mem.context`` is assembled at budgets of 1k, 2k and 4k
tokens. Scored per question:

- ``evidence_recall``: the share of its evidence turns whose text is in the context;
- ``recalled_tokens``: the tokens the recall tier was granted;
- ``off_evidence_share``: the share of those tokens from recalled messages that are
  neither an evidence turn nor in an evidence turn's session.

The off-topic run asks every question in the scope of a *different* conversation,
where nothing relevant exists, and reports the mean recalled tokens. Nothing here
tunes memstrata to the data: the memory is opened with its defaults.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.bench.locomo import (
    CATEGORY_NAMES,
    HEADLINE_CATEGORIES,
    Conversation,
    Question,
    append_turn,
    default_data_path,
    load,
)
from memstrata.bench.report import envelope, machine_line, percentile, print_table

__all__ = ["BUDGETS", "QuestionScore", "print_result", "run", "score_context"]

BUDGETS = (1000, 2000, 4000)
HEADLINE_BUDGET = 2000
_TAG = "<recalled-messages>"
#: The recall tier's date heading (``[2023-05-08]``): not a message of its own.
_HEADING = re.compile(r"\[\d{4}-\d\d-\d\d\]")


@dataclass(frozen=True, slots=True)
class QuestionScore:
    evidence_recall: float
    recalled_tokens: int
    off_evidence_tokens: int


def _recall_lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    for m in messages:
        content = m.get("content")
        if m.get("role") == "system" and isinstance(content, str) and content.startswith(_TAG):
            return content.splitlines()[1:-1]
    return []


def score_context(
    messages: Sequence[Mapping[str, Any]],
    recalled_tokens: int,
    evidence_texts: Sequence[str],
    line_turn: Callable[[str], str | None],
    evidence: Sequence[str],
    count: Callable[[str], int],
) -> QuestionScore:
    """Score one assembled context (pure). ``line_turn`` maps a recalled line to the
    dia id of the turn it renders (None: not a turn of this conversation)."""
    text = " ".join(" ".join(str(m.get("content") or "") for m in messages).split())
    found = sum(1 for t in evidence_texts if " ".join(t.split()) in text)
    sessions = {e.split(":")[0] for e in evidence}
    off = 0
    heading = 0  # a date heading counts with the first message line under it
    for line in _recall_lines(messages):
        if _HEADING.fullmatch(line):
            heading = count(line + "\n")
            continue
        dia = line_turn(line)
        if dia is None or (dia not in evidence and dia.split(":")[0] not in sessions):
            off += count(line + "\n") + heading
        heading = 0
    return QuestionScore(found / max(len(evidence_texts), 1), recalled_tokens, off)


@dataclass(slots=True)
class _Ingested:
    conv: Conversation
    scope: Any
    text_of: dict[str, str]  # dia id -> the stored message content
    turn_of_line: dict[str, str]  # rendered recall line -> dia id


def _ingest(mem: Any, conv: Conversation, run_id: int) -> _Ingested:
    from memstrata import Scope
    from memstrata.recall.tier import render_item

    scope = Scope("context-quality", f"{conv.sample_id}-{run_id}")
    c = mem.conversations.create(scope, title=conv.sample_id)
    text_of: dict[str, str] = {}
    turn_of_line: dict[str, str] = {}
    for t in conv.turns:
        msg = append_turn(mem, scope, c.id, t)
        text_of[t.dia_id] = t.text
        turn_of_line[render_item(msg)] = t.dia_id
    mem.recall.flush(scope)
    return _Ingested(conv, scope, text_of, turn_of_line)


def _ask(mem: Any, scope: Any, question: str, budgets: Sequence[int]) -> list[Any]:
    """Contexts of a fresh conversation whose newest user message is ``question``."""
    conv = mem.conversations.create(scope, title="question")
    try:
        mem.messages.append(scope, conv.id, role="user", content=question)
        return [mem.context(scope, conv.id, budget=b) for b in budgets]
    finally:
        mem.conversations.delete(scope, conv.id)  # later questions must not recall it


def run(
    *,
    data: Path | None = None,
    db: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
    limit_conversations: int | None = None,
    limit_questions: int | None = None,
    budgets: Sequence[int] = BUDGETS,
) -> dict[str, Any]:
    from memstrata import Memory
    from memstrata.config import Settings

    path = data or default_data_path()
    convs = load(path)[:limit_conversations]
    per_q: dict[int, list[tuple[Question, QuestionScore]]] = defaultdict(list)
    off_topic: dict[int, list[int]] = defaultdict(list)
    context_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), worker="off", recall_embed="search")
        mem = Memory.open(db or f"sqlite:///{Path(tmp) / 'quality.db'}", settings=settings)
        try:
            emb = mem.recall.embedder
            tok = mem.admin.runtime.tokenizer
            progress(f"embedder: {emb.identity if emb else 'none (keywords only)'}")
            run_id = int(time.time() * 1000)
            done = [_ingest(mem, c, run_id) for c in convs]
            for i, ing in enumerate(done):
                other = done[(i + 1) % len(done)] if len(done) > 1 else None
                questions = ing.conv.questions[:limit_questions]
                progress(f"{ing.conv.sample_id}: {len(questions)} questions")
                for q in questions:
                    t0 = time.perf_counter()
                    contexts = _ask(mem, ing.scope, q.text, budgets)
                    context_ms.append((time.perf_counter() - t0) * 1000 / len(budgets))
                    texts = [ing.text_of[e] for e in q.evidence]
                    for b, ctx in zip(budgets, contexts, strict=True):
                        score = score_context(
                            ctx.messages,
                            ctx.report.tiers["recall"].granted,
                            texts,
                            ing.turn_of_line.get,
                            q.evidence,
                            tok.count_text,
                        )
                        per_q[b].append((q, score))
                    if other is not None:
                        for b, ctx in zip(
                            budgets, _ask(mem, other.scope, q.text, budgets), strict=True
                        ):
                            off_topic[b].append(ctx.report.tiers["recall"].granted)
        finally:
            mem.close()
    table = _rows(per_q, off_topic)
    head = {r["budget"]: r for r in table if r["group"] == "cats1-4"}
    headline: dict[str, Any] = {}
    for b in budgets:
        if b in head:
            headline[f"evidence_recall@{b}"] = head[b]["evidence_recall"]
            headline[f"recalled_tokens@{b}"] = head[b]["recalled_tokens"]
            headline[f"off_evidence_share@{b}"] = head[b]["off_evidence_share"]
        if off_topic.get(b):
            headline[f"off_topic_recalled_tokens@{b}"] = round(
                sum(off_topic[b]) / len(off_topic[b]), 1
            )
    if context_ms:
        headline["context_p50_ms"] = round(percentile(context_ms, 50), 2)
        headline["context_p95_ms"] = round(percentile(context_ms, 95), 2)
    return envelope(
        "context-quality",
        params={
            "data": path.name,
            "conversations": len(convs),
            "questions": sum(len(v) for v in per_q.values()) // max(len(budgets), 1),
            "budgets": list(budgets),
            "embedder": emb.identity if emb else None,
            "evidence_recall": "share of a question's evidence turns whose text is in the context",
            "off_evidence_share": "recalled tokens from messages neither evidence nor in an "
            "evidence turn's session, over all recalled tokens",
            "off_topic": "each question asked in the next conversation's scope",
        },
        headline=headline,
        rows=table,
    )


def _rows(
    per_q: Mapping[int, list[tuple[Question, QuestionScore]]], off_topic: Mapping[int, list[int]]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b, scored in per_q.items():
        groups: dict[str, list[QuestionScore]] = defaultdict(list)
        for q, s in scored:
            groups[f"c{q.category}"].append(s)
            if q.category in HEADLINE_CATEGORIES:
                groups["cats1-4"].append(s)
        for g in ["cats1-4", "c4", "c1", "c2", "c3", "c5"]:
            ss = groups.get(g)
            if not ss:
                continue
            recalled = sum(s.recalled_tokens for s in ss)
            out.append(
                {
                    "budget": b,
                    "group": g,
                    "name": "headline" if g == "cats1-4" else CATEGORY_NAMES[int(g[1:])],
                    "n": len(ss),
                    "evidence_recall": round(sum(s.evidence_recall for s in ss) / len(ss), 4),
                    "recalled_tokens": round(recalled / len(ss), 1),
                    "off_evidence_share": round(
                        sum(s.off_evidence_tokens for s in ss) / recalled, 4
                    )
                    if recalled
                    else 0.0,
                }
            )
        if off_topic.get(b):
            values = off_topic[b]
            out.append(
                {
                    "budget": b,
                    "group": "off-topic",
                    "name": "asked in another user's scope",
                    "n": len(values),
                    "recalled_tokens": round(sum(values) / len(values), 1),
                }
            )
    return out


_COLUMNS = [
    ("budget", "budget"),
    ("group", "group"),
    ("name", "category"),
    ("n", "questions"),
    ("evidence_recall", "evidence recall"),
    ("recalled_tokens", "recalled tokens"),
    ("off_evidence_share", "off-evidence share"),
]


def print_result(result: Mapping[str, Any], console: Console) -> None:
    h = result["headline"]
    notes = [
        f"context p50 {h.get('context_p50_ms')} ms, p95 {h.get('context_p95_ms')} ms "
        f"(per call, query embedding included)",
        machine_line(result["machine"]),
    ]
    print_table(
        "Context quality: evidence in the recall tier (cats 1-4 headline, c5 apart; "
        "off-topic = asked where nothing relevant exists)",
        _COLUMNS,
        result["rows"],
        notes=notes,
        console=console,
    )
