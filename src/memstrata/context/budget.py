"""The token arithmetic of one context (pure: no storage, unit-tested on its own).

One budget for everything. Tiers are granted tokens in priority order (default:
recent window, summary, facts, profile, working memory, plan, recall); each tier's
``minimum`` is reserved before higher tiers take the rest and its ``cap`` bounds it.
Items are whole: a turn is never split, a fact or a recalled message is in or out.
Every message of the active branch ends up in the window, covered by the summary
that is in the context, or in ``report.dropped`` with a reason.

:class:`Budget` keeps the books of one assembly: what each tier asks for, what is
held back while the window is read, what each tier is granted, and the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memstrata.context.tiers import (
    BLOCK_TAGS,
    GROUP_CAPS,
    GROUP_LEADS,
    TierItem,
    TierPolicy,
    default_policies,
)
from memstrata.domain.context import ContextReport, TierReport
from memstrata.tokens import Tokenizer
from memstrata.types import Message

if TYPE_CHECKING:
    from memstrata.context.summaries import Summary

__all__ = ["Budget", "block", "heading_cost"]


def block(tier: str, items: Sequence[TierItem]) -> str:
    """The system message that injects a tier's items. An item whose provenance names a
    ``heading`` (e.g. the date of a recalled message) is put under that heading, written
    once for a run of items that share it: whatever subset is granted reads right."""
    tag = BLOCK_TAGS[tier]
    lines: list[str] = []
    last: object = None
    for i in items:
        heading = i.provenance.get("heading")
        if heading is not None and heading != last:
            lines.append(f"{heading}\n")
        last = heading
        lines.append(i.text + "\n")
    return f"<{tag}>\n" + "".join(lines) + f"</{tag}>"


def heading_cost(item: TierItem, previous: TierItem | None, tok: Tokenizer) -> int:
    """The tokens of the heading :func:`block` writes before ``item`` after ``previous``."""
    heading = item.provenance.get("heading")
    if heading is None or (previous is not None and previous.provenance.get("heading") == heading):
        return 0
    return tok.count_text(f"{heading}\n")


@dataclass(slots=True)
class Budget:
    """The books of one assembly under ``total`` tokens, counted with ``tokenizer``.

    Used in this order: :meth:`note_asks` (what the tiers offer), :meth:`hold` (reserves
    kept while the window is read), :meth:`window_limit` and :meth:`record_window`,
    :meth:`note_asks` again for providers that run after the window, :meth:`grant`,
    :meth:`note_summary` and :meth:`close`.
    """

    total: int
    tokenizer: Tokenizer
    policies: dict[str, TierPolicy]
    order: list[str]  # tier names by priority
    report: ContextReport
    reserve: dict[str, int] = field(default_factory=dict)
    #: Tokens of the window's share kept from the per-turn tiers (:meth:`keep_share`).
    held: int = 0
    held_from: frozenset[str] = frozenset()

    @classmethod
    def open(
        cls,
        total: int,
        tokenizer: Tokenizer,
        policies: Mapping[str, TierPolicy],
        leaf_id: str | None,
    ) -> Budget:
        """A budget with the default policies, overridden by ``policies``."""
        merged = dict(default_policies())
        merged.update(policies)
        order = sorted(merged, key=lambda n: merged[n].priority)
        tiers = {name: TierReport() for name in ("system", *order)}
        report = ContextReport(total, tokenizer.name, leaf_id, tiers)
        return cls(total, tokenizer, merged, order, report)

    @property
    def tiers(self) -> dict[str, TierReport]:
        return self.report.tiers

    @property
    def remaining(self) -> int:
        """What the system run and the window leave for the other tiers."""
        return self.total - self.tiers["system"].granted - self.tiers["recent"].granted

    def note_asks(self, offered: Mapping[str, Sequence[TierItem]]) -> None:
        """Record what each tier asks for; a provider's tier with no policy goes last."""
        for name, items in offered.items():
            wanted = [i for i in items if not i.provenance.get("rejected")]
            self.tiers.setdefault(name, TierReport()).asked = _ask(wanted, name, self.tokenizer)
            if name not in self.policies:
                self.policies[name] = TierPolicy(len(self.policies))
                self.order.append(name)

    def hold(
        self,
        offered: Mapping[str, Sequence[TierItem]],
        late: Sequence[str],
        whole: Sequence[str] = (),
    ) -> None:
        """Reserve tokens for the tiers while the window is read; ``late`` names the tiers
        whose providers run after the window, ``whole`` those that keep all they ask for
        (up to their cap) wherever they rank."""
        count = self.tokenizer.count_message
        first = {n: count(block(n, items[:1])) for n, items in offered.items() if items}
        self.reserve = _reserves(self.order, self.policies, self.tiers, first, whole)
        _reserve_late(late, self.order, self.policies, self.reserve)

    def window_limit(self, system_tokens: int) -> int:
        """Tokens the system run and the recent window may take together."""
        allow = self.total - system_tokens - sum(self.reserve.values())
        cap = self.policies["recent"].cap
        if cap is not None:
            allow = min(allow, cap)
        return system_tokens + max(allow, 0)

    def record_window(
        self,
        leaf: Message,
        system: Sequence[Message],
        system_tokens: int,
        window: Sequence[Message],
        used: int,
        over: bool,
        summary: Summary | None,
        stepped: bool = False,
    ) -> None:
        """Book the system run and the window (``used``: their tokens together; ``over``:
        the newest turn alone was over the limit; ``stepped``: the window advances in
        steps) and what of the branch they leave out."""
        tiers = self.tiers
        tiers["system"].granted = tiers["system"].asked = system_tokens
        tiers["system"].items = len(system)
        tiers["recent"].granted = used - system_tokens
        tiers["recent"].items = len(window)
        base = (
            summary.up_to_branch_tokens
            if summary is not None
            else sum(m.token_count for m in system)
        )
        tiers["recent"].asked = leaf.branch_tokens - base
        self.report.newest_turn_over_budget = over
        _report_uncovered(self.report, leaf, system, window, summary, stepped)

    def keep_share(
        self, share: int, ongoing: bool, volatile_room: int, volatile: frozenset[str]
    ) -> None:
        """Once a conversation is ``ongoing`` (a turn before the newest), keep what of the
        window's ``share`` the window does not fill from the ``volatile`` tiers, all but
        ``volatile_room`` tokens: given to a per-turn tier (recall), the room a young or a
        stepped window leaves would be a large block that changes every turn. A
        conversation's first turn, with nothing to cache yet, leaves them all of it."""
        unused = share - self.tiers["recent"].granted
        self.held = max(0, unused - volatile_room) if ongoing else 0
        self.held_from = volatile

    def room_for(self, tier: str) -> int:
        """What the system run and the window leave for ``tier``."""
        return self.remaining - (self.held if tier in self.held_from else 0)

    def grant(self, offered: Mapping[str, list[TierItem]]) -> dict[str, list[TierItem]]:
        """Grant the tiers other than the window, by priority: the items each injects."""
        return _grant_tiers(
            self.order,
            self.policies,
            offered,
            self.reserve,
            self.remaining,
            self.tokenizer,
            self.report,
            {name: self.held for name in self.held_from},
        )

    def note_summary(self, summary: Summary | None, used: bool) -> None:
        """Book the summary: in the context, or dropped with what it covers."""
        if summary is None:
            return
        if used:
            self.report.summary_id, self.report.covered_up_to = summary.id, summary.up_to_id
            return
        # The summary did not fit: what it covers is out of the context too.
        self.report.dropped.append(
            {
                "tier": "summary",
                "reason": "covered by a summary that did not fit the budget",
                "range": {"to_id": summary.up_to_id, "to_depth": summary.up_to_depth},
                "tokens": summary.up_to_branch_tokens,
            }
        )

    def close(self) -> None:
        """Total the grants."""
        self.report.total = sum(t.granted for t in self.tiers.values())
        self.report.over_budget = self.report.total > self.total

    def compaction_due(
        self,
        leaf: Message,
        summary: Summary | None,
        threshold: float,
        window: int,
        model_window: int,
    ) -> bool:
        """n8n's rule: compact once the uncovered branch passes ``threshold`` of the smaller
        of the model's window and the budget, and it is longer than ``window`` messages."""
        base = 0 if summary is None else summary.up_to_branch_tokens
        uncovered = leaf.depth + 1 - (0 if summary is None else summary.up_to_depth + 1)
        limit = threshold * min(model_window, self.total)
        return leaf.branch_tokens - base > limit and uncovered > window


