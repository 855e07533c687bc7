"""The retention plan, decided from the policies alone (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstrata.errors import InvalidInput
from memstrata.retention import Policy, Step, plan

_AT = datetime(2026, 1, 1, tzinfo=UTC)
YEAR = 365 * 86400.0


def _p(tenant: str, kind: str, age: float) -> Policy:
    return Policy(tenant, kind, age, _AT)


def test_own_policies_win_and_the_default_covers_the_rest() -> None:
    policies = [_p("*", "jobs", 10.0), _p("acme", "jobs", 5.0), _p("zeta", "snapshots", 7.0)]
    assert plan(policies) == [
        Step("jobs", "acme", 5.0),
        Step("jobs", None, 10.0, ("acme",)),
        Step("snapshots", "zeta", 7.0),
        Step("receipts", None, YEAR),  # kept a year without a policy of their own
    ]


def test_one_tenant_gets_its_own_policy_or_the_default() -> None:
    policies = [_p("*", "jobs", 10.0), _p("acme", "jobs", 5.0)]
    receipts = [Step("receipts", "acme", YEAR)]
    assert plan(policies, tenant="acme") == [Step("jobs", "acme", 5.0), *receipts]
    assert plan(policies, tenant="beta") == [
        Step("jobs", "beta", 10.0),
        Step("receipts", "beta", YEAR),
    ]


def test_receipts_follow_their_policy_or_are_kept_a_year() -> None:
    assert plan([]) == [Step("receipts", None, YEAR)]
    own = [_p("acme", "receipts", 30.0)]
    assert plan(own) == [Step("receipts", "acme", 30.0), Step("receipts", None, YEAR, ("acme",))]
    assert plan([_p("*", "receipts", 60.0)]) == [Step("receipts", None, 60.0)]


def test_overrides_replace_the_policies() -> None:
    policies = [_p("acme", "jobs", 5.0)]
    assert plan(policies, overrides={"checkpoints": 3.0}) == [Step("checkpoints", None, 3.0)]
    with pytest.raises(InvalidInput):
        plan([], overrides={"jobs": -1.0})
    with pytest.raises(InvalidInput):
        plan([], overrides={"messages": 1.0})
