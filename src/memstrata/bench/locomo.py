"""``memstrata bench locomo``: LoCoMo evidence retrieval (protocol (a), section 5 of
``shared/reference/locomo-retrieval-protocol.md``).

Each conversation is ingested turn by turn through the public API into a fresh
scope (one message per turn, ``occurred_at`` = its session's time, the speaker in
metadata); each question is searched with ``mem.recall.search(scope, question, k)``
and the provenance of the first k returned items is scored. Every returned item
counts as one of the k. The BM25, MiniLM and RRF baselines of section 5.5 run on the
same turns in the same command. The data set is read from ``--data`` and never
copied anywhere.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.bench.report import envelope, machine_line, percentile, print_table
from memstrata.errors import InvalidInput

__all__ = [
    "Question",
    "Turn",
    "aggregate",
    "append_turn",
    "default_data_path",
    "load",
    "normalise_evidence",
    "parse_session_time",
    "print_result",
    "rows",
    "run",
    "score_question",
]

KS = (1, 3, 5, 10, 20, 50)
SESSION_KS = (1, 3, 5)
BUDGET = 1024
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
HEADLINE_CATEGORIES = (1, 2, 3, 4)
_EVIDENCE = re.compile(r"^D:?(\d+):0*(\d+)$")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str  # as ingested: the turn text, plus " [shares image: caption]" when present
    caption: str | None
    raw: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def default_data_path() -> Path:
    """``../shared/bench/locomo-dev.json`` beside the repository (or the working directory)."""
    candidates = [
        Path.cwd().parent / "shared" / "bench" / "locomo-dev.json",
        Path(__file__).resolve().parents[4] / "shared" / "bench" / "locomo-dev.json",
    ]
    for path in candidates:
        if path.exists():
            return path
    return candidates[0]


def parse_session_time(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware datetime (UTC)."""
    text = " ".join(value.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise InvalidInput(f"cannot parse session time {value!r}")


def normalise_evidence(evidence: Iterable[Any], known: set[str]) -> tuple[str, ...]:
    """Section 5.1: split, strip brackets, accept ``D<s>:<t>`` forms, drop unknown ids."""
    out: list[str] = []
    for item in evidence:
        for piece in re.split(r"[;,\s]+", str(item)):
            m = _EVIDENCE.match(piece.strip("()"))
            if not m:
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia in known and dia not in out:
                out.append(dia)
    return tuple(out)


def _session_numbers(conv: Mapping[str, Any]) -> list[int]:
    nums = []
    for key, value in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list) and value:
            nums.append(int(m.group(1)))
    return sorted(nums)


def load(path: Path) -> list[Conversation]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(
            f"LoCoMo data not found at {path}; pass --data PATH", field="data"
        ) from None
    out: list[Conversation] = []
    for sample in raw:
        conv = sample["conversation"]
        c = Conversation(str(sample["sample_id"]))
        for n in _session_numbers(conv):
            when = parse_session_time(conv[f"session_{n}_date_time"])
            for turn in conv[f"session_{n}"]:
                caption = turn.get("blip_caption")
                text = turn["text"] + (f" [shares image: {caption}]" if caption else "")
                c.turns.append(
                    Turn(turn["dia_id"], n, turn["speaker"], text, caption, turn["text"], when)
                )
        known = {t.dia_id for t in c.turns}
        for qa in sample["qa"]:
            ev = normalise_evidence(qa.get("evidence", []), known)
            if ev:
                c.questions.append(Question(c.sample_id, qa["question"], int(qa["category"]), ev))
        out.append(c)
    return out


def append_turn(mem: Any, scope: Any, conversation_id: str, turn: Turn, **metadata: Any) -> Any:
    """Ingest one turn as protocol section 5.2 says: one user message per turn, at its
    session's time, the speaker, dia id and session in metadata (plus ``metadata``)."""
    return mem.messages.append(
        scope,
        conversation_id,
        role="user",
        content=turn.text,
        occurred_at=turn.occurred_at,
        metadata={
            "speaker": turn.speaker,
            "dia_id": turn.dia_id,
            "session": turn.session,
            **metadata,
        },
    )


# -- scoring ---------------------------------------------------------------------------------


def _session(dia: str) -> int:
    return int(dia[1:].split(":")[0])


