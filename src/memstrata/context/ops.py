"""Context assembly and rolling compaction (sans-IO).

One budget for everything. Tiers are granted tokens in priority order (default:
recent window, summary, facts, profile, working memory, plan, recall); each tier's
``minimum`` is reserved before higher tiers take the rest and its ``cap`` bounds it.
Items are whole: a turn is never split, a fact or a recalled message is in or out.
Every message of the active branch ends up in the window, covered by the summary
that is in the context, or in ``report.dropped`` with a reason.

A summary records the message it covers up to. It serves a leaf only when that
message is an ancestor of (or is) the leaf, checked on the stored tree, so a
branch that diverged before it never gets it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from memstrata.context.briefing import iteration_items, working_items
from memstrata.context.tiers import (
    BLOCK_TAGS,
    GROUP_CAPS,
    MESSAGE_ORDER,
    TierItem,
    TierPolicy,
    TierProvider,
    TierRequest,
    default_policies,
)
from memstrata.conversation.history import HistoryPlanner
from memstrata.conversation.ops import (
    _counter,
    _require_message,
    branch_chunk,
    get_conversation,
    hold_conversation,
    walk_branch,
)
from memstrata.conversation.render import to_openai
from memstrata.errors import InvalidInput, NotFound
from memstrata.runtime import Runtime
from memstrata.state.ops import find_plan
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros, to_message
from memstrata.tokens import Tokenizer, get_tokenizer
from memstrata.types import Message, Role, Scope, Status

__all__ = [
    "MIN_NEW_TOKENS",
    "CompactionPlan",
    "Context",
    "ContextReport",
    "Summary",
    "assemble",
    "context_window",
    "default_query",
    "finish_compaction",
    "forget_messages",
    "prepare_compaction",
    "record_compaction_failure",
]

MIN_NEW_TOKENS = 500  # n8n: do not compact fewer unsummarised tokens than this
DEFAULT_WINDOW = 20  # n8n's lastMessages
_DEFAULT_CONTEXT_WINDOW = 128_000
# Longest prefix wins (model names lowercased, any "org/" prefix removed).
_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini-1.5", 1_048_576),
    ("gemini-2", 1_048_576),
    ("llama-3", 128_000),
    ("mistral-large", 128_000),
)


def context_window(model: str | None) -> int:
    """The model's context window from a small table (prefix match), else 128k."""
    if not model:
        return _DEFAULT_CONTEXT_WINDOW
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = ("", _DEFAULT_CONTEXT_WINDOW)
    for prefix, size in _CONTEXT_WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best[0]):
            best = (prefix, size)
    return best[1]


# -- summaries -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    """A rolling summary of a branch, from its root up to and including ``up_to_id``."""

    id: str
    conversation_id: str
    up_to_id: str
    up_to_depth: int
    up_to_branch_tokens: int
    version: int
    previous_id: str | None
    content: str
    method: str
    created_at: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversation_id": self.conversation_id,
            "up_to_message_id": self.up_to_id,
            "up_to_depth": self.up_to_depth,
            "version": self.version,
            "previous_id": self.previous_id,
            "content": self.content,
            "method": self.method,
            "created_at": self.created_at.isoformat(),
        }


_SUMMARY_COLUMNS = (
    "id, conversation_id, up_to_id, up_to_depth, up_to_branch_tokens, version, previous_id, "
    "content, method, created_at"
)


def _to_summary(r: Sequence[Any]) -> Summary:
    return Summary(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], from_micros(r[9]))


def _ancestor_at(conversation_id: str, leaf_id: str, depth: int) -> Op[str | None]:
    """The id of the leaf's ancestor at ``depth`` (walks only leaf depth - ``depth`` rows)."""
    rows = yield Query(
        "WITH RECURSIVE b(id, parent_id, depth) AS ("
        " SELECT id, parent_id, depth FROM messages WHERE id = ? AND conversation_id = ?"
        " UNION ALL SELECT m.id, m.parent_id, m.depth FROM messages m JOIN b ON m.id = b.parent_id"
        " WHERE b.depth > ?) SELECT id FROM b WHERE depth = ?",
        (leaf_id, conversation_id, depth, depth),
    )
    return rows[0][0] if rows else None


