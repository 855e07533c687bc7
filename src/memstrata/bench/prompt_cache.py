"""``memstrata bench prompt-cache``: how much of each turn's prompt a provider can cache.

Providers bill a prompt's leading part at a fraction of the input price when it is
byte-identical to an earlier request's (and skip its prefill). This replays long
conversations one context per turn and measures, per turn, the *cacheable share*: the
longest common prefix with the previous turn's prompt, in tokens (whole messages, each
counted as the context report counts it), over the prompt's tokens.

The chats are LoCoMo-format conversations (``--data``: the first half of each one is the
user's earlier conversation, for recall to find, and the next turns are replayed, every
turn a user message in order) or, without data, generated ones; each user message gets a
generated assistant reply of about 80 tokens. The user has a few facts, and the recall
tier is on (the default embedder, or keywords alone). No worker thread runs: the jobs a
context queues (compaction, with the extractive summarizer) run right after it, as a
prompt worker would. Each
budget (2000 and 8000) is replayed under both layouts (``classic``, ``cache``) in the
same run. Turns where the window stepped forward or a new summary came in are counted
apart: those are the turns a stable prefix is expected to change.

Input cost relative to no caching (``cost@0.1``, ``cost@0.5``): cached tokens billed at
0.1x (Anthropic's price of a cache read) or 0.5x (OpenAI's cached input on many models)
of the normal input price, the rest at 1x. Anthropic's cache writes (1.25x for the
five-minute cache) and both providers' minimum cacheable length (1024 tokens on most
models) are left out.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.bench.history import TextGenerator
from memstrata.bench.report import envelope, machine_line, print_table

__all__ = ["BUDGETS", "LAYOUTS", "cacheable_prefix", "print_result", "run", "summarise"]

BUDGETS = (2000, 8000)
LAYOUTS = ("classic", "cache")
TURNS = 120  # user turns replayed per conversation
CONVERSATIONS = 2
REPLY_WORDS = (50, 70)  # about 80 tokens
SEED = 29
PRICE_RATIOS = (0.1, 0.5)
_FACTS = (
    ("Prefers short answers with examples.", "preference"),
    ("Works as a nurse and studies art in the evenings.", "context"),
    ("Is training for a half marathon in the spring.", "goal"),
    ("Has two cats named Miso and Pepper.", "knowledge"),
)


def cacheable_prefix(
    previous: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]],
    tokens: Sequence[int],
) -> int:
    """Tokens of the leading whole messages of ``current`` equal to ``previous``'s (pure)."""
    shared = 0
    for old, new, n in zip(previous, current, tokens, strict=False):
        if old != new:
            break
        shared += n
    return shared


