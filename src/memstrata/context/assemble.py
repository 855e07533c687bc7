"""Context assembly (sans-IO): one branch's messages and the tiers' items under one
token budget (the arithmetic is :class:`memstrata.context.budget.Budget`'s).

Every message of the active branch ends up in the window, covered by the summary
that is in the context, or in ``report.dropped`` with a reason.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memstrata.context.budget import Budget
from memstrata.context.compaction import MIN_NEW_TOKENS
from memstrata.context.layout import (
    DEFAULT_LAYOUT,
    VOLATILE_TIERS,
    Layout,
    check_layout,
    newest_turn_start,
    render,
)
from memstrata.context.prefix import fingerprint
from memstrata.context.summaries import Summary, summary_for
from memstrata.context.tiers import BLOCK_TAGS, TierItem, TierPolicy, TierProvider, TierRequest
from memstrata.context.windows import (
    COMPACT_AT,
    DEFAULT_LOW_WATER,
    DEFAULT_VOLATILE_ROOM,
    DEFAULT_WINDOW,
    RECALL_ROOM_MAX,
    context_window,
    step_size,
    step_start,
)
from memstrata.conversation.branch import (
    Leaf,
    branch_chunk,
    open_branch,
    resolve_leaf,
    token_counter,
    tokenizer_for,
    walk_branch,
)
from memstrata.conversation.history import HistoryPlanner
from memstrata.domain.context import Context
from memstrata.errors import InvalidInput
from memstrata.runtime import Runtime
from memstrata.sealing import digest_key
from memstrata.storage.plan import Op
from memstrata.storage.records import to_message
from memstrata.tokens import Tokenizer
from memstrata.types import Message, Role, Scope, Status

__all__ = ["Settings", "assemble", "default_query"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Per-call knobs of assembly (from the memory's context kit)."""

    policies: Mapping[str, TierPolicy]
    providers: Sequence[TierProvider]
    window: int = DEFAULT_WINDOW
    threshold: float = 0.8
    layout: Layout = DEFAULT_LAYOUT
    #: What the window keeps of its share right after a step (the cache layout's).
    low_water: float = DEFAULT_LOW_WATER
    #: The share of the budget the per-turn tiers may take beyond their reserves once a
    #: conversation is under way (the cache layout's), and the most the recall tier takes.
    volatile_room: float = DEFAULT_VOLATILE_ROOM
    recall_room_max: int = RECALL_ROOM_MAX


def _window(
    rt: Runtime,
    conversation_id: str,
    leaf: Message,
    system: list[Message],
    floor_depth: int,
    max_tokens: int,
    tok: Tokenizer,
    from_position: int | None = None,
) -> Op[tuple[list[Message], int, bool]]:
    """The newest whole turns of the branch below ``floor_depth`` (exclusive) within
    ``max_tokens`` (system run included, always kept): the history walk of
    :func:`memstrata.conversation.branch.history`, stopped at the summary's cover point
    (and at ``from_position``, the step a stepped window starts at).

    Returns the kept messages (oldest first, system run first), their tokens and
    whether the newest turn alone was over the limit.
    """
    planner = HistoryPlanner(
        system=system,
        max_tokens=max_tokens,
        max_messages=1 << 40,
        count=token_counter(rt, tok),
        from_position=from_position,
    )
    yield from walk_branch(rt, conversation_id, leaf, system, planner, tok, floor_depth=floor_depth)
    result = planner.result(leaf.id, tok.name, 0)
    return result.messages, result.tokens, result.over_budget