def summary_for(conversation_id: str, leaf: Message, candidates: int = 8) -> Op[Summary | None]:
    """The deepest summary whose cover point lies on the leaf's branch."""
    rows = yield Query(
        f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? AND up_to_depth <= ? "
        "ORDER BY up_to_depth DESC, version DESC LIMIT ?",
        (conversation_id, leaf.depth, candidates),
    )
    for row in rows:
        s = _to_summary(row)
        if s.up_to_id == leaf.id:
            return s
        if (yield from _ancestor_at(conversation_id, leaf.id, s.up_to_depth)) == s.up_to_id:
            return s
    return None


# -- report ----------------------------------------------------------------------------------


@dataclass(slots=True)
class TierReport:
    asked: int = 0
    granted: int = 0
    items: int = 0
    # Why the tier is empty when it offered nothing usable (e.g. "below relevance floor").
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"asked": self.asked, "granted": self.granted, "items": self.items}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(slots=True)
class ContextReport:
    """What went into a context and what did not, and why.

    ``sum(t.granted for t in tiers.values()) == total`` and ``total`` is the token
    count of ``Context.messages`` (``Tokenizer.count_message`` per message);
    ``total <= budget`` unless the newest turn alone is over it (``newest_turn_over_budget``).
    """

    budget: int
    encoding: str
    leaf_id: str | None
    tiers: dict[str, TierReport]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    over_budget: bool = False
    newest_turn_over_budget: bool = False
    summary_id: str | None = None
    covered_up_to: str | None = None
    compaction_due: bool = False
    hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "total": self.total,
            "encoding": self.encoding,
            "leaf_id": self.leaf_id,
            "tiers": {k: v.to_dict() for k, v in self.tiers.items()},
            "dropped": self.dropped,
            "over_budget": self.over_budget,
            "newest_turn_over_budget": self.newest_turn_over_budget,
            "summary_id": self.summary_id,
            "covered_up_to": self.covered_up_to,
            "compaction_due": self.compaction_due,
            "hash": self.hash,
        }


@dataclass(frozen=True, slots=True)
class Context:
    """Messages ready for a chat-completion call, and the report on how they were chosen."""

    messages: list[dict[str, Any]]
    report: ContextReport
    window: list[Message]  # the recent window's stored messages, oldest first
    system: list[Message] = field(default_factory=list)  # the branch's leading system run

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "report": self.report.to_dict()}


# -- assembly --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    """Per-call knobs of assembly (from the memory's context kit)."""

    policies: Mapping[str, TierPolicy]
    providers: Sequence[TierProvider]
    window: int = DEFAULT_WINDOW
    threshold: float = 0.8


def _block(tier: str, items: Sequence[TierItem]) -> str:
    tag = BLOCK_TAGS[tier]
    return f"<{tag}>\n" + "".join(i.text + "\n" for i in items) + f"</{tag}>"


def _select(
    tier: str, items: Sequence[TierItem], allow: int, tok: Tokenizer, dropped: list[dict[str, Any]]
) -> tuple[list[TierItem], int]:
    """Whole items, best first, while the block fits ``allow``; returns them and the block cost."""
    overhead = tok.count_message(_block(tier, []))
    chosen: list[TierItem] = []
    used = overhead
    for item in items:
        if used + item.tokens <= allow:
            chosen.append(item)
            used += item.tokens
        else:
            dropped.append(_drop(tier, item, "over budget"))
    # Counted exactly on the final text; BPE across joins can differ from the item sums.
    while chosen:
        cost = tok.count_message(_block(tier, chosen))
        if cost <= allow:
            return chosen, cost
        dropped.append(_drop(tier, chosen.pop(), "over budget"))
    return [], 0


