"""Memory health and consolidation on every backend: the report on planted data, the
owner's isolation, a dry run that changes nothing, an applied consolidation undone
through supersession (both steps in ``facts.history``), the model-planned path with
FakeLLM, and the ``longterm.consolidate`` job."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.storage.plan import Op, Query
from memstrata.testing import FakeLLM
from support import Models

A = Scope("t1", "alice")
B = Scope("t1", "bob")
CANARY_B = "canary-bob-7f3e"


def _plain(models: Models, memory: Memory) -> Memory:
    models(memory, facts_embedder=None, facts_llm=None)  # word similarity only: no model to load
    return memory


def _plant(memory: Memory, scope: Scope) -> dict[str, str]:
    """Two near duplicates, a contradiction pair, an old never-touched fact, an old
    edited (reinforced) fact and an unrelated one. Returns content -> id."""
    ids = {}
    for content, category in [
        ("User prefers dark roast coffee", "preference"),
        ("user prefers dark-roast coffee!", "preference"),
        ("User lives in Berlin", "context"),
        ("User lives in Paris", "context"),
        ("User plays the cello", "behavior"),
    ]:
        ids[content] = memory.facts.add(scope, content, category=category).id
    doc = {
        "facts": [
            {
                "content": "User once owned a red bicycle",
                "category": "knowledge",
                "confidence": 0.9,
                "createdAt": "2020-01-02T00:00:00Z",
            },
            {
                "content": "User studied chemistry",
                "category": "knowledge",
                "confidence": 0.9,
                "createdAt": "2020-01-02T00:00:00Z",
            },
        ]
    }
    memory.longterm.import_memory(scope, doc)
    for f in memory.facts.list(scope).items:
        ids.setdefault(f.content, f.id)
    edited = memory.facts.edit(scope, ids["User studied chemistry"], confidence=0.95)
    assert edited.confidence == 0.95
    return ids


def _snapshot(memory: Memory, scope: Scope) -> Any:
    facts = memory.facts.list(scope, status="all", limit=500).items
    return [(f.to_dict(), [e.to_dict() for e in memory.facts.history(scope, f.id)]) for f in facts]


def test_health_counts_planted_problems(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    report = mem.memory.health(A)
    assert report.sizes.active == 7
    assert report.sizes.superseded == 0
    assert report.sizes.fact_tokens > 0
    assert report.duplicates.count == 1
    (dup,) = report.duplicates.examples
    assert {f.id for f in dup.facts} == {
        ids["User prefers dark roast coffee"],
        ids["user prefers dark-roast coffee!"],
    }
    assert report.contradictions.count == 1
    (pair,) = report.contradictions.examples
    assert {f.content for f in pair.facts} == {"User lives in Berlin", "User lives in Paris"}
    # Old and never touched: stale; old but edited since (reinforced): not stale.
    assert report.stale.count == 1
    assert report.stale.examples[0].facts[0].id == ids["User once owned a red bicycle"]
    assert mem.memory.health(A, stale_days=36500).stale.count == 0
    # Prompt provenance is installed and nothing was recorded: every fact is unused.
    assert report.usage_known is True
    assert report.unused.count == 7


def test_health_without_usage_counts_says_usage_is_unknown(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    _plant(mem, A)
    mem.core.kits = replace(mem.core.kits, fact_usage=None)  # a core without provenance
    report = mem.memory.health(A)
    # No way to count uses: usage unknown, never "all unused".
    assert report.usage_known is False
    assert report.unused.count is None
    assert report.unused.known is False
    assert report.to_dict()["unused"] == {"count": None, "examples": [], "known": False}


def test_a_fact_in_a_recorded_context_is_not_unused(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    conv = mem.conversations.create(A)
    mem.messages.append(A, conv.id, role="user", content="What do I drink in the morning?")
    ctx = mem.context(A, conv.id, budget=4000, record=True)
    assert ctx.context_id is not None
    record = mem.provenance.record_of(A, conv.id, ctx.context_id)
    injected = {i.id for i in record.items if i.kind == "fact"}
    assert injected
    assert injected <= set(ids.values())
    report = mem.memory.health(A)
    assert report.usage_known is True
    assert report.unused.count == 7 - len(injected)
    assert not {e.facts[0].id for e in report.unused.examples} & injected


def test_health_uses_the_usage_hook(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    bicycle = ids["User once owned a red bicycle"]
    cello = ids["User plays the cello"]
    seen: list[tuple[Scope, tuple[str, ...]]] = []

    def counts(scope: Scope, fact_ids: Sequence[str]) -> Op[dict[str, int]]:
        seen.append((scope, tuple(fact_ids)))
        rows = yield Query("SELECT 2")  # runs in the report's read transaction
        return {bicycle: rows[0][0], cello: 1}

    mem.core.kits = replace(mem.core.kits, fact_usage=counts)
    report = mem.memory.health(A)
    assert seen
    assert seen[0][0] == A
    assert bicycle in seen[0][1]
    assert report.usage_known is True
    assert report.unused.count == 5
    assert {e.facts[0].id for e in report.unused.examples} == set(ids.values()) - {bicycle, cello}
    assert report.stale.count == 0  # the old fact was used in a recorded context


def test_health_shows_only_the_owner(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    _plant(mem, A)
    mem.facts.add(B, f"User prefers dark roast coffee {CANARY_B}", category="preference")
    mem.facts.add(B, f"User lives in Berlin {CANARY_B}", category="context")
    report = mem.memory.health(A, examples=50)
    assert CANARY_B not in json.dumps(report.to_dict())
    assert report.sizes.active == 7
    assert mem.memory.health(B).sizes.active == 2
    plan = mem.memory.consolidate(A)
    assert CANARY_B not in json.dumps(plan.to_dict())


def test_dry_run_changes_nothing_and_apply_is_reversible(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    keep, dup = ids["User prefers dark roast coffee"], ids["user prefers dark-roast coffee!"]
    before = _snapshot(mem, A)
    plan = mem.memory.consolidate(A)
    assert plan.dry_run
    assert not plan.applied
    assert plan.mode == "deterministic"
    (change,) = plan.changes
    assert change.target_id == keep
    assert [b.id for b in change.superseded] == [dup]
    assert _snapshot(mem, A) == before

    applied = mem.memory.consolidate(A, dry_run=False)
    assert applied.applied
    assert [c.target_id for c in applied.changes] == [keep]
    gone = mem.facts.get(A, dup)
    assert gone.status.value == "superseded"
    assert gone.superseded_by == keep
    assert mem.memory.health(A).duplicates.count == 0
    # Nothing was erased: every fact is still there.
    assert len(mem.facts.list(A, status="all").items) == len(before)

    undone = mem.memory.revert(A, applied.id)
    assert undone.restored == (dup,)
    assert undone.retired == ()
    back = mem.facts.get(A, dup)
    assert back.status.value == "active"
    assert back.superseded_by is None
    events = [(e.fact_id, e.event, e.related_id) for e in mem.facts.history(A, dup)]
    assert events[-2:] == [(dup, "superseded", keep), (dup, "restored", keep)]
    with pytest.raises(NotFound):
        mem.memory.revert(A, applied.id)  # nothing left to undo
    with pytest.raises(NotFound):
        mem.memory.revert(B, applied.id)  # another owner's consolidation is not found


def _llm_plan(aliases: dict[str, str]) -> str:
    return (
        "Here is the plan:\n```json\n"
        + json.dumps(
            {
                "merges": [
                    {
                        "facts": [
                            aliases["User prefers dark roast coffee"],
                            aliases["user prefers dark-roast coffee!"],
                        ],
                        "content": "User prefers dark roast coffee, black",
                        "category": "preference",
                        "reason": "same preference",
                    },
                    {"facts": ["f99", "f1"], "content": "x"},  # unknown alias: dropped
                ],
                "supersede": [
                    {
                        "old": aliases["User lives in Berlin"],
                        "by": aliases["User lives in Paris"],
                        "reason": "moved",
                    },
                    {
                        "old": [aliases["User plays the cello"]],
                        "by": aliases["User plays the cello"],
                    },
                ],
            }
        )
        + "\n```"
    )


def test_model_planned_consolidation(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    facts = [f for f in reversed(mem.facts.list(A).items)]  # oldest first, as the prompt
    aliases = {f.content: f"f{i}" for i, f in enumerate(facts, 1)}
    llm = FakeLLM(["not json at all", _llm_plan(aliases)], cycle=True)
    models(mem, facts_llm=llm)
    assert mem.memory.planned_by_model
    plan = mem.memory.consolidate(A)
    assert plan.mode == "llm"
    assert llm.calls
    assert all(c.purpose == "consolidation" for c in llm.calls)
    assert "User lives in Berlin" in llm.calls[0].messages[-1]["content"]
    assert any("unusable" in n for n in plan.notes)
    assert any("f99" in n for n in plan.notes)
    assert any("itself" in n for n in plan.notes)
    merge, supersede = plan.changes
    assert merge.new_fact
    assert merge.target_id is None
    assert merge.content == "User prefers dark roast coffee, black"
    assert supersede.target_id == ids["User lives in Paris"]
    assert [b.id for b in supersede.superseded] == [ids["User lives in Berlin"]]

    applied = mem.memory.consolidate(A, dry_run=False)
    assert applied.applied
    assert applied.mode == "llm"
    new_id = applied.changes[0].target_id
    assert new_id is not None
    merged = mem.facts.get(A, new_id)
    assert merged.status.value == "active"
    assert merged.confidence == 1.0
    assert merged.origin.value == "manual"  # merged from manual facts
    old = ids["user prefers dark-roast coffee!"]
    assert mem.facts.get(A, old).superseded_by == new_id
    assert mem.facts.get(A, ids["User lives in Berlin"]).status.value == "superseded"

    undone = mem.memory.revert(A, applied.id)
    assert set(undone.restored) == {
        ids["User prefers dark roast coffee"],
        old,
        ids["User lives in Berlin"],
    }
    assert undone.retired == (new_id,)
    assert mem.facts.get(A, new_id).status.value == "superseded"
    active = {f.content for f in mem.facts.list(A).items}
    assert "User lives in Berlin" in active
    assert "User prefers dark roast coffee, black" not in active
    kinds = [e.event for e in mem.facts.history(A, new_id)]
    assert "created" in kinds
    assert "superseded" in kinds
    assert "restored" in kinds


def test_model_failure_falls_back_to_duplicates(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    _plant(mem, A)
    llm = FakeLLM(["{}"])
    llm.fail_next(1, TimeoutError)
    models(mem, facts_llm=llm)
    plan = mem.memory.consolidate(A)
    assert plan.mode == "deterministic"
    assert len(plan.changes) == 1
    assert any("TimeoutError" in n for n in plan.notes)


def test_consolidation_job(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    job = mem.memory.schedule_consolidation(A)
    assert job.kind == "longterm.consolidate"
    assert job.user == "alice"
    assert job.id in {j.id for j in mem.jobs.list(tenant="t1", user="alice").items}
    mem.jobs.run_pending(["longterm.consolidate"])
    assert mem.jobs.get(job.id).status.value == "done"
    dup = ids["user prefers dark-roast coffee!"]
    assert mem.facts.get(A, dup).status.value == "superseded"
    assert mem.memory.revert(A, job.id).restored == (dup,)


def test_revert_refuses_to_duplicate_an_active_fact(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    ids = _plant(mem, A)
    applied = mem.memory.consolidate(A, dry_run=False)
    dup = ids["user prefers dark-roast coffee!"]
    mem.facts.add(A, "User prefers  DARK-ROAST coffee!")  # the same content key
    with pytest.raises(Conflict):
        mem.memory.revert(A, applied.id)
    assert mem.facts.get(A, dup).status.value == "superseded"  # nothing half-done


def test_bad_arguments(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    with pytest.raises(InvalidInput):
        mem.memory.health(A, stale_days=-1)
    with pytest.raises(InvalidInput):
        mem.memory.consolidate(A, dry_run="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        mem.memory.revert(A, "not an id")
    empty = mem.memory.health(A)
    assert empty.sizes.active == 0
    assert empty.duplicates.count == 0
    assert mem.memory.consolidate(A, dry_run=False).changes == ()


def test_apply_skips_what_changed_since_the_plan(memory: Memory, models: Models) -> None:
    from memstrata.longterm import consolidate as cons
    from memstrata.longterm.health import FactBrief
    from memstrata.storage.plan import write

    mem = _plain(models, memory)
    ids = _plant(mem, A)
    keep, dup = ids["User prefers dark roast coffee"], ids["user prefers dark-roast coffee!"]
    berlin, paris = ids["User lives in Berlin"], ids["User lives in Paris"]

    def brief(fid: str) -> FactBrief:
        f = mem.facts.get(A, fid)
        return FactBrief(f.id, f.category, f.content)

    changes = [
        # Its content is already an active fact's (written after the plan): skipped.
        cons.ConsolidationChange(
            "merge", (brief(keep), brief(dup)), None, "User plays the CELLO", "behavior", True, "r"
        ),
        # A fact gone since the plan: skipped.
        cons.ConsolidationChange("supersede", (brief(berlin),), paris, "x", "context", False, "r"),
    ]
    mem.facts.delete(A, paris)
    rt = mem.core.rt
    done, notes = mem.core.engine.run(write(lambda: cons.apply(rt, A, rt.make_id(), changes)))
    assert done == []
    assert len(notes) == 2
    assert {f.id for f in mem.facts.list(A).items} >= {keep, dup, berlin}


class _SameVector:
    """An embedder that finds every fact alike (one vector for all)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


def test_semantic_near_duplicates_use_the_embedder(memory: Memory, models: Models) -> None:
    mem = _plain(models, memory)
    mem.facts.add(A, "User adores espresso")
    mem.facts.add(A, "Coffee is what the user loves most")
    assert mem.memory.health(A).duplicates.count == 0  # the words differ
    models(mem, facts_embedder=_SameVector())  # type: ignore[assignment]
    assert mem.memory.health(A).duplicates.count == 0  # words only unless asked
    report = mem.memory.health(A, semantic=True)
    assert report.semantic
    assert report.duplicates.count == 1
    plan = mem.memory.consolidate(A, semantic=True)
    assert len(plan.changes) == 1
    assert len(plan.changes[0].superseded) == 1