def _hash(blocks: Sequence[dict[str, Any]]) -> str:
    text = json.dumps(blocks, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(slots=True)
class _Branch:
    leaf: Message | None = None
    system: list[Message] = field(default_factory=list)
    summary: Summary | None = None


def _branch(conversation_id: str, opened: tuple[Leaf, list[Message]] | None) -> Op[_Branch]:
    if opened is None:
        return _Branch()
    leaf, system = opened
    summary = yield from summary_for(conversation_id, leaf.message)
    return _Branch(leaf.message, system, summary)


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
) -> Op[dict[str, list[TierItem]]]:
    """What each tier other than the window (and the providers that run after it)
    asks for, best items first."""
    offered: dict[str, list[TierItem]] = {}
    if br.summary is not None:
        s = br.summary
        offered["summary"] = [_item(s.id, s.content, tok, up_to=s.up_to_id, version=s.version)]
    for provider in settings.providers:
        if not _after_window(provider):
            items = yield from _provide(rt, provider, base, policies, budget)
            if items or not getattr(provider, "only_when_offering", False):
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
    if tier not in BLOCK_TAGS or tier == "summary":
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
    as_of: int | None = None,
    task: str | None = None,
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
        as_of=as_of,
        task=task,
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


def default_query_message(
    scope: Scope, conversation_id: str, leaf_id: str | None = None
) -> Op[Message | None]:
    """The message whose content :func:`default_query` returns (recall reuses its vector)."""
    leaf = yield from resolve_leaf(scope, conversation_id, leaf_id)
    if leaf is None:
        return None
    return (yield from _newest_user_message(conversation_id, leaf.message))