def _drop(tier: str, item: TierItem, reason: str) -> dict[str, Any]:
    return {
        "tier": tier,
        "id": item.id,
        "tokens": item.tokens,
        "reason": reason,
        "provenance": dict(item.provenance),
    }


def _system_run(conversation_id: str, leaf: Message, tail: str | None) -> Op[list[Message]]:
    if tail is None:
        return []
    rows = yield from branch_chunk(conversation_id, tail, leaf.depth + 1)
    return [to_message(r) for r in reversed(rows)]


def _window(
    rt: Runtime,
    conversation_id: str,
    leaf: Message,
    system: list[Message],
    floor_depth: int,
    max_tokens: int,
    tok: Tokenizer,
) -> Op[tuple[list[Message], int, bool]]:
    """The newest whole turns of the branch below ``floor_depth`` (exclusive) within
    ``max_tokens`` (system run included, always kept): the history walk of
    :func:`memstrata.conversation.ops.history`, stopped at the summary's cover point.

    Returns the kept messages (oldest first, system run first), their tokens and
    whether the newest turn alone was over the limit.
    """
    planner = HistoryPlanner(
        system=system, max_tokens=max_tokens, max_messages=1 << 40, count=_counter(rt, tok)
    )
    yield from walk_branch(rt, conversation_id, leaf, system, planner, tok, floor_depth=floor_depth)
    result = planner.result(leaf.id, tok.name, 0)
    return result.messages, result.tokens, result.over_budget


