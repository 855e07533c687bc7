"""Plans (sans-IO): one versioned JSON document per conversation, written with
compare-and-set like working memory (see :mod:`memstrata.state.working`)."""

from __future__ import annotations

import json
from typing import Any

from memstrata.conversation.conversations import get_conversation, hold_conversation
from memstrata.domain.state import PlanDoc
from memstrata.errors import NotFound, PreconditionFailed
from memstrata.runtime import Runtime
from memstrata.state.checks import check_expected, dump, open_doc, seal_doc, sized
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros
from memstrata.types import Scope

__all__ = ["PlanDoc", "find_plan", "get_plan", "put_plan"]


def _plan_row(scope: Scope, conversation_id: str) -> Op[PlanDoc | None]:
    """The plan; None when there is none or its owner's data key was destroyed."""
    rows = yield Query(
        "SELECT conversation_id, document, version, updated_at FROM plans WHERE conversation_id = ?",
        (conversation_id,),
    )
    if not rows:
        return None
    conversation, stored, version, updated_at = rows[0]
    document = open_doc("plans.document", conversation, stored)
    if document is None:
        return None
    return PlanDoc(conversation, json.loads(document), version, from_micros(updated_at))


def get_plan(scope: Scope, conversation_id: str) -> Op[PlanDoc]:
    yield from get_conversation(scope, conversation_id)
    plan = yield from _plan_row(scope, conversation_id)
    if plan is None:
        raise NotFound(f"conversation {conversation_id} has no plan", kind="plan")
    return plan


def find_plan(scope: Scope, conversation_id: str) -> Op[PlanDoc | None]:
    """The plan, or None (for context assembly, which must not fail without one)."""
    yield from get_conversation(scope, conversation_id)
    return (yield from _plan_row(scope, conversation_id))


def put_plan(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    document: Any,
    *,
    expected_version: int | None = None,
) -> Op[PlanDoc]:
    """Write the plan. Without ``expected_version`` it creates or overwrites in one
    upsert, so concurrent unconditional writes all succeed (the last one stays)."""
    check_expected(expected_version)
    text = seal_doc("plans.document", conversation_id, scope, sized(dump(document), "document"))
    yield from hold_conversation(scope, conversation_id)
    now = rt.clock()
    if expected_version is None:
        yield Exec(
            "INSERT INTO plans (conversation_id, document, version, updated_at) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (conversation_id) DO UPDATE SET document = excluded.document, "
            "version = plans.version + 1, updated_at = excluded.updated_at",
            (conversation_id, text, now),
        )
    elif expected_version == 0:
        n = yield Exec(
            "INSERT INTO plans (conversation_id, document, version, updated_at) "
            "VALUES (?, ?, 1, ?) ON CONFLICT DO NOTHING",
            (conversation_id, text, now),
        )
        if not n:
            old = yield from _plan_row(scope, conversation_id)
            if old is not None:
                raise PreconditionFailed("the plan exists already", current_version=old.version)
            # The row is there but reads as deleted (its owner's data key was destroyed and
            # a backup brought it back): to the caller there is no plan, so this creates one.
            yield Exec(
                "UPDATE plans SET document = ?, version = 1, updated_at = ? "
                "WHERE conversation_id = ?",
                (text, now, conversation_id),
            )
    else:
        n = yield Exec(
            "UPDATE plans SET document = ?, version = ?, updated_at = ? "
            "WHERE conversation_id = ? AND version = ?",
            (text, expected_version + 1, now, conversation_id, expected_version),
        )
        if not n:
            old = yield from _plan_row(scope, conversation_id)
            if old is None:
                raise PreconditionFailed("the plan does not exist", current_version=0)
            raise PreconditionFailed(
                f"the plan is at version {old.version}, not {expected_version}",
                current_version=old.version,
            )
    plan = yield from _plan_row(scope, conversation_id)
    assert plan is not None
    return plan