def summarise(turns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean and minimum share, zero turns, and the cost ratios of one replay (pure)."""
    measured = [t for t in turns if t["previous"]]  # the first turn has nothing to repeat
    shares = [t["share"] for t in measured]
    events = [t for t in measured if t["event"]]
    zeros = [t for t in measured if t["share"] == 0.0]
    total = sum(t["tokens"] for t in measured) or 1
    cached = sum(t["cached"] for t in measured)
    out: dict[str, Any] = {
        "turns": len(measured),
        "mean_share": round(sum(shares) / max(len(shares), 1), 4),
        "min_share": round(min(shares, default=0.0), 4),
        "zero_turns": len(zeros),
        "zero_turns_off_event": sum(1 for t in zeros if not t["event"]),
        "event_turns": len(events),
        "event_share_of_turns": round(len(events) / max(len(measured), 1), 4),
        "mean_prompt_tokens": round(total / max(len(measured), 1), 1),
    }
    for r in PRICE_RATIOS:
        out[f"cost@{r}"] = round((total - cached + r * cached) / total, 4)
    return out


def _chats(data: Path | None, rng: random.Random) -> list[tuple[list[str], list[str]]]:
    """(the user's earlier conversation, the chat replayed) per conversation."""
    if data is None:
        gen = TextGenerator(rng, (8, 30))
        return [
            ([gen.message() for _ in range(TURNS)], [gen.message() for _ in range(TURNS)])
            for _ in range(CONVERSATIONS)
        ]
    from memstrata.bench.locomo import load

    out: list[tuple[list[str], list[str]]] = []
    for c in load(data)[:CONVERSATIONS]:
        texts = [t.text for t in c.turns]
        half = min(len(texts) // 2, len(texts) - TURNS) if len(texts) > TURNS else len(texts) // 2
        out.append((texts[:half], texts[half : half + TURNS]))
    return out


def _earlier(mem: Any, scope: Any, texts: Sequence[str]) -> None:
    conv = mem.conversations.create(scope, title="earlier")
    for text in texts:
        mem.messages.append(scope, conv.id, role="user", content=text)
    mem.recall.flush(scope)


def _replay(
    mem: Any, scope: Any, chat: Sequence[str], budget: int, layout: str, replies: TextGenerator
) -> list[dict[str, Any]]:
    from memstrata.context import COMPACT_JOB

    conv = mem.conversations.create(scope, title=f"{layout}-{budget}")
    mem.messages.append(scope, conv.id, role="system", content="You are a helpful assistant.")
    tok = mem.admin.runtime.tokenizer
    previous: list[dict[str, Any]] = []
    summary: str | None = None
    start: str | None = None
    turns: list[dict[str, Any]] = []
    for text in chat:
        mem.messages.append(scope, conv.id, role="user", content=text)
        mem.recall.flush(scope)  # what a worker does between turns: index the new messages
        ctx = mem.context(scope, conv.id, budget=budget, layout=layout)
        tokens = [tok.count_message(m["content"]) for m in ctx.messages]
        cached = cacheable_prefix(previous, ctx.messages, tokens)
        total = sum(tokens)
        first = ctx.window[0].id if ctx.window else None
        event = ""
        if previous and ctx.report.summary_id != summary:
            event = "compaction"
        elif previous and start is not None and first != start:
            event = "step"
        turns.append(
            {
                "tokens": total,
                "cached": cached,
                "share": round(cached / total, 4) if total else 0.0,
                "reported": ctx.report.cache.prefix_tokens,
                "previous": bool(previous),
                "event": event,
            }
        )
        previous, summary, start = list(ctx.messages), ctx.report.summary_id, first
        mem.jobs.run_pending([COMPACT_JOB])  # a compaction the context queued, if any
        mem.messages.append(scope, conv.id, role="assistant", content=replies.message())
    return turns


def run(
    *,
    data: Path | None = None,
    db: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
    budgets: Sequence[int] = BUDGETS,
    layouts: Sequence[str] = LAYOUTS,
    low_water: float | None = None,
    volatile_room: float | None = None,
) -> dict[str, Any]:
    """Replay the chats at each budget under each layout. ``low_water`` and
    ``volatile_room`` replace the memory's defaults (the window's low-water mark and the
    share of the budget the per-turn tiers keep; 0 leaves them out), for finding what a
    layout can reach at most (``scripts/prompt_cache_ceiling.py``)."""
    from memstrata import Memory, Scope
    from memstrata.config import Settings

    rng = random.Random(SEED)
    chats = _chats(data, rng)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), worker="off", recall_embed="search")
        mem = Memory.open(db or f"sqlite:///{Path(tmp) / 'cache.db'}", settings=settings)
        kit = mem.compaction.kit
        kit.debounce_s = kit.max_wait_s = 0.0  # ready at once
        if low_water is not None:
            kit.low_water = low_water
        if volatile_room is not None:
            kit.volatile_room = volatile_room
        try:
            for budget in budgets:
                for layout in layouts:
                    turns: list[dict[str, Any]] = []
                    for i, (earlier, chat) in enumerate(chats):
                        scope = Scope("prompt-cache", f"{layout}-{budget}-{i}")
                        _earlier(mem, scope, earlier)
                        for content, category in _FACTS:
                            mem.facts.add(scope, content, category=category)
                        replies = TextGenerator(random.Random(f"{SEED}:{i}"), REPLY_WORDS)
                        turns += _replay(mem, scope, chat, budget, layout, replies)
                    row = {"budget": budget, "layout": layout, **summarise(turns)}
                    row["reported_matches"] = all(t["reported"] == t["cached"] for t in turns)
                    rows.append(row)
                    progress(f"budget {budget}, {layout}: mean share {row['mean_share']}")
        finally:
            mem.close()
    headline = {f"mean_share@{r['budget']}:{r['layout']}": r["mean_share"] for r in rows} | {
        f"cost@0.1@{r['budget']}:{r['layout']}": r["cost@0.1"] for r in rows
    }
    return envelope(
        "prompt-cache",
        params={
            "data": data.name if data else "generated",
            "conversations": len(chats),
            "turns_per_conversation": max((len(c) for _, c in chats), default=0),
            "budgets": list(budgets),
            "layouts": list(layouts),
            "low_water": kit.low_water,
            "volatile_room": kit.volatile_room,
            "share": "longest common prefix with the previous turn's prompt (whole messages, "
            "in tokens) over the prompt's tokens",
            "price_ratios": {
                "0.1": "Anthropic: cache reads are billed at 0.1x the base input price",
                "0.5": "OpenAI: cached input at 50% of the input price on many models",
            },
        },
        headline=headline,
        rows=rows,
    )


_COLUMNS = [
    ("budget", "budget"),
    ("layout", "layout"),
    ("turns", "turns"),
    ("mean_share", "mean share"),
    ("min_share", "min share"),
    ("zero_turns", "turns at 0"),
    ("zero_turns_off_event", "at 0 off step"),
    ("event_share_of_turns", "step/compaction turns"),
    ("mean_prompt_tokens", "prompt tokens"),
    ("cost@0.1", "cost @0.1x"),
    ("cost@0.5", "cost @0.5x"),
]


def print_result(result: Mapping[str, Any], console: Console) -> None:
    print_table(
        "Prompt cache: share of each turn's prompt repeating the previous one, and input cost "
        "relative to no caching",
        _COLUMNS,
        result["rows"],
        notes=[machine_line(result["machine"])],
        console=console,
    )