def _ask(items: Sequence[TierItem], tier: str, tok: Tokenizer) -> int:
    return tok.count_message(block(tier, items)) if items else 0


def _drop(tier: str, item: TierItem, reason: str) -> dict[str, Any]:
    return {
        "tier": tier,
        "id": item.id,
        "tokens": item.tokens,
        "reason": reason,
        "provenance": dict(item.provenance),
    }


def _select(
    tier: str,
    items: Sequence[TierItem],
    allow: int,
    tok: Tokenizer,
    dropped: list[dict[str, Any]],
) -> tuple[list[TierItem], int]:
    """Whole items, best first, while the block fits ``allow``; returns them and the block cost."""
    overhead = tok.count_message(block(tier, []))
    chosen: list[TierItem] = []
    used = overhead
    for item in items:
        cost = item.tokens + heading_cost(item, chosen[-1] if chosen else None, tok)
        if used + cost <= allow:
            chosen.append(item)
            used += cost
        else:
            dropped.append(_drop(tier, item, "over budget"))
    # Counted exactly on the final text; BPE across joins can differ from the item sums.
    while chosen:
        cost = tok.count_message(block(tier, chosen))
        if cost <= allow:
            return chosen, cost
        dropped.append(_drop(tier, chosen.pop(), "over budget"))
    return [], 0


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