def default_query(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[str | None]:
    """What the context of a branch is about when the caller gives no query: the
    newest user message on it (None for an empty conversation or no user message)."""
    found = yield from default_query_message(scope, conversation_id, leaf_id)
    return None if found is None else found.content


def _grant_window(
    rt: Runtime, conversation_id: str, br: _Branch, budget: Budget, low_water: float | None
) -> Op[list[Message]]:
    """The recent window; with ``low_water``, one that advances in steps (see
    :func:`memstrata.context.windows.step_start`), its steps counted from the summary's
    cover point, so a new summary and the window's next step change the prefix together."""
    assert br.leaf is not None
    tok = budget.tokenizer
    system_tokens = sum(token_counter(rt, tok)(m) for m in br.system)
    floor = 0 if br.summary is None else br.summary.up_to_depth + 1
    limit = budget.window_limit(system_tokens)
    start: int | None = None
    if low_water is not None:
        base = _base(br)
        share = limit - system_tokens
        start = step_start(base, br.leaf.branch_tokens, share, low_water, MIN_NEW_TOKENS)
        start = None if start == base else start
    kept, used, over = yield from _window(
        rt, conversation_id, br.leaf, br.system, floor, limit, tok, start
    )
    window = kept[len(br.system) :]
    budget.record_window(
        br.leaf, br.system, system_tokens, window, used, over, br.summary, start is not None
    )
    return window


def _base(br: _Branch) -> int:
    """Where the window may start at the earliest, in cumulative tokens of the branch."""
    if br.summary is not None:
        return br.summary.up_to_branch_tokens
    return sum(m.token_count for m in br.system)


def _ongoing(br: _Branch, window: Sequence[Message]) -> bool:
    """Whether the branch holds a turn before the window's newest one."""
    split = newest_turn_start(window)
    return split < len(window) and window[split].depth > len(br.system)


def _cache_share(
    br: _Branch, books: Budget, window: Sequence[Message], budget: int, settings: Settings
) -> int | None:
    """The cache layout's books once the window is read: what of the window's share the
    per-turn tiers may not take, and where a compaction should stop when one is due (None:
    not due). One is due when the window nears the top of its share; it then covers the
    turns before the window's next step, so that the new summary and the step change the
    prefix in the same turn, and the window seldom has to step on its own."""
    assert br.leaf is not None
    system_tokens = books.tiers["system"].granted
    share = books.window_limit(system_tokens) - system_tokens
    room = int(settings.volatile_room * budget)
    most = {"recall": settings.recall_room_max}
    books.keep_share(share, _ongoing(br, window), room, VOLATILE_TIERS, most)
    base, end = _base(br), br.leaf.branch_tokens
    if share <= 0 or end - base <= COMPACT_AT * share:
        return None
    over = end - base - COMPACT_AT * share
    step = step_size(share, settings.low_water, MIN_NEW_TOKENS)
    # The grid of the window's steps, far enough that the window is back under COMPACT_AT;
    # less than the compaction minimum is not worth a summary (the window steps alone).
    keep = max(1, math.ceil(over / step)) * step
    return base + keep if keep >= MIN_NEW_TOKENS else None


def _window_from_depth(br: _Branch, window: Sequence[Message]) -> int | None:
    """Where the window starts on the branch (the leaf's depth + 1 when it is empty)."""
    if br.leaf is None:
        return None
    return window[0].depth if window else br.leaf.depth + 1


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
    as_of: int | None = None,
    layout: str | None = None,
) -> Op[Context]:
    """Assemble the context of a branch (see :mod:`memstrata.context.budget`).

    ``query_vector`` is ``query`` (or, when that is None, the newest user message on
    the branch) embedded by ``embedder`` before this transaction, for the providers
    that search by meaning. ``task`` turns on the ``iterations`` tier for that task.
    ``as_of`` (microseconds) is handed to the providers: the derived tiers (facts,
    profile, recall) answer as of then; the window is the branch ending at ``leaf_id``.
    ``layout`` orders the messages (:mod:`memstrata.context.layout`; None: the settings').
    """
    order = settings.layout if layout is None else check_layout(layout)
    if budget < 1:
        raise InvalidInput("budget must be >= 1", field="budget")
    if task is not None and (not task.strip() or len(task) > 200):
        raise InvalidInput("task must be 1 to 200 characters", field="task")
    tok = tokenizer_for(rt, model)
    # The owner check, the leaf and its system run in one statement.
    opened = yield from open_branch(scope, conversation_id, leaf_id)
    br = yield from _branch(conversation_id, opened)
    books = Budget.open(budget, tok, settings.policies, None if br.leaf is None else br.leaf.id)
    policies = books.policies
    if query is None and settings.providers and br.leaf is not None:
        found = yield from _newest_user_message(conversation_id, br.leaf)
        query = None if found is None else found.content
    asking = _base_request(
        scope, conversation_id, br, query, tok, query_vector, embedder, as_of, task
    )
    offered = yield from _offers(
        rt, scope, conversation_id, br, settings, policies, budget, asking, tok
    )
    books.note_asks(offered)
    late = [p for p in settings.providers if _after_window(p)]
    cache = order == "cache"
    # The cache layout keeps the summary's room whole: a window taking it would push the
    # summary out, and the prefix with it, whenever the window grows.
    books.hold(offered, [p.tier for p in late], ("summary",) if cache else ())
    window: list[Message] = []
    compact_before: int | None = None
    if br.leaf is not None:
        window = yield from _grant_window(
            rt, conversation_id, br, books, settings.low_water if cache else None
        )
        if cache:
            compact_before = _cache_share(br, books, window, budget, settings)
    if late:
        in_context = frozenset(m.id for m in (*br.system, *window))
        from_depth = _window_from_depth(br, window)
        for provider in late:
            room = books.room_for(provider.tier)
            items = yield from _provide(
                rt, provider, asking, policies, room, in_context, from_depth
            )
            offered.setdefault(provider.tier, []).extend(items)
        books.note_asks({p.tier: offered[p.tier] for p in late})
    chosen = books.grant(offered)
    books.note_summary(br.summary, "summary" in chosen)
    books.close()
    report = books.report
    granted = {name: t.granted for name, t in report.tiers.items()}
    out = render(
        br.system, window, chosen, count=token_counter(rt, tok), granted=granted, layout=order
    )
    report.hash = _hash(out.injected)
    report.layout = order
    report.cache.breakpoint = out.breakpoint
    fp = None
    if br.leaf is not None:
        report.compaction_due = (
            compact_before is not None
            if cache
            else books.compaction_due(
                br.leaf, br.summary, settings.threshold, settings.window, context_window(model)
            )
        )
        key = digest_key(scope.tenant, scope.user)
        fp = fingerprint(br.leaf.id, tok.name, out.messages, out.tokens, key)
    return Context(
        out.messages,
        report,
        window,
        br.system,
        chosen,
        fingerprint=fp,
        compact_before=compact_before,
    )
