"""``memstrata provenance``: a reply's recorded context, and a fact's usage (in process)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memstrata import Memory, Scope

ALICE = Scope("acme", "alice")


def test_provenance_of_a_reply_and_fact_usage(db: str, run: Callable[..., Any]) -> None:
    with Memory.open(db) as mem:
        cid = mem.conversations.create(ALICE).id
        mem.messages.append(ALICE, cid, role="user", content="Which tea?")
        fact = mem.facts.add(ALICE, "Likes green tea", category="preference")
        ctx = mem.context(ALICE, cid, record=True)
        reply = mem.messages.append(
            ALICE, cid, role="assistant", content="Green.", context_id=ctx.context_id
        )
        question = ctx.report.leaf_id
    scope = ["--tenant", "acme", "--user", "alice"]
    out = run("provenance", cid, reply.id, *scope, "--json")
    record = json.loads(out.stdout)["record"]
    assert record["id"] == ctx.context_id
    assert {(i["kind"], i["id"]) for i in record["items"]} == {
        ("fact", fact.id),
        ("message", question),
    }
    table = run("provenance", cid, reply.id, *scope)
    assert fact.id in table.stdout
    assert "active" in table.stdout
    assert ctx.context_id in table.stderr
    usage = json.loads(run("provenance", "--fact", fact.id, *scope, "--json").stdout)
    assert [u["message_id"] for u in usage["items"]] == [reply.id]
    assert reply.id in run("provenance", "--fact", fact.id, *scope).stdout
    # Another user sees nothing of it; a message without a record says so.
    run("provenance", "--fact", fact.id, "--tenant", "acme", "--user", "bob", code=1)
    none = run("provenance", cid, question, *scope)
    assert "no recorded context" in none.stderr
    run("provenance", *scope, code=1)
