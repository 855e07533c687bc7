"""Usage rows and budgets on every backend: what an extraction with the fake model leaves in
the store, reports by purpose and by user, budgets holding jobs back visibly, the cascade."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.errors import InvalidInput
from memstrata.jobs.ops import JobStatus
from memstrata.longterm.service import EXTRACT_JOB
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from memstrata.usage import ANONYMOUS_USER, usage_scope
from support import Models


def _talk(mem: Memory, scope: Scope, text: str = "I like green tea.") -> str:
    c = mem.conversations.create(scope)
    mem.messages.append(scope, c.id, role="user", content=text)
    mem.messages.append(scope, c.id, role="assistant", content="Noted!")
    return c.id


def _extract_job(mem: Memory, scope: Scope, cid: str) -> str:
    """Queue extraction of the conversation, due now (no debounce)."""
    from memstrata.storage.plan import Exec, write

    job = mem.longterm.observe(scope, cid)

    def due():  # type: ignore[no-untyped-def]
        yield Exec("UPDATE jobs SET run_after = 0 WHERE id = ?", (job.id,))

    mem.core.engine.run(write(due))
    return job.id


def _run_extraction(mem: Memory, scope: Scope, cid: str) -> None:
    _extract_job(mem, scope, cid)
    assert mem.jobs.run_pending([EXTRACT_JOB]) >= 1


def test_usage_rows_after_an_extraction_with_the_fake_model(memory: Memory, models: Models) -> None:
    llm = FakeLLM(rule_extractor)
    models(memory, facts_llm=llm, facts_embedder=None)
    s = fresh_scope()
    cid = _talk(memory, s)
    _run_extraction(memory, s, cid)
    assert len(llm.calls) == 1
    # The worker wrote the job's calls when the job ended: no flush needed to see them.
    rows = _rows(memory, s.tenant)
    assert len(rows) == 1
    user, purpose, kind, calls, errors, tin, tout, dur, job_id = rows[0]
    assert (user, purpose, kind, calls, errors) == (s.user, "extraction", "llm", 1, 0)
    assert tin > 100
    assert tout > 0
    assert dur >= 0
    assert job_id

    report = memory.usage.report(s.tenant)
    assert report.group_by == "purpose"
    [item] = report.items
    assert item.key == "extraction"
    assert item.calls == 1
    assert item.tokens == tin + tout == report.total.tokens
    by_user = memory.usage.report(s.tenant, group_by="user")
    assert [(i.key, i.calls) for i in by_user.items] == [(s.user, 1)]
    # One user's report: only that user's rows.
    other = Scope(s.tenant, "someone-else")
    assert memory.usage.report(other).items == []
    assert memory.usage.report(s).total.calls == 1


def _rows(mem: Memory, tenant: str) -> list[tuple]:  # type: ignore[type-arg]
    from memstrata.storage.plan import Query, read

    def op():  # type: ignore[no-untyped-def]
        rows = yield Query(
            "SELECT user_id, purpose, kind, calls, errors, input_tokens, output_tokens, "
            "duration_us, job_id FROM usage_events WHERE tenant_id = ? ORDER BY at",
            (tenant,),
        )
        return [tuple(r) for r in rows]

    return mem.core.engine.run(read(op))


def test_embedder_calls_are_summed_per_owner_and_flushed_in_batches(memory: Memory) -> None:
    meter = memory.core.usage
    s = fresh_scope()
    with usage_scope(s.tenant, s.user, purpose="embedding"):
        for _ in range(5):
            meter.record_embed(3, 0.001, True, tokens=30, model="fake-embedder")
    with usage_scope(s.tenant, "u2"):
        meter.record_embed(1, 0.001, False, tokens=7, model="fake-embedder")
    assert _rows(memory, s.tenant) == []  # buffered, not written per call
    assert memory.usage.flush() == 2
    rows = sorted(_rows(memory, s.tenant))
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in rows] == [
        (s.user, "embedding", 5, 0, 150),
        ("u2", "embedding", 1, 1, 7),
    ]


def test_a_budget_of_zero_blocks_extraction_visibly_and_a_raised_one_lets_it_run(
    memory: Memory, models: Models
) -> None:
    llm = FakeLLM(rule_extractor)
    models(memory, facts_llm=llm, facts_embedder=None)
    s = fresh_scope()
    budget = memory.usage.set_budget(s.tenant, "extraction", 0)
    assert budget.exhausted
    assert budget.daily_tokens == 0
    assert budget.used_today == 0
    cid = _talk(memory, s)
    jid = _extract_job(memory, s, cid)
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 0  # not claimed
    job = memory.jobs.get(jid)
    assert job.status is JobStatus.QUEUED
    assert job.attempts == 0
    assert memory.jobs.blocked_reasons([job]) == {jid: "budget"}
    assert llm.calls == []
    # Another tenant's jobs are not held back by this tenant's budget.
    t = fresh_scope()
    _run_extraction(memory, t, _talk(memory, t))

    memory.usage.set_budget(s.tenant, "extraction", 1_000_000)
    assert memory.jobs.blocked_reasons([memory.jobs.get(jid)]) == {}
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 1
    job = memory.jobs.get(jid)
    assert job.status is JobStatus.DONE
    assert job.attempts == 1
    [b] = memory.usage.budgets(s.tenant)
    assert b.purpose == "extraction"
    assert 0 < b.used_today < 1_000_000
    assert not b.exhausted

    # Spent today beyond a lowered budget: held back again, until it is cleared.
    memory.usage.set_budget(s.tenant, "extraction", b.used_today)
    c2 = _talk(memory, s, "I like black coffee.")
    jid2 = _extract_job(memory, s, c2)
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 0
    assert memory.jobs.blocked_reasons([memory.jobs.get(jid2)]) == {jid2: "budget"}
    assert memory.usage.clear_budget(s.tenant, "extraction") is True
    assert memory.usage.clear_budget(s.tenant, "extraction") is False
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 1


def test_the_next_day_resumes_a_used_up_budget(memory: Memory, models: Models) -> None:
    llm = FakeLLM(rule_extractor)
    models(memory, facts_llm=llm, facts_embedder=None)
    s = fresh_scope()
    memory.usage.set_budget(s.tenant, "extraction", 0)
    jid = _extract_job(memory, s, _talk(memory, s))
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 0
    # The budget is per UTC day: spent yesterday does not count today, and a budget of
    # 0 blocks every day. Raise it, then use it up "yesterday": today it runs.
    memory.usage.set_budget(s.tenant, "extraction", 10)
    yesterday = memory.core.rt.clock() - 86_400_000_000
    _spend(memory, s.tenant, "extraction", 50, yesterday)
    assert memory.jobs.blocked_reasons([memory.jobs.get(jid)]) == {}
    _spend(memory, s.tenant, "extraction", 50, memory.core.rt.clock())
    assert memory.jobs.blocked_reasons([memory.jobs.get(jid)]) == {jid: "budget"}
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 0


def _spend(mem: Memory, tenant: str, purpose: str, tokens: int, at: int) -> None:
    from memstrata.storage.plan import write
    from memstrata.usage.store import UsageRow, insert_rows

    row = UsageRow(tenant, "u", "", purpose, "m", "llm", 1, 0, tokens, 0, 10, at)
    mem.core.engine.run(write(lambda: insert_rows([row], [mem.core.rt.make_id()])))


def test_report_period_grouping_and_bad_input(memory: Memory) -> None:
    s = fresh_scope()
    now = memory.core.rt.clock()
    _spend(memory, s.tenant, "extraction", 10, now - 40 * 86_400_000_000)  # outside 30 days
    _spend(memory, s.tenant, "compaction", 20, now - 1_000_000)
    _spend(memory, s.tenant, "extraction", 30, now - 2_000_000)
    report = memory.usage.report(s.tenant)
    assert [(i.key, i.tokens) for i in report.items] == [("compaction", 20), ("extraction", 30)]
    start = datetime.now(UTC) - timedelta(days=60)
    report = memory.usage.report(s.tenant, start=start.isoformat())
    assert [(i.key, i.tokens) for i in report.items] == [("compaction", 20), ("extraction", 40)]
    assert report.total.tokens == 60
    page = memory.usage.report(s.tenant, start=start, limit=1)
    assert [i.key for i in page.items] == ["compaction"]
    assert page.next_cursor
    rest = memory.usage.report(s.tenant, start=start, limit=1, cursor=page.next_cursor)
    assert [i.key for i in rest.items] == ["extraction"]
    assert rest.next_cursor is None
    for bad in ({"start": "yesterday"}, {"end": "2026-13-01"}, {"group_by": "model"}):
        with pytest.raises(InvalidInput):
            memory.usage.report(s.tenant, **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        memory.usage.report(s.tenant, start="2026-02-01", end="2026-01-01")
    with pytest.raises(InvalidInput):
        memory.usage.set_budget(s.tenant, "extraction", -1)
    with pytest.raises(InvalidInput):
        memory.usage.set_budget(s.tenant, "bad purpose!", 5)


def test_deleting_a_user_keeps_the_tenant_totals_without_the_user(memory: Memory) -> None:
    s = fresh_scope()
    memory.conversations.create(s)  # the user exists
    _spend(memory, s.tenant, "extraction", 10, memory.core.rt.clock())
    with usage_scope(s.tenant, s.user, purpose="compaction"):
        memory.core.usage.record_embed(1, 0.0, True, tokens=5, model="e")
    memory.usage.flush()
    _spend_as(memory, s, 7)
    memory.users.delete(s)
    users = [i.key for i in memory.usage.report(s.tenant, group_by="user").items]
    assert s.user not in users
    assert ANONYMOUS_USER in users
    assert memory.usage.report(s.tenant).total.tokens == 22


def _spend_as(mem: Memory, scope: Scope, tokens: int) -> None:
    from memstrata.storage.plan import write
    from memstrata.usage.store import UsageRow, insert_rows

    row = UsageRow(
        scope.tenant, scope.user, "", "chat", "m", "llm", 1, 0, tokens, 0, 1, mem.core.rt.clock()
    )
    mem.core.engine.run(write(lambda: insert_rows([row], [mem.core.rt.make_id()])))


def test_calls_noted_before_a_users_deletion_are_re_attributed(memory: Memory) -> None:
    s = fresh_scope()
    memory.conversations.create(s)
    ledger = memory.core.usage_ledger
    with usage_scope(s.tenant, s.user, purpose="compaction"):
        memory.core.usage.record_embed(1, 0.0, True, tokens=5, model="e")
    memory.users.delete(s)  # flushed first, then re-attributed by the cascade
    with usage_scope(s.tenant, s.user, purpose="compaction"):
        memory.core.usage.record_embed(1, 0.0, True, tokens=6, model="e")
    ledger.forget_user(s.tenant, s.user)  # a call noted after the flush, before the commit
    memory.usage.flush()
    assert {r[0] for r in _rows(memory, s.tenant)} == {ANONYMOUS_USER}
    assert memory.usage.report(s.tenant).total.tokens == 11


def test_a_search_records_its_catch_up_and_query_embeddings_for_the_caller(
    memory: Memory,
) -> None:
    from memstrata.testing import FakeEmbedder

    memory.core.recall.use(FakeEmbedder())
    s = fresh_scope()
    cid = _talk(memory, s, "I keep bees in the garden.")
    memory.recall.search(s, "bees", conversation_id=cid)
    memory.context(s, cid, budget=2000, query="garden bees")
    memory.usage.flush()
    rows = _rows(memory, s.tenant)
    assert rows
    assert {(r[0], r[2]) for r in rows} == {(s.user, "embed")}  # attributed, none left out
    by_purpose = {i.key: i for i in memory.usage.report(s).items}
    assert by_purpose["query"].calls == 2  # the search's query and the context's
    assert by_purpose["embedding"].calls >= 1  # the messages caught up before searching
    assert by_purpose["query"].input_tokens > 0
    assert _rows(memory, "") == []  # nothing unattributed


def test_a_kind_registered_with_a_purpose_is_held_back_by_its_budget(memory: Memory) -> None:
    ran: list[str] = []
    memory.core.jobs.register("demo.digest", lambda job, m: ran.append(job.id), purpose="digest")
    s = fresh_scope()
    memory.usage.set_budget(s.tenant, "digest", 0)
    job = memory.jobs.enqueue(s, "demo.digest")
    assert memory.jobs.run_pending(["demo.digest"]) == 0
    assert memory.jobs.blocked_reasons([job]) == {job.id: "budget"}
    memory.usage.clear_budget(s.tenant, "digest")
    assert memory.jobs.run_pending(["demo.digest"]) == 1
    assert ran == [job.id]