def _reserves(
    order: Sequence[str],
    policies: Mapping[str, TierPolicy],
    tiers: Mapping[str, TierReport],
    first: Mapping[str, int],
    whole: Sequence[str] = (),
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
        want = asked if above or name in whole else min(floor, asked)
        out[name] = want if cap is None else min(want, cap)
    return out


def _reserve_late(
    late: Sequence[str],
    order: Sequence[str],
    policies: Mapping[str, TierPolicy],
    reserve: dict[str, int],
) -> None:
    """What the window leaves for the tiers whose providers run after it: their asks are
    unknown yet, so their minimum (their cap when they rank above the window)."""
    recent = order.index("recent")
    for name in late:
        if name not in policies:
            continue
        policy = policies[name]
        want = policy.minimum
        if order.index(name) < recent and policy.cap is not None:
            want = policy.cap
        reserve[name] = max(reserve.get(name, 0), want)


def _grant_tiers(
    order: Sequence[str],
    policies: Mapping[str, TierPolicy],
    offered: Mapping[str, list[TierItem]],
    reserve: dict[str, int],
    remaining: int,
    tok: Tokenizer,
    report: ContextReport,
    held: Mapping[str, int],
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
        allow = remaining - later - held.get(name, 0)
        if cap is not None:
            allow = min(allow, cap)
        if group is not None and group in group_left:
            allow = min(
                allow,
                group_left[group]
                - _lead_hold(name, group, order[i + 1 :], policies, report, group_left),
            )
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


def _lead_hold(
    name: str,
    group: str,
    later: Sequence[str],
    policies: Mapping[str, TierPolicy],
    report: ContextReport,
    group_left: Mapping[str, int],
) -> int:
    """What ``name`` leaves of its group for the group's lead tier when the lead is
    granted after it: the lead's ask, short of ``name``'s own minimum share."""
    lead = GROUP_LEADS.get(group)
    if lead is None or lead == name or lead not in later or policies[lead].group != group:
        return 0
    asked = report.tiers[lead].asked if lead in report.tiers else 0
    return max(0, min(asked, group_left[group] - policies[name].minimum))


def _report_uncovered(
    report: ContextReport,
    leaf: Message,
    system: Sequence[Message],
    window: Sequence[Message],
    summary: Summary | None,
    stepped: bool = False,
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
        reason = "over budget"
        if stepped:
            # The whole turns before the window's current step, so that its start stays put.
            reason = "before the window's step (it advances in whole turns to stay cacheable)"
        report.dropped.append(
            {
                "tier": "recent",
                "reason": reason
                + ("" if summary is None else " (newer than the summary; compaction pending)"),
                "range": {"from_depth": start_depth, "to_depth": end_depth, "to_id": end_id},
                "messages": end_depth - start_depth + 1,
                "tokens": end_tokens - start_tokens,
            }
        )
