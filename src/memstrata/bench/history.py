"""``memstrata bench history``: append throughput and history latency on branched trees.

For each size a fresh store gets one conversation built through the public
Python API (:meth:`Memory.messages.append`, one durable transaction per
message): mostly linear user/assistant turns of 30-60 generated words, with
regenerated answers (sibling assistant messages) and edited questions (sibling
user messages, up to a few turns back) at a steady rate, so the tree has many
leaves at every depth. Then ``history(leaf_id=<random leaf>, max_tokens=2000)``
is called on leaves drawn from :meth:`Memory.messages.leaves`, timed one call at
a time. Nothing caches results between calls.

The question it answers (DESIGN.md "Performance targets"): does history stay
flat — p50 at 100k messages within 2x of 1k — and does append stay in the
thousands per second?
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.api import Memory
from memstrata.backends.registry import redact
from memstrata.bench.report import envelope, fmt, machine_line, ms, percentile, print_table
from memstrata.config import Settings
from memstrata.errors import InvalidInput
from memstrata.ids import new_id
from memstrata.types import Message, Scope

__all__ = ["DEFAULT_SIZES", "TextGenerator", "all_leaves", "build_tree", "print_result", "run"]

DEFAULT_SIZES = (1_000, 10_000, 100_000)
CALLS = 300
WARMUP = 30
MAX_TOKENS = 2000
SEED = 1729
WORDS_PER_MESSAGE = (30, 60)
REGENERATE_RATE = 0.05  # of turns: a new assistant answer beside the last one
EDIT_RATE = 0.05  # of turns: a new user question beside one of the last few
EDIT_MAX_TURNS_BACK = 4
TARGET_HISTORY_P50_MS = 0.5
TARGET_P50_RATIO = 2.0
TARGET_APPEND_PER_S = 5_000
MIN_SIZE, MAX_SIZE = 10, 10_000_000


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Function words carry English rhythm; content words carry variety. Written for this
# benchmark; only their lengths and mix matter (they set the tokens per message).
_GLUE = _words(
    "the a an and or but if so of to in on at for with from by about as into over "
    "after before than that this these those it its we you they he she i me my our "
    "your their is are was were be been have has had do does did can could will would "
    "should may might must not no just also very more most some any each every all "
    "then there here when where why how what which who"
)
_CONTENT = _words(
    "account address answer apple april area arrive article ask autumn balance bank "
    "basket battery beach begin believe bicycle bill blue board boat book borrow bottle "
    "branch bread breakfast bridge bright brother budget build bus button cabinet cake "
    "calendar call camera candle car card careful carry case castle cat chair change "
    "chapter cheap check cheese chicken child choose church city clean clear clock close "
    "cloud coat coffee cold collect color company compare computer cook copy corner "
    "country course cousin cover cream cup customer cut daily damage dance dark date "
    "daughter deliver desk dinner direct doctor document door draw dream dress drive "
    "early earth east easy edit egg engine enjoy enough evening exact example explain "
    "factory family farm fast father feature fence field file final find finish fire "
    "fish floor flower follow forest forget fork friday friend fruit full garden gate "
    "gentle gift glass gold grass green ground group guess guitar hair half hall hammer "
    "happy harbor health heavy help hill history holiday honest hotel hour house idea "
    "island jacket journey juice kitchen knife ladder lake lamp language large late "
    "learn lemon letter library light listen little local long lunch machine market "
    "meeting memory message middle minute mirror model monday money month morning "
    "mountain music narrow nature near network night north note number ocean office "
    "orange order paint paper parent park party pencil people pepper phone picture "
    "plan plant plate pocket policy potato print problem project public quick quiet "
    "radio rain reason record remember repair report result river road roof room rule "
    "salad sample school science season second seed sell send service shelf ship shoe "
    "short signal silver simple sister small smile snow soft song south space spring "
    "square station stone story street student summer sunday table teacher team ticket "
    "today tomorrow tool tower town train travel tree trip truck tuesday umbrella "
    "uncle update useful valley village visit voice wall warm watch water weather week "
    "west window winter wood word world write yellow yesterday young"
)


class TextGenerator:
    """Deterministic English-like messages from a seeded RNG (no dataset is read)."""

    def __init__(self, rng: random.Random, words: tuple[int, int] = WORDS_PER_MESSAGE) -> None:
        self._rng = rng
        self._low, self._high = words

    def _sentence(self, n: int) -> str:
        r = self._rng
        words = [r.choice(_GLUE) if r.random() < 0.45 else r.choice(_CONTENT) for _ in range(n)]
        if r.random() < 0.08:
            words[r.randrange(1, n)] = str(r.randint(2, 2050))
        if n > 6 and r.random() < 0.3:
            words[r.randrange(2, n - 1)] += ","
        end = "?" if r.random() < 0.15 else ("!" if r.random() < 0.05 else ".")
        return words[0].capitalize() + " " + " ".join(words[1:]) + end

    def message(self) -> str:
        remaining = self._rng.randint(self._low, self._high)
        sentences: list[str] = []
        while remaining > 0:
            n = min(remaining, self._rng.randint(6, 16))
            if remaining - n < 3:  # no one- or two-word tail sentence
                n = remaining
            sentences.append(self._sentence(n))
            remaining -= n
        return " ".join(sentences)


@dataclass(slots=True)
class _Turn:
    user_id: str
    user_parent: str | None
    assistant_id: str | None = None


@dataclass(slots=True)
class _Build:
    messages: int
    turns: int
    regenerations: int
    edits: int
    roots: int
    leaf_ids: set[str]
    wall_ns: int
    append_ns: list[int]


def build_tree(
    mem: Memory, scope: Scope, cid: str, size: int, texts: Sequence[str], rng: random.Random
) -> _Build:
    """Append ``size`` messages as a branched tree; the branch choices come from ``rng``."""
    turns: list[_Turn] = []  # the current branch, oldest first (only the tail matters)
    leaves: set[str] = set()
    append_ns: list[int] = []
    count = regens = edits = n_turns = 0
    roots = 1
    clock = time.perf_counter_ns

    def append(role: str, parent: str | None, *, explicit: bool) -> str:
        nonlocal count
        text = texts[count]
        t0 = clock()
        if explicit:
            m = mem.messages.append(scope, cid, role=role, content=text, parent_id=parent)
        else:  # parent omitted: after the active leaf, the everyday path
            m = mem.messages.append(scope, cid, role=role, content=text)
        append_ns.append(clock() - t0)
        count += 1
        if parent is not None:
            leaves.discard(parent)
        leaves.add(m.id)
        return m.id

    start = clock()
    while count < size:
        roll = rng.random()
        last = turns[-1] if turns else None
        if last is not None and last.assistant_id is not None and roll < REGENERATE_RATE:
            # Regenerate: a sibling answer to the last question; the old answer stays a leaf.
            last.assistant_id = append("assistant", last.user_id, explicit=True)
            regens += 1
            continue
        if turns and roll < REGENERATE_RATE + EDIT_RATE:
            # Edit one of the last few questions: a sibling user message; the abandoned
            # turns after it stay in the tree as a side branch ending in a leaf.
            back = rng.randint(1, min(EDIT_MAX_TURNS_BACK, len(turns)))
            parent = turns[-back].user_parent
            del turns[-back:]
            user = append("user", parent, explicit=True)
            roots += parent is None
            edits += 1
        else:
            parent = turns[-1].assistant_id if turns else None
            user = append("user", parent, explicit=False)
        turn = _Turn(user, parent)
        turns.append(turn)
        n_turns += 1
        del turns[: -EDIT_MAX_TURNS_BACK - 1]
        if count < size:
            turn.assistant_id = append("assistant", user, explicit=False)
    wall = clock() - start
    return _Build(count, n_turns, regens, edits, roots, leaves, wall, append_ns)


def all_leaves(mem: Memory, scope: Scope, cid: str) -> list[Message]:
    limit = mem.admin.runtime.limits.max_page_size
    leaves: list[Message] = []
    cursor: str | None = None
    while True:
        page = mem.messages.leaves(scope, cid, limit=limit, cursor=cursor)
        leaves.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return leaves


def _store_bytes(location: str) -> int | None:
    if location == ":memory:":
        return None
    total = 0
    for suffix in ("", "-wal"):
        p = Path(location + suffix)
        if p.exists():
            total += p.stat().st_size
    return total


def _one_size(
    size: int,
    *,
    url: str,
    scope: Scope,
    calls: int,
    warmup: int,
    max_tokens: int,
    seed: int,
    shared_db: bool,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    rng = random.Random(f"{seed}:{size}")
    gen = TextGenerator(rng)
    # Texts are made before the clock starts, so only appends are timed.
    texts = [gen.message() for _ in range(size)]
    # The core append is measured without the recall index (DESIGN.md: recall indexing
    # is measured separately); the indexed rate is measured beside it below.
    mem = Memory.open(url, settings=_settings(recall_index=False))
    try:
        synchronous = mem.admin.settings.sqlite_synchronous
        conv = mem.conversations.create(scope, title=f"history bench {size}")
        progress(f"history: appending {size:,} messages")
        built = build_tree(mem, scope, conv.id, size, texts, rng)

        t0 = time.perf_counter_ns()
        leaves = all_leaves(mem, scope, conv.id)
        scan_ns = time.perf_counter_ns() - t0
        if {m.id for m in leaves} != built.leaf_ids:
            raise RuntimeError(
                f"messages.leaves returned {len(leaves)} leaves, the build made "
                f"{len(built.leaf_ids)}: the benchmark would measure the wrong tree"
            )

        progress(f"history: {warmup + calls} calls on {len(leaves):,} leaves")
        pick = random.Random(f"{seed}:{size}:leaves")
        times: list[int] = []
        returned: list[int] = []
        tokens: list[int] = []
        rows_read: list[int] = []
        depths: list[int] = []
        for i in range(warmup + calls):
            leaf = pick.choice(leaves)
            t1 = time.perf_counter_ns()
            h = mem.history(scope, conv.id, leaf_id=leaf.id, max_tokens=max_tokens)
            elapsed = time.perf_counter_ns() - t1
            if h.leaf_id != leaf.id or not h.messages or h.messages[-1].id != leaf.id:
                raise RuntimeError(f"history of leaf {leaf.id} does not end at that leaf")
            if i < warmup:
                continue
            times.append(elapsed)
            returned.append(len(h.messages))
            tokens.append(h.tokens)
            rows_read.append(h.rows_read)
            depths.append(leaf.depth)
        location = mem.admin.location
        if shared_db:
            mem.users.delete(scope)  # leave someone else's database as we found it
    finally:
        mem.close()

    sample = texts[:INDEXED_SAMPLE]
    # Each sample column is the median of SAMPLE_ROUNDS runs, taken in turn, so that one
    # disturbed second (a checkpoint, another process) does not decide a column, and the
    # store grows alike under all three. The same 2,000 appends with nothing on are the
    # baseline of the two columns beside it. Long-term capture runs with recall off, to
    # isolate it: each captured message queues or pushes back its conversation's debounced
    # extraction job; no extraction runs here.
    runs: dict[str, list[float]] = {"indexed": [], "sample": [], "capture": []}
    for _ in range(SAMPLE_ROUNDS):
        for name, settings in (
            ("indexed", {"recall_index": True}),
            ("sample", {"recall_index": False}),
            ("capture", {"recall_index": False, "longterm_capture": True}),
        ):
            rng = random.Random(f"{seed}:{size}:indexed")
            runs[name].append(_append_rate(url, scope, sample, rng, shared_db, **settings))
    indexed_per_s, sample_per_s, capture_per_s = (
        statistics.median(runs[name]) for name in ("indexed", "sample", "capture")
    )
    append_ns = built.append_ns
    return {
        "size": size,
        "messages": built.messages,
        "turns": built.turns,
        "regenerations": built.regenerations,
        "edits": built.edits,
        "roots": built.roots,
        "leaves": len(leaves),
        "max_depth": max(m.depth for m in leaves),
        "append_s": round(built.wall_ns / 1e9, 3),
        "append_per_s": round(built.messages / (built.wall_ns / 1e9), 1),
        "append_sample_per_s": sample_per_s,
        "append_indexed_per_s": indexed_per_s,
        "append_capture_per_s": capture_per_s,
        "append_p50_ms": ms(percentile(append_ns, 50)),
        "append_p99_ms": ms(percentile(append_ns, 99)),
        "leaves_scan_ms": ms(scan_ns),
        "history_calls": len(times),
        "history_p50_ms": ms(percentile(times, 50)),
        "history_p95_ms": ms(percentile(times, 95)),
        "history_p99_ms": ms(percentile(times, 99)),
        "history_mean_ms": ms(sum(times) / len(times)),
        "history_max_ms": ms(max(times)),
        "mean_leaf_depth": round(sum(depths) / len(depths), 1),
        "mean_messages": round(sum(returned) / len(returned), 2),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "mean_rows_read": round(sum(rows_read) / len(rows_read), 2),
        "max_rows_read": max(rows_read),
        "store_bytes": _store_bytes(location),
        "sqlite_synchronous": synchronous,
    }


INDEXED_SAMPLE = 2_000
#: Runs of the sample, per column (the median is reported).
SAMPLE_ROUNDS = 3


def _settings(**update: Any) -> Settings:
    return Settings().model_copy(update={"worker": "off", **update})


def _append_rate(
    url: str,
    scope: Scope,
    texts: Sequence[str],
    rng: random.Random,
    shared_db: bool,
    **settings: Any,
) -> float:
    """Appends per second with ``settings`` on: the recall keyword index (written in each
    append's transaction; embedding happens later) or long-term capture."""
    mem = Memory.open(url, settings=_settings(**settings))
    try:
        conv = mem.conversations.create(scope, title=f"history bench, appends with {settings}")
        built = build_tree(mem, scope, conv.id, len(texts), texts, rng)
        if shared_db:
            mem.users.delete(scope)  # leave someone else's database as we found it
    finally:
        mem.close()
    return round(built.messages / (built.wall_ns / 1e9), 1)


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    if not sizes:
        raise InvalidInput("give at least one size", field="sizes")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or not MIN_SIZE <= s <= MAX_SIZE:
            raise InvalidInput(
                f"sizes must be whole numbers from {MIN_SIZE} to {MAX_SIZE:,}, got {s!r}",
                field="sizes",
            )
    return list(sizes)


def run(
    *,
    db: str | None = None,
    sizes: Sequence[int] | None = None,
    calls: int = CALLS,
    warmup: int = WARMUP,
    max_tokens: int = MAX_TOKENS,
    seed: int = SEED,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the benchmark and return its JSON envelope (nothing printed but ``progress``)."""
    chosen = _check_sizes(list(sizes) if sizes is not None else list(DEFAULT_SIZES))
    if calls < 1 or warmup < 0:
        raise InvalidInput("calls must be >= 1 and warmup >= 0", field="calls")
    run_id = new_id()
    rows: list[dict[str, Any]] = []
    for size in chosen:
        common: dict[str, Any] = {
            "calls": calls,
            "warmup": warmup,
            "max_tokens": max_tokens,
            "seed": seed,
            "progress": progress,
        }
        if db is None:
            # A fresh file per size: each size is measured on a store holding only itself.
            with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as tmp:
                url = f"sqlite:///{(Path(tmp) / 'history.db').as_posix()}"
                scope = Scope("bench", "history")
                rows.append(_one_size(size, url=url, scope=scope, shared_db=False, **common))
        else:
            # A fresh tenant per run, so reruns against the same database never collide.
            scope = Scope(f"bench-{run_id}", f"history-{size}")
            rows.append(_one_size(size, url=db, scope=scope, shared_db=True, **common))

    smallest = min(rows, key=lambda r: r["size"])
    largest = max(rows, key=lambda r: r["size"])
    ratio = largest["history_p50_ms"] / smallest["history_p50_ms"]
    headline: dict[str, Any] = {
        "append_per_s": largest["append_per_s"],
        "append_capture_per_s": largest["append_capture_per_s"],
        "history_p50_ms": {str(r["size"]): r["history_p50_ms"] for r in rows},
        "history_p95_ms": {str(r["size"]): r["history_p95_ms"] for r in rows},
        "p50_ratio_largest_vs_smallest": round(ratio, 3),
        "p50_within_2x": ratio <= TARGET_P50_RATIO,
        "meets_history_p50_target": all(r["history_p50_ms"] <= TARGET_HISTORY_P50_MS for r in rows),
        "meets_append_target": all(r["append_per_s"] >= TARGET_APPEND_PER_S for r in rows),
    }
    if db is not None and not db.startswith("sqlite"):
        # Those two targets are the embedded SQLite default's; do not claim them here.
        headline["meets_history_p50_target"] = None
        headline["meets_append_target"] = None
    params: dict[str, Any] = {
        "sizes": chosen,
        "calls": calls,
        "warmup": warmup,
        "max_tokens": max_tokens,
        "seed": seed,
        "db": "sqlite (a temporary file per size)" if db is None else redact(db),
        "db_kind": "sqlite" if db is None else db.split(":", 1)[0].lower(),
        "tenant": None if db is None else f"bench-{run_id}",
        "sqlite_synchronous": rows[0]["sqlite_synchronous"],
        "words_per_message": list(WORDS_PER_MESSAGE),
        "regenerate_rate": REGENERATE_RATE,
        "edit_rate": EDIT_RATE,
        "edit_max_turns_back": EDIT_MAX_TURNS_BACK,
        "leaf_choice": "uniform over all leaves (messages.leaves, every page)",
        "result_cache": False,
        "targets": {
            "history_p50_ms": TARGET_HISTORY_P50_MS,
            "p50_ratio_largest_vs_smallest": TARGET_P50_RATIO,
            "append_per_s": TARGET_APPEND_PER_S,
        },
    }
    return envelope("history", params=params, headline=headline, rows=rows)


_COLUMNS = (
    ("messages", "messages"),
    ("leaves", "leaves"),
    ("append_per_s", "append\n/s"),
    ("append_sample_per_s", "2k sample\nappend /s"),
    ("append_indexed_per_s", "sample /s\n+recall idx"),
    ("append_capture_per_s", "sample /s\n+capture"),
    ("history_p50_ms", "history\np50 ms"),
    ("history_p95_ms", "history\np95 ms"),
    ("history_p99_ms", "history\np99 ms"),
    ("mean_messages", "msgs\n/call"),
    ("mean_tokens", "tokens\n/call"),
    ("rows_read", "rows read\nmean/max"),
    ("store_mb", "store\nMB"),
)


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    rows = [
        {
            **r,
            "rows_read": f"{fmt(r['mean_rows_read'])} / {fmt(r['max_rows_read'])}",
            "store_mb": None if r["store_bytes"] is None else r["store_bytes"] / 2**20,
        }
        for r in result["rows"]
    ]
    h = result["headline"]
    p = result["params"]
    notes = [
        machine_line(result["machine"]),
        f"history: {p['calls']} calls per size on random leaves, max_tokens={p['max_tokens']}, "
        f"no result cache; p50 ratio largest/smallest = {fmt(h['p50_ratio_largest_vs_smallest'])}"
        f" ({'within' if h['p50_within_2x'] else 'NOT within'} 2x)",
    ]
    if p["db_kind"] == "sqlite":
        notes.append(
            f"SQLite targets: history p50 <= {TARGET_HISTORY_P50_MS} ms "
            f"({'met' if h['meets_history_p50_target'] else 'missed'}), append >= "
            f"{TARGET_APPEND_PER_S:,}/s ({'met' if h['meets_append_target'] else 'missed'}), "
            f"synchronous={p['sqlite_synchronous']}"
        )
    else:  # the absolute targets are the embedded default's; other backends show flatness
        notes.append(
            f"{p['db_kind']}: the absolute targets apply to SQLite; the 2x flatness applies here"
        )
    print_table("memstrata bench history", _COLUMNS, rows, notes=notes, console=console)
