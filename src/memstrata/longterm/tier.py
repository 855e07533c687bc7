"""The long-term tiers of ``mem.context``: ``facts`` (the ``<memory>`` block) and
``profile`` (the ``<user-profile>`` block).

The facts tier offers every fact of the caller's scope that is true now (or true at
the call's ``as_of`` as known then, see :mod:`~memstrata.longterm.clocks`) as one line each,
corrections first (confidence order, within a reserved 500 tokens), then the rest
by confidence, then the facts a newer one contradicts, each marked ``(outdated)`` (see
:mod:`~memstrata.longterm.currency`); the context's budget then takes whole lines, best
first, up to the tier's cap (2000 tokens by default). Text is HTML-escaped, so a fact can never
close the block it sits in, and the order is total (confidence, age, id), so the
same memory state gives byte-identical blocks.
"""

from __future__ import annotations

from dataclasses import replace

from memstrata.context.tiers import TierItem, TierRequest
from memstrata.longterm import store
from memstrata.longterm.clocks import AsOf
from memstrata.longterm.currency import OUTDATED, outdated
from memstrata.longterm.inject import fact_line, injection_order, profile_line
from memstrata.longterm.model import Fact, FactStatus
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op
from memstrata.storage.records import to_micros

__all__ = ["GUARANTEED_TOKENS", "FactsTier", "ProfileTier"]

#: Room reserved for corrections before other facts are considered (DeerFlow's default).
GUARANTEED_TOKENS = 500


class FactsTier:
    tier = "facts"

    def __init__(self, guaranteed: int = GUARANTEED_TOKENS) -> None:
        self.guaranteed = guaranteed
        self.enabled = True

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        if not self.enabled or request.allowance <= 0:
            return []
        at = None if request.as_of is None else AsOf(request.as_of, request.as_of)
        found = yield from store.true_facts(request.scope, rt.clock(), at)
        # As of then, a fact superseded since was active: it competes as one.
        facts = [replace(f, status=FactStatus.ACTIVE) for f in found]
        # Of two that contradict, the older is not injected as current (see currency).
        old = outdated(facts)
        items = {
            f.id: request.item(
                f.id,
                fact_line(f.content, f.category, f.confidence, f.source_error)
                + (f" {OUTDATED}" if f.id in old else ""),
                fact_id=f.id,
                category=f.category,
                confidence=f.confidence,
                # The fact's version (provenance records which version a prompt held).
                updated_at=to_micros(f.updated_at),
                **({"outdated_by": old[f.id]} if f.id in old else {}),
            )
            for f in facts
        }
        current = [f for f in facts if f.id not in old]
        stale = [f for f in facts if f.id in old]

        def cost(f: Fact) -> int:
            return items[f.id].tokens

        ordered = injection_order(current, cost, self.guaranteed) + injection_order(stale, cost, 0)
        return [items[f.id] for f in ordered]


class ProfileTier:
    tier = "profile"

    def __init__(self) -> None:
        self.enabled = True

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        if not self.enabled or request.allowance <= 0:
            return []
        sections = yield from store.get_profile(request.scope, request.as_of)
        return [
            request.item(f"profile:{p.name}", profile_line(p.name, p.summary), section=p.name)
            for p in sections
            if p.summary
        ]