def _hash(blocks: Sequence[dict[str, Any]]) -> str:
    text = json.dumps(blocks, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _ask(items: Sequence[TierItem], tier: str, tok: Tokenizer) -> int:
    return tok.count_message(_block(tier, items)) if items else 0


@dataclass(slots=True)
class _Branch:
    leaf: Message | None = None
    tail: str | None = None
    system: list[Message] = field(default_factory=list)
    summary: Summary | None = None


def _branch(conversation_id: str, ref: str | None) -> Op[_Branch]:
    if ref is None:
        return _Branch()
    row = yield from _require_message(conversation_id, ref, "leaf")
    leaf = to_message(row)
    system = yield from _system_run(conversation_id, leaf, row[16])
    summary = yield from summary_for(conversation_id, leaf)
    return _Branch(leaf, row[16], system, summary)


def _item(id: str, text: str, tok: Tokenizer, **provenance: Any) -> TierItem:
    return TierItem(id, text, tok.count_text(text + "\n"), provenance)


def _offers(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    br: _Branch,
    settings: Settings,
    policies: Mapping[str, TierPolicy],
    budget: int,
    base: TierRequest,
    tok: Tokenizer,
    task: str | None = None,
) -> Op[dict[str, list[TierItem]]]:
    """What each tier other than the window (and the providers that run after it)
    asks for, best items first."""
    offered: dict[str, list[TierItem]] = {}
    if br.summary is not None:
        s = br.summary
        offered["summary"] = [_item(s.id, s.content, tok, up_to=s.up_to_id, version=s.version)]
    item = partial(_item, tok=tok)
    working = yield from working_items(scope, conversation_id, item)
    if working:
        offered["working"] = working
    if task is not None:
        attempts = yield from iteration_items(conversation_id, task, item)
        if attempts:
            offered["iterations"] = attempts
    plan = yield from find_plan(scope, conversation_id)
    if plan is not None:
        text = json.dumps(plan.document, ensure_ascii=False, indent=2, sort_keys=True)
        offered["plan"] = [_item("plan", text, tok, version=plan.version)]
    for provider in settings.providers:
        if not _after_window(provider):
            items = yield from _provide(rt, provider, base, policies, budget)
            offered.setdefault(provider.tier, []).extend(items)
    return offered


def _after_window(provider: TierProvider) -> bool:
    return bool(getattr(provider, "after_window", False))


def _provide(
    rt: Runtime,
    provider: TierProvider,
    base: TierRequest,
    policies: Mapping[str, TierPolicy],
    room: int,
    window_ids: frozenset[str] = frozenset(),
    window_from_depth: int | None = None,
) -> Op[list[TierItem]]:
    tier = provider.tier
    if tier not in BLOCK_TAGS or tier in ("summary", "working", "plan", "iterations"):
        raise InvalidInput(f"a provider cannot supply tier {tier!r}", field="tier")
    cap = policies[tier].cap if tier in policies else None
    allowance = room if cap is None else min(cap, room)
    request = replace(
        base,
        allowance=max(allowance, 0),
        window_ids=window_ids,
        window_from_depth=window_from_depth,
    )
    return (yield from provider.provide(rt, request))


def _base_request(
    scope: Scope,
    conversation_id: str,
    br: _Branch,
    query: str | None,
    tok: Tokenizer,
    query_vector: Sequence[float] | None,
    embedder: str | None,
) -> TierRequest:
    return TierRequest(
        scope=scope,
        conversation_id=conversation_id,
        leaf_id=None if br.leaf is None else br.leaf.id,
        leaf_depth=None if br.leaf is None else br.leaf.depth,
        query=query,
        allowance=0,
        tokenizer=tok,
        covered_depth=None if br.summary is None else br.summary.up_to_depth,
        query_vector=query_vector,
        embedder=embedder,
    )


def _newest_user_message(
    conversation_id: str, leaf: Message, limit: int = 256
) -> Op[Message | None]:
    """The newest complete user message on the branch (looks back at most ``limit``
    messages: a query is about the current turn, not a distant one)."""
    start: str | None = leaf.id
    seen, chunk = 0, 4
    while start is not None and seen < limit:
        rows = yield from branch_chunk(conversation_id, start, min(chunk, limit - seen))
        for m in map(to_message, rows):
            if m.role is Role.USER and m.status is Status.COMPLETE and m.content.strip():
                return m
        if not rows:
            break
        seen += len(rows)
        start = to_message(rows[-1]).parent_id
        chunk *= 4
    return None


def _newest_user_text(conversation_id: str, leaf: Message, limit: int = 256) -> Op[str | None]:
    found = yield from _newest_user_message(conversation_id, leaf, limit)
    return None if found is None else found.content


def default_query_message(
    scope: Scope, conversation_id: str, leaf_id: str | None = None
) -> Op[Message | None]:
    """The message whose content :func:`default_query` returns (recall reuses its vector)."""
    conv = yield from get_conversation(scope, conversation_id)
    ref = leaf_id or conv.active_leaf_id
    if ref is None:
        return None
    leaf = to_message((yield from _require_message(conversation_id, ref, "leaf")))
    return (yield from _newest_user_message(conversation_id, leaf))


def default_query(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[str | None]:
    """What the context of a branch is about when the caller gives no query: the
    newest user message on it (None for an empty conversation or no user message)."""
    found = yield from default_query_message(scope, conversation_id, leaf_id)
    return None if found is None else found.content


def _note_asks(
    offered: Mapping[str, list[TierItem]],
    tiers: dict[str, TierReport],
    policies: dict[str, TierPolicy],
    order: list[str],
    tok: Tokenizer,
) -> None:
    for name, items in offered.items():
        wanted = [i for i in items if not i.provenance.get("rejected")]
        tiers.setdefault(name, TierReport()).asked = _ask(wanted, name, tok)
        if name not in policies:  # a provider's tier with no policy goes last
            policies[name] = TierPolicy(len(policies))
            order.append(name)


def _reserve_late(
    late: Sequence[TierProvider],
    order: Sequence[str],
    policies: Mapping[str, TierPolicy],
    reserve: dict[str, int],
) -> None:
    """What the window leaves for the tiers whose providers run after it: their asks are
    unknown yet, so their minimum (their cap when they rank above the window)."""
    recent = order.index("recent")
    for provider in late:
        name = provider.tier
        if name not in policies:
            continue
        policy = policies[name]
        want = policy.minimum
        if order.index(name) < recent and policy.cap is not None:
            want = policy.cap
        reserve[name] = max(reserve.get(name, 0), want)


def _reserves(
    order: Sequence[str],
    policies: Mapping[str, TierPolicy],
    tiers: Mapping[str, TierReport],
    first: Mapping[str, int],
) -> dict[str, int]:
    """Tokens held back for each tier while the window is read: a tier ranked above the
    window keeps all it asks for (up to its cap), one below it its minimum, rounded up
    to its first whole item (``first``: the cost of a block holding just that item)."""
    out: dict[str, int] = {}
    above = True
    for name in order:
        if name == "recent":
            above = False
            continue
        asked = tiers[name].asked if name in tiers else 0
        cap = policies[name].cap
        minimum = policies[name].minimum
        floor = max(minimum, first.get(name, 0)) if minimum else 0
        want = asked if above else min(floor, asked)
        out[name] = want if cap is None else min(want, cap)
    return out


def _grant_window(
    rt: Runtime,
    conversation_id: str,
    br: _Branch,
    policies: Mapping[str, TierPolicy],
    reserve: Mapping[str, int],
    budget: int,
    tok: Tokenizer,
    report: ContextReport,
) -> Op[list[Message]]:
    assert br.leaf is not None
    tiers = report.tiers
    system_tokens = sum(_counter(rt, tok)(m) for m in br.system)
    allow = budget - system_tokens - sum(reserve.values())
    cap = policies["recent"].cap
    if cap is not None:
        allow = min(allow, cap)
    floor = 0 if br.summary is None else br.summary.up_to_depth + 1
    kept, used, over = yield from _window(
        rt, conversation_id, br.leaf, br.system, floor, system_tokens + max(allow, 0), tok
    )
    window = kept[len(br.system) :]
    tiers["system"].granted = tiers["system"].asked = system_tokens
    tiers["system"].items = len(br.system)
    tiers["recent"].granted = used - system_tokens
    tiers["recent"].items = len(window)
    base = (
        br.summary.up_to_branch_tokens
        if br.summary is not None
        else sum(m.token_count for m in br.system)
    )
    tiers["recent"].asked = br.leaf.branch_tokens - base
    report.newest_turn_over_budget = over
    _report_uncovered(report, br.leaf, br.system, window, br.summary)
    return window


def _window_from_depth(br: _Branch, window: Sequence[Message]) -> int | None:
    """Where the window starts on the branch (the leaf's depth + 1 when it is empty)."""
    if br.leaf is None:
        return None
    return window[0].depth if window else br.leaf.depth + 1


def _usable(
    name: str, items: Sequence[TierItem], taken: set[str], report: ContextReport
) -> list[TierItem]:
    """The items a tier may inject: rejected ones (a provider's verdict) and ones carried
    by an item already in the context (``covered_by``) go to the report instead."""
    out: list[TierItem] = []
    rejected = False
    for item in items:
        reason = item.provenance.get("rejected")
        if reason:
            rejected = True
            report.dropped.append(_drop(name, item, str(reason)))
        elif taken.intersection(item.provenance.get("covered_by", ())):
            report.dropped.append(_drop(name, item, "carried by an injected fact"))
        else:
            out.append(item)
    if rejected and not out:
        report.tiers[name].reason = next(
            str(i.provenance["rejected"]) for i in items if i.provenance.get("rejected")
        )
    return out


def _grant_tiers(
    order: Sequence[str],
    policies: Mapping[str, TierPolicy],
    offered: Mapping[str, list[TierItem]],
    reserve: dict[str, int],
    remaining: int,
    tok: Tokenizer,
    report: ContextReport,
) -> dict[str, list[TierItem]]:
    chosen: dict[str, list[TierItem]] = {}
    group_left = dict(GROUP_CAPS)
    taken: set[str] = set()
    for i, name in enumerate(order):
        reserve.pop(name, None)
        if name == "recent" or name not in offered:
            continue
        later = sum(reserve.get(n, 0) for n in order[i + 1 :])
        cap = policies[name].cap
        group = policies[name].group
        allow = remaining - later
        if cap is not None:
            allow = min(allow, cap)
        if group is not None and group in group_left:
            allow = min(allow, group_left[group])
        usable = _usable(name, offered[name], taken, report)
        items, cost = _select(name, usable, max(allow, 0), tok, report.dropped)
        taken.update(item.id for item in items)
        if items:
            chosen[name] = items
        if group is not None and group in group_left:
            group_left[group] -= cost
        report.tiers[name].granted = cost
        report.tiers[name].items = len(items)
        remaining -= cost
    return chosen


def assemble(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    settings: Settings,
    *,
    leaf_id: str | None = None,
    budget: int = 8000,
    query: str | None = None,
    model: str | None = None,
    query_vector: Sequence[float] | None = None,
    embedder: str | None = None,
    task: str | None = None,
) -> Op[Context]:
    """Assemble the context of a branch (see the module docstring).

    ``query_vector`` is ``query`` (or, when that is None, the newest user message on
    the branch) embedded by ``embedder`` before this transaction, for the providers
    that search by meaning. ``task`` turns on the ``iterations`` tier for that task.
    """
    if budget < 1:
        raise InvalidInput("budget must be >= 1", field="budget")
    if task is not None and (not task.strip() or len(task) > 200):
        raise InvalidInput("task must be 1 to 200 characters", field="task")
    tok = rt.tokenizer if model is None else get_tokenizer(model)
    if tok.name == rt.tokenizer.name:
        tok = rt.tokenizer
    policies = dict(default_policies())
    policies.update(settings.policies)
    order = sorted(policies, key=lambda n: policies[n].priority)
    conv = yield from get_conversation(scope, conversation_id)
    br = yield from _branch(conversation_id, leaf_id or conv.active_leaf_id)
    tiers: dict[str, TierReport] = {name: TierReport() for name in ("system", *order)}
    report = ContextReport(budget, tok.name, None if br.leaf is None else br.leaf.id, tiers)
    if query is None and settings.providers and br.leaf is not None:
        query = yield from _newest_user_text(conversation_id, br.leaf)
    asking = _base_request(scope, conversation_id, br, query, tok, query_vector, embedder)
    offered = yield from _offers(
        rt, scope, conversation_id, br, settings, policies, budget, asking, tok, task
    )
    _note_asks(offered, tiers, policies, order, tok)
    first = {n: tok.count_message(_block(n, items[:1])) for n, items in offered.items() if items}
    reserve = _reserves(order, policies, tiers, first)
    late = [p for p in settings.providers if _after_window(p)]
    _reserve_late(late, order, policies, reserve)
    window: list[Message] = []
    if br.leaf is not None:
        window = yield from _grant_window(
            rt, conversation_id, br, policies, reserve, budget, tok, report
        )
    remaining = budget - tiers["system"].granted - tiers["recent"].granted
    if late:
        in_context = frozenset(m.id for m in (*br.system, *window))
        from_depth = _window_from_depth(br, window)
        for provider in late:
            items = yield from _provide(
                rt, provider, asking, policies, remaining, in_context, from_depth
            )
            offered.setdefault(provider.tier, []).extend(items)
        _note_asks({p.tier: offered[p.tier] for p in late}, tiers, policies, order, tok)
    chosen = _grant_tiers(order, policies, offered, reserve, remaining, tok, report)
    _note_summary(report, br.summary, "summary" in chosen)
    messages, injected = _render(br.system, window, chosen)
    report.total = sum(t.granted for t in tiers.values())
    report.over_budget = report.total > budget
    report.hash = _hash(injected)
    if br.leaf is not None:
        # n8n's rule: compact once the uncovered branch passes 80 % of the smaller of the
        # model's window and the caller's budget, and it is longer than the window.
        base = 0 if br.summary is None else br.summary.up_to_branch_tokens
        uncovered = br.leaf.depth + 1 - (0 if br.summary is None else br.summary.up_to_depth + 1)
        threshold = settings.threshold * min(context_window(model), budget)
        report.compaction_due = (
            br.leaf.branch_tokens - base > threshold and uncovered > settings.window
        )
    return Context(messages, report, window, br.system)


def _note_summary(report: ContextReport, summary: Summary | None, used: bool) -> None:
    if summary is None:
        return
    if used:
        report.summary_id, report.covered_up_to = summary.id, summary.up_to_id
        return
    # The summary did not fit: what it covers is out of the context too.
    report.dropped.append(
        {
            "tier": "summary",
            "reason": "covered by a summary that did not fit the budget",
            "range": {"to_id": summary.up_to_id, "to_depth": summary.up_to_depth},
            "tokens": summary.up_to_branch_tokens,
        }
    )


def _render(
    system: list[Message], window: list[Message], chosen: Mapping[str, list[TierItem]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages in reading order, and the injected blocks among them (for the hash)."""
    messages: list[dict[str, Any]] = []
    injected: list[dict[str, Any]] = []
    for name in MESSAGE_ORDER:
        if name == "system":
            messages.extend(to_openai(system))
        elif name == "recent":
            messages.extend(to_openai(window))
        elif name in chosen:
            block = {"role": "system", "content": _block(name, chosen[name])}
            messages.append(block)
            injected.append(block)
    return messages, injected


def _report_uncovered(
    report: ContextReport,
    leaf: Message,
    system: list[Message],
    window: list[Message],
    summary: Summary | None,
) -> None:
    """Name the messages of the branch neither in the window nor under the summary."""
    start_depth = len(system) if summary is None else summary.up_to_depth + 1
    start_tokens = (
        sum(m.token_count for m in system) if summary is None else summary.up_to_branch_tokens
    )
    oldest = window[0] if window else None
    if oldest is None:
        end_depth, end_tokens, end_id = leaf.depth, leaf.branch_tokens, leaf.id
    else:
        end_depth = oldest.depth - 1
        end_tokens = oldest.branch_tokens - oldest.token_count
        end_id = oldest.parent_id or ""
    if end_depth >= start_depth and end_id:
        report.dropped.append(
            {
                "tier": "recent",
                "reason": "over budget"
                + ("" if summary is None else " (newer than the summary; compaction pending)"),
                "range": {"from_depth": start_depth, "to_depth": end_depth, "to_id": end_id},
                "messages": end_depth - start_depth + 1,
                "tokens": end_tokens - start_tokens,
            }
        )


# -- compaction ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction would cover; ``skip`` says why there is nothing to do."""

    conversation_id: str
    leaf_id: str | None
    previous: Summary | None
    messages: list[Message]
    skip: str | None = None

    @property
    def up_to(self) -> Message | None:
        return self.messages[-1] if self.messages else None


def prepare_compaction(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    leaf_id: str | None = None,
    window: int = DEFAULT_WINDOW,
    min_tokens: int = MIN_NEW_TOKENS,
) -> Op[CompactionPlan]:
    """The messages older than the last ``window`` that the current summary does not cover."""
    conv = yield from get_conversation(scope, conversation_id)
    ref = leaf_id or conv.active_leaf_id
    if ref is None:
        return CompactionPlan(conversation_id, None, None, [], "the conversation is empty")
    leaf = to_message((yield from _require_message(conversation_id, ref, "leaf")))
    previous = yield from summary_for(conversation_id, leaf)
    start = 0 if previous is None else previous.up_to_depth + 1
    if leaf.depth - start + 1 <= window:
        return CompactionPlan(
            conversation_id, leaf.id, previous, [], "nothing older than the window"
        )
    rows = yield from branch_chunk(conversation_id, leaf.id, leaf.depth - start + 1)
    path = [to_message(r) for r in reversed(rows)]
    body = path[: len(path) - window]
    # Never end the covered slice inside a turn: the window starts at a user message.
    while body and len(body) < len(path) and path[len(body)].role is not Role.USER:
        body.pop()
    body = [m for m in body if m.status is not Status.PENDING]
    new_tokens = sum(m.token_count for m in body)
    if new_tokens < min_tokens:
        return CompactionPlan(
            conversation_id, leaf.id, previous, [], f"only {new_tokens} new tokens (< {min_tokens})"
        )
    return CompactionPlan(conversation_id, leaf.id, previous, body)


def finish_compaction(
    rt: Runtime, scope: Scope, plan: CompactionPlan, content: str, method: str
) -> Op[Summary]:
    """Store the new summary (the caller validated it) and log the success."""
    # Held until commit, so a delete racing the compaction leaves no summary behind.
    yield from hold_conversation(scope, plan.conversation_id)
    up_to = plan.up_to
    assert up_to is not None
    yield from _require_message(plan.conversation_id, up_to.id)  # still there
    sid, now = rt.make_id(), rt.clock()
    prev = plan.previous
    yield Exec(
        f"INSERT INTO summaries ({_SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sid,
            plan.conversation_id,
            up_to.id,
            up_to.depth,
            up_to.branch_tokens,
            1 if prev is None else prev.version + 1,
            None if prev is None else prev.id,
            content,
            method,
            now,
        ),
    )
    yield from _log(plan.conversation_id, plan.leaf_id, "compacted", None, sid, now)
    rows = yield Query(f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE id = ?", (sid,))
    return _to_summary(rows[0])


def record_compaction_failure(
    rt: Runtime, scope: Scope, conversation_id: str, leaf_id: str | None, outcome: str, reason: str
) -> Op[None]:
    yield from hold_conversation(scope, conversation_id)
    yield from _log(conversation_id, leaf_id, outcome, reason[:2000], None, rt.clock())


def _log(
    cid: str, leaf_id: str | None, outcome: str, reason: str | None, sid: str | None, now: int
) -> Op[None]:
    yield Exec(
        "INSERT INTO compaction_log (conversation_id, leaf_id, outcome, reason, summary_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (cid, leaf_id, outcome, reason, sid, now),
    )


def compaction_log(scope: Scope, conversation_id: str, limit: int = 50) -> Op[list[dict[str, Any]]]:
    """The latest compaction attempts, newest first."""
    yield from get_conversation(scope, conversation_id)
    rows = yield Query(
        "SELECT seq, leaf_id, outcome, reason, summary_id, created_at FROM compaction_log "
        "WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?",
        (conversation_id, limit),
    )
    return [
        {
            "leaf_id": r[1],
            "outcome": r[2],
            "reason": r[3],
            "summary_id": r[4],
            "created_at": from_micros(r[5]).isoformat(),
        }
        for r in rows
    ]


def forget_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step for single deleted messages: a summary covering one of them (its cover
    point is the message or below it, and ``ids`` holds a whole subtree) is invalidated;
    the next compaction writes a new one from what remains."""
    marks = ", ".join("?" * len(ids))
    yield Exec(
        f"DELETE FROM summaries WHERE conversation_id = ? AND up_to_id IN ({marks})",
        (conversation_id, *ids),
    )


def get_summary(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[Summary]:
    """The summary that serves the leaf's branch (NotFound when none does)."""
    conv = yield from get_conversation(scope, conversation_id)
    ref = leaf_id or conv.active_leaf_id
    if ref is not None:
        leaf = to_message((yield from _require_message(conversation_id, ref, "leaf")))
        found = yield from summary_for(conversation_id, leaf)
        if found is not None:
            return found
    raise NotFound("no summary serves this branch", kind="summary")