def score_question(
    items: Sequence[tuple[Sequence[str], int]], evidence: Sequence[str]
) -> dict[str, float]:
    """Metrics of one question from its returned items: (provenance dia ids, tokens)."""
    e = set(evidence)
    ranked: list[str] = []
    seen: set[str] = set()
    first_k: dict[int, set[str]] = {}
    for n, (prov, _) in enumerate(items, start=1):
        for dia in prov:
            if dia not in seen:
                seen.add(dia)
                ranked.append(dia)
        for k in KS:
            if n == k:
                first_k[k] = set(seen)
    for k in KS:
        first_k.setdefault(k, set(seen))
    m: dict[str, float] = {}
    for k in KS:
        m[f"turn_recall@{k}"] = len(e & first_k[k]) / len(e)
    m["turn_all@10"] = float(e <= first_k[10])
    m["turn_any@10"] = float(bool(e & first_k[10]))
    dcg = sum(1 / math.log2(r + 1) for r, dia in enumerate(ranked[:10], start=1) if dia in e)
    idcg = sum(1 / math.log2(r + 1) for r in range(1, min(len(e), 10) + 1))
    m["ndcg@10"] = dcg / idcg
    sessions: list[int] = []
    for dia in ranked:
        s = _session(dia)
        if s not in sessions:
            sessions.append(s)
    wanted = {_session(d) for d in e}
    for k in SESSION_KS:
        m[f"sess_distinct@{k}"] = len(wanted & set(sessions[:k])) / len(wanted)
    taken: set[str] = set()
    used = 0
    for prov, tokens in items:
        if used + tokens > BUDGET:
            break
        used += tokens
        taken.update(prov)
    m[f"budget_recall@{BUDGET}"] = len(e & taken) / len(e)
    m["tokens@10"] = float(sum(t for _, t in items[:10]))
    return m


# -- baselines (section 5.5) -----------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")


def _baseline_text(t: Turn) -> str:
    text = f'{t.speaker} said, "{t.raw}"'
    return text + (f" and shared {t.caption}" if t.caption else "")


