"""What one retention run deletes, decided from the policies alone (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memstrata.errors import InvalidInput
from memstrata.retention.policies import ALL_TENANTS, DEFAULT_MAX_AGE_S, KINDS, Policy, check_kind

__all__ = ["Step", "plan"]


@dataclass(frozen=True, slots=True)
class Step:
    """Delete ``kind`` older than ``max_age_s`` of ``tenant``; ``tenant=None`` is every
    tenant but those in ``exclude`` (they have policies of their own)."""

    kind: str
    tenant: str | None
    max_age_s: float
    exclude: tuple[str, ...] = ()


def plan(
    policies: Sequence[Policy],
    *,
    overrides: Mapping[str, float] | None = None,
    tenant: str | None = None,
) -> list[Step]:
    """The steps of a run over every tenant (or only ``tenant``).

    ``overrides`` ({kind: max_age_s}) applies one age to every tenant instead of the
    stored policies. A tenant's own policy wins over the ``*`` default of its kind.
    """
    if overrides is not None:
        for kind, age in overrides.items():
            check_kind(kind)
            if not age >= 0:
                raise InvalidInput("a retention age cannot be negative", field=kind)
        return [Step(k, tenant, age) for k, age in overrides.items()]
    steps: list[Step] = []
    for kind in KINDS:
        own = [p for p in policies if p.kind == kind and p.tenant != ALL_TENANTS]
        default = next((p for p in policies if p.kind == kind and p.tenant == ALL_TENANTS), None)
        if default is None and kind in DEFAULT_MAX_AGE_S:  # a built-in "*" policy
            default = Policy(ALL_TENANTS, kind, DEFAULT_MAX_AGE_S[kind], None)
        for p in own:
            if tenant is None or p.tenant == tenant:
                steps.append(Step(kind, p.tenant, p.max_age_s))
        if default is not None and (tenant is None or tenant not in {p.tenant for p in own}):
            # One named tenant is filtered already; "the rest" leaves out the named ones.
            rest = tuple(p.tenant for p in own) if tenant is None else ()
            steps.append(Step(kind, tenant, default.max_age_s, rest))
    return steps