class _BM25:
    """Okapi BM25 (k1 1.5, b 0.75; the rank_bm25 IDF with its epsilon floor)."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tf = [Counter(_TOKEN.findall(d.lower())) for d in docs]
        self.len = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.len) / max(len(docs), 1)
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(docs)
        idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
        floor = 0.25 * (sum(idf.values()) / max(len(idf), 1))
        self.idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}

    def scores(self, query: str) -> list[float]:
        q = _TOKEN.findall(query.lower())
        out = []
        for tf, dl in zip(self.tf, self.len, strict=True):
            s = 0.0
            for w in q:
                f = tf.get(w, 0)
                if f:
                    s += (
                        self.idf[w]
                        * f
                        * (self.k1 + 1)
                        / (f + self.k1 * (1 - self.b + self.b * dl / self.avg))
                    )
            out.append(s)
        return out


def _order(scores: Sequence[float]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))  # stable on ties


def _rrf(*orders: Sequence[int], k: float = 60.0) -> list[int]:
    fused: dict[int, float] = defaultdict(float)
    for order in orders:
        for r, i in enumerate(order, start=1):
            fused[i] += 1 / (k + r)
    return sorted(fused, key=lambda i: (-fused[i], i))


# -- the run ---------------------------------------------------------------------------------


def aggregate(per_q: list[tuple[Question, dict[str, float]]]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q, m in per_q:
        groups[f"c{q.category}"].append(m)
        if q.category in HEADLINE_CATEGORIES:
            groups["cats1-4"].append(m)
    out: dict[str, dict[str, float]] = {}
    for name, ms in groups.items():
        keys = ms[0].keys()
        out[name] = {key: sum(m[key] for m in ms) / len(ms) for key in keys}
        out[name]["n"] = len(ms)
    return out


def rows(system: str, agg: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    order = ["cats1-4", "c4", "c1", "c2", "c3", "c5"]
    return [
        {"system": system, "group": g, **{k: round(v, 4) for k, v in agg[g].items()}}
        for g in order
        if g in agg
    ]


def run(
    *,
    data: Path | None = None,
    db: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
    baselines: bool = True,
    limit_conversations: int | None = None,
) -> dict[str, Any]:
    from memstrata import Memory, Scope
    from memstrata.config import Settings
    from memstrata.tokens import get_tokenizer

    path = data or default_data_path()
    convs = load(path)[:limit_conversations]
    tokenizer = get_tokenizer("o200k_base")
    per_q: list[tuple[Question, dict[str, float]]] = []
    search_ms: list[float] = []
    turn_ms: list[float] = []
    ingest_s = 0.0
    n_turns = 0
    base_per_q: dict[str, list[tuple[Question, dict[str, float]]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), worker="off", recall_embed="search")
        mem = Memory.open(db or f"sqlite:///{Path(tmp) / 'locomo.db'}", settings=settings)
        try:
            emb = mem.recall.embedder
            progress(f"embedder: {emb.identity if emb else 'none (keywords only)'}")
            for conv in convs:
                scope = Scope("locomo", f"{conv.sample_id}-{int(time.time() * 1000)}")
                c = mem.conversations.create(scope, title=conv.sample_id)
                dia_of: dict[str, str] = {}
                tokens_of: dict[str, int] = {}
                start = time.perf_counter()
                for t in conv.turns:
                    t0 = time.perf_counter()
                    msg = append_turn(mem, scope, c.id, t, conversation=conv.sample_id)
                    turn_ms.append((time.perf_counter() - t0) * 1000)
                    dia_of[msg.id] = t.dia_id
                    tokens_of[msg.id] = tokenizer.count_text(f"{t.speaker}: {t.text}")
                # Embedding is part of ingesting: timed with it.
                mem.recall.flush(scope)
                ingest_s += time.perf_counter() - start
                n_turns += len(conv.turns)
                progress(
                    f"{conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions"
                )
                for q in conv.questions:
                    t0 = time.perf_counter()
                    hits = mem.recall.search(scope, q.text, k=50)
                    search_ms.append((time.perf_counter() - t0) * 1000)
                    items = [
                        (
                            [dia_of[p] for p in h.provenance if p in dia_of],
                            tokens_of.get(h.message.id, 0),
                        )
                        for h in hits
                    ]
                    per_q.append((q, score_question(items, q.evidence)))
                if baselines:
                    for name, per in _baselines(conv, emb, tokenizer).items():
                        base_per_q[name] += per
        finally:
            mem.close()
    agg = aggregate(per_q)
    head = agg["cats1-4"]
    headline = {
        **{f"turn_recall@{k}": round(head[f"turn_recall@{k}"], 4) for k in (1, 5, 10, 20, 50)},
        "turn_all@10": round(head["turn_all@10"], 4),
        "ndcg@10": round(head["ndcg@10"], 4),
        "search_p50_ms": round(percentile(search_ms, 50), 2),
        "search_p95_ms": round(percentile(search_ms, 95), 2),
        "ingest_turns_per_s": round(n_turns / ingest_s, 1),
    }
    base_out: dict[str, Any] = {}
    for name, per in base_per_q.items():
        bagg = aggregate(per)
        base_out[name] = {
            "headline": {k: round(v, 4) for k, v in bagg["cats1-4"].items()},
            "rows": rows(name, bagg),
        }
    return envelope(
        "locomo",
        params={
            "data": path.name,
            "conversations": len(convs),
            "questions": len(per_q),
            "turns": n_turns,
            "ks": list(KS),
            "token_budget": BUDGET,
            "tokenizer": "o200k_base (one counter for every system)",
            "embedder": emb.identity if emb else None,
            "session_recall": "first k distinct sessions of the ranked turn list, fractional",
            "ingest_turn_p50_ms": round(percentile(turn_ms, 50), 3),
            "ingest_turn_p95_ms": round(percentile(turn_ms, 95), 3),
            "ingest_note": "turns/s includes embedding every turn (flush after each conversation)",
        },
        headline=headline,
        rows=rows("memstrata", agg),
        baselines=base_out,
    )


def _baselines(
    conv: Conversation, emb: Any, tokenizer: Any
) -> dict[str, list[tuple[Question, dict[str, float]]]]:
    docs = [_baseline_text(t) for t in conv.turns]
    dias = [t.dia_id for t in conv.turns]
    tokens = [tokenizer.count_text(f"{t.speaker}: {t.text}") for t in conv.turns]
    bm25 = _BM25(docs)
    out: dict[str, list[tuple[Question, dict[str, float]]]] = defaultdict(list)
    matrix = None
    if emb is not None:
        import numpy as np

        matrix = np.asarray(emb.embed(docs), dtype=np.float32)
        qmat = np.asarray(emb.embed([q.text for q in conv.questions]), dtype=np.float32)
    for n, q in enumerate(conv.questions):
        orders: dict[str, list[int]] = {"bm25": _order(bm25.scores(q.text))}
        if matrix is not None:
            orders["minilm"] = _order((matrix @ qmat[n]).tolist())
            orders["rrf"] = _rrf(orders["bm25"], orders["minilm"])
        for name, order in orders.items():
            items = [([dias[i]], tokens[i]) for i in order[:50]]
            out[name].append((q, score_question(items, q.evidence)))
    return out


_COLUMNS = [
    ("system", "system"),
    ("group", "group"),
    ("n", "n"),
    ("turn_recall@1", "R@1"),
    ("turn_recall@5", "R@5"),
    ("turn_recall@10", "R@10"),
    ("turn_recall@20", "R@20"),
    ("turn_recall@50", "R@50"),
    ("turn_all@10", "All@10"),
    ("ndcg@10", "nDCG@10"),
    ("sess_distinct@5", "Sess@5"),
    (f"budget_recall@{BUDGET}", f"R@{BUDGET}tok"),
]


def print_result(result: Mapping[str, Any], console: Console) -> None:
    shown = list(result["rows"])
    for base in result["baselines"].values():
        shown += [r for r in base["rows"] if r["group"] == "cats1-4"]
    h = result["headline"]
    print_table(
        "LoCoMo evidence retrieval (turn level; cats 1-4 headline, c5 apart)",
        _COLUMNS,
        shown,
        notes=[
            f"search p50 {h['search_p50_ms']} ms, p95 {h['search_p95_ms']} ms; "
            f"ingest {h['ingest_turns_per_s']} turns/s (with embedding)",
            machine_line(result["machine"]),
        ],
        console=console,
    )
