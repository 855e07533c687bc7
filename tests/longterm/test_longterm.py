"""Long-term memory end to end on every backend: capture and the debounced queue, extraction
with a fake model, supersession, the fact store, injection, forgetting, isolation."""

from __future__ import annotations

import gzip
import json
import threading
from collections import Counter
from typing import Any

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.errors import ConfigurationError, Conflict, InvalidInput, NotFound
from memstrata.jobs.ops import JobStatus
from memstrata.longterm import FactStatus
from memstrata.longterm.service import EXTRACT_JOB
from memstrata.testing import FakeEmbedder, FakeLLM
from memstrata.testing.conformance import fresh_scope
from support import Models


def _setup(models: Models, mem: Memory, llm: FakeLLM | None) -> None:

    models(
        mem, facts_llm=llm, facts_embedder=None
    )  # exact-key dedupe only (the near-duplicate test sets one)


def _talk(mem: Memory, scope: Scope, cid: str, *pairs: tuple[str, str]) -> None:
    for user, reply in pairs:
        mem.messages.append(scope, cid, role="user", content=user)
        mem.messages.append(scope, cid, role="assistant", content=reply)


def _contents(mem: Memory, scope: Scope, status: str = "active") -> list[str]:
    return sorted(f.content for f in mem.facts.list(scope, status=status, limit=500).items)


# -- extraction and the fact store -----------------------------------------------------------


def test_extraction_stores_facts_with_provenance_and_injects_them(
    memory: Memory, models: Models
) -> None:
    llm = FakeLLM(rule_extractor)
    _setup(models, memory, llm)
    s = fresh_scope()
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("I like green tea. I work as a nurse.", "Noted!"))
    result = memory.longterm.flush(s, c.id)
    assert result.outcome == "applied"
    assert result.counts["added"] == 1
    assert result.counts["profile_sections"] == 1
    [fact] = memory.facts.list(s).items
    assert fact.content == "User likes green tea"
    assert fact.category == "preference"
    assert fact.confidence == 0.95
    assert fact.origin.value == "extracted"
    user_msg = memory.messages.path(s, c.id)[0]
    assert [(x.conversation_id, x.message_id) for x in fact.sources] == [(c.id, user_msg.id)]
    profile = {p.name: p.summary for p in memory.longterm.profile(s)}
    assert profile["workContext"] == "Works as a nurse."

    # The next conversation's context carries both, once, HTML-escaped and byte-identical.
    c2 = memory.conversations.create(s)
    memory.messages.append(s, c2.id, role="user", content="What should I drink?")
    first = memory.context(s, c2.id, budget=3000)
    again = memory.context(s, c2.id, budget=3000)
    assert first.messages == again.messages
    blocks = [m["content"] for m in first.messages if m["role"] == "system"]
    assert "<memory>\n[preference | 0.95] User likes green tea\n</memory>" in blocks
    assert "<user-profile>\nWork: Works as a nurse.\n</user-profile>" in blocks
    assert first.report.tiers["facts"].items == 1

    # Nothing new: the next flush reads nothing and asks no model.
    calls = len(llm.calls)
    assert memory.longterm.flush(s, c.id).outcome == "empty"
    assert len(llm.calls) == calls
    log = memory.longterm.updates(s)
    assert [u["outcome"] for u in log] == ["empty", "applied"]
    assert log[1]["prompt_tokens"] > 0
    assert log[1]["completion_tokens"] > 0


def test_injection_escapes_and_puts_corrections_first(memory: Memory, models: Models) -> None:
    _setup(models, memory, None)
    s = fresh_scope()
    memory.facts.add(s, "Likes <b>bold</b> & loud music", category="preference", confidence=0.99)
    memory.facts.add(
        s, "Dates are day-first", category="correction", confidence=0.8, source_error="used m/d"
    )
    c = memory.conversations.create(s)
    memory.messages.append(s, c.id, role="user", content="hello")
    ctx = memory.context(s, c.id, budget=3000)
    [block] = [m["content"] for m in ctx.messages if m["content"].startswith("<memory>")]
    assert block == (
        "<memory>\n"
        "[correction | 0.80] Dates are day-first (avoid: used m/d)\n"
        "[preference | 0.99] Likes &lt;b&gt;bold&lt;/b&gt; &amp; loud music\n"
        "</memory>"
    )


def test_memory_block_respects_its_cap_inside_the_budget(memory: Memory, models: Models) -> None:
    _setup(models, memory, None)
    s = fresh_scope()
    for i in range(60):
        memory.facts.add(s, f"fact number {i} " + "detail " * 30, confidence=0.5 + i / 200)
    c = memory.conversations.create(s)
    memory.messages.append(s, c.id, role="user", content="hi")
    ctx = memory.context(s, c.id, budget=20_000)
    facts = ctx.report.tiers["facts"]
    assert 0 < facts.granted <= 2000
    assert facts.items < 60
    # Highest confidence first: the newest facts (most confident) are the ones kept.
    [block] = [m["content"] for m in ctx.messages if m["content"].startswith("<memory>")]
    assert "fact number 59 " in block
    assert "fact number 0 " not in block
    small = memory.context(s, c.id, budget=700)
    assert small.report.total <= 700
    assert 0 < small.report.tiers["facts"].granted <= 700


def test_a_contradiction_supersedes_and_history_keeps_both(memory: Memory, models: Models) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    s = fresh_scope()
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("I like coffee", "ok"))
    memory.longterm.flush(s, c.id)
    [old] = memory.facts.list(s).items
    _talk(memory, s, c.id, ("I no longer like coffee", "understood"))
    result = memory.longterm.flush(s, c.id)
    assert result.counts["superseded"] == 1
    assert _contents(memory, s) == ["User no longer likes coffee"]
    old = memory.facts.get(s, old.id)
    [new] = memory.facts.list(s).items
    assert old.status is FactStatus.SUPERSEDED
    assert old.superseded_by == new.id
    assert old.reason == "the user changed their mind"
    history = memory.facts.history(s, new.id)
    assert [(e.fact_id, e.event) for e in history] == [
        (old.id, "created"),
        (new.id, "created"),
        (old.id, "superseded"),
    ]
    assert memory.facts.history(s, old.id) == history
    assert _contents(memory, s, "all") == ["User likes coffee", "User no longer likes coffee"]


def test_duplicates_low_confidence_and_upload_mentions_are_not_stored(
    memory: Memory, models: Models
) -> None:
    reply = {
        "newFacts": [
            {"content": "Likes  TEA", "category": "preference", "confidence": 0.9},
            {"content": "likes tea", "category": "preference", "confidence": 0.95},
            {"content": "Maybe likes jazz", "category": "preference", "confidence": 0.5},
            {"content": "The user uploaded a file report.pdf.", "confidence": 0.9},
        ]
    }
    _setup(models, memory, FakeLLM([json.dumps(reply)]))
    s = fresh_scope()
    memory.facts.add(s, "likes tea")  # manual, already there
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("tea please", "sure"))
    result = memory.longterm.flush(s, c.id)
    assert result.counts["added"] == 0
    assert _contents(memory, s) == ["likes tea"]
    assert any("below 0.7" in n for n in result.notes)


def test_near_duplicates_by_embedding_are_skipped_but_a_replacement_is_not(
    memory: Memory, models: Models
) -> None:
    reply = {
        "newFacts": [
            {"content": "User likes green tea!", "category": "preference", "confidence": 0.9},
        ]
    }
    _setup(
        models,
        memory,
        FakeLLM(
            [
                json.dumps(reply),
                json.dumps(
                    {
                        **reply,
                        "newFacts": [
                            {**reply["newFacts"][0], "supersedes": ["f1"], "reason": "restated"}
                        ],
                    }
                ),
            ]
        ),
    )
    models(memory, facts_embedder=FakeEmbedder())
    memory.longterm.kit.near_duplicate = 0.9
    s = fresh_scope()
    memory.facts.add(s, "User likes green tea")
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("tea", "ok"))
    result = memory.longterm.flush(s, c.id)
    assert result.counts["added"] == 0
    assert any("already known" in n for n in result.notes)
    _talk(memory, s, c.id, ("tea again", "ok"))
    result = memory.longterm.flush(s, c.id)
    assert result.counts == {
        "profile_sections": 0,
        "added": 1,
        "superseded": 1,
        "removed": 0,
        "evicted": 0,
    }


def test_the_cap_evicts_the_least_confident_and_keeps_manual_facts(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory, None)
    memory.longterm.kit.max_facts = 10
    s = fresh_scope()
    memory.facts.add(s, "manual fact", confidence=0.1)
    doc = {"facts": [{"content": f"fact {i}", "confidence": 0.5 + i / 100} for i in range(15)]}
    counts = memory.longterm.import_memory(s, doc)
    assert counts["facts_added"] == 15
    assert counts["evicted"] == 6
    active = _contents(memory, s)
    assert len(active) == 10
    assert "manual fact" in active
    assert sorted(_contents(memory, s, "evicted")) == sorted(f"fact {i}" for i in range(6))


def test_fact_store_crud_and_errors(memory: Memory, models: Models) -> None:
    _setup(models, memory, None)
    s = fresh_scope()
    f = memory.facts.add(s, "  speaks   French ", category="knowledge", confidence=0.8)
    assert f.content == "speaks French"
    assert f.origin.value == "manual"
    with pytest.raises(Conflict):
        memory.facts.add(s, "SPEAKS french")
    with pytest.raises(InvalidInput):
        memory.facts.add(s, "x", category="gossip")
    with pytest.raises(InvalidInput):
        memory.facts.add(s, "x", confidence=1.5)
    with pytest.raises(InvalidInput):
        memory.facts.add(s, "   ")
    edited = memory.facts.edit(s, f.id, content="speaks French and German", confidence=0.9)
    assert edited.content == "speaks French and German"
    assert edited.confidence == 0.9
    with pytest.raises(InvalidInput):
        memory.facts.edit(s, f.id, colour="red")
    events = memory.facts.history(s, f.id)
    assert [(e.event, e.content) for e in events] == [
        ("created", "speaks French"),
        ("edited", "speaks French"),
    ]
    other = fresh_scope()
    for call in (
        lambda: memory.facts.get(other, f.id),
        lambda: memory.facts.edit(other, f.id, content="x"),
        lambda: memory.facts.delete(other, f.id),
        lambda: memory.facts.history(other, f.id),
        lambda: memory.facts.get(Scope(s.tenant, s.user, "agent-x"), f.id),
    ):
        with pytest.raises(NotFound):
            call()
    memory.facts.delete(s, f.id)
    with pytest.raises(NotFound):
        memory.facts.get(s, f.id)
    assert memory.facts.list(s, status="all").items == []


# -- the queue ---------------------------------------------------------------------------------


def test_ten_observes_in_the_window_make_one_call_with_the_flags_ored(
    memory: Memory, models: Models
) -> None:
    llm = FakeLLM(rule_extractor)
    _setup(models, memory, llm)
    s = fresh_scope()
    c = memory.conversations.create(s)
    texts = ["That's wrong, try again"] + [f"I like thing {i}" for i in range(8)] + ["Perfect!"]
    jobs = []
    for i, text in enumerate(texts):
        _talk(memory, s, c.id, (text, f"reply {i}"))
        # Only the last six turns carry signals: the correction is out of sight by the end.
        jobs.append(memory.longterm.observe(s, c.id))
    assert len({j.id for j in jobs}) == 1
    job = memory.jobs.get(jobs[-1].id)
    assert job.enqueue_count == 10
    assert job.flags == {"correction": True, "reinforcement": True}
    assert job.status is JobStatus.QUEUED
    assert job.run_after > job.created_at
    memory.longterm.kit.debounce_s = 1.0
    _force_due(memory, job.id)
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 1
    assert len(llm.calls) == 1
    prompt = llm.calls[0].messages[-1]["content"]
    assert "IMPORTANT" in prompt
    assert prompt.count("IMPORTANT") == 2
    assert len(_contents(memory, s)) == 8
    assert memory.jobs.get(job.id).status is JobStatus.DONE


def _force_due(memory: Memory, job_id: str) -> None:
    from memstrata.storage.plan import Exec, write

    def op() -> Any:
        yield Exec("UPDATE jobs SET run_after = 0 WHERE id = ?", (job_id,))

    memory.core.engine.run(write(op))


def test_capture_on_append_queues_one_debounced_job_per_conversation(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory, None)
    memory.longterm.kit.capture = True
    s = fresh_scope()
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("I like chess", "nice"), ("ok", "fine"))
    memory.messages.append(
        s,
        c.id,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
    )
    memory.messages.append(s, c.id, role="tool", content="42", tool_call_id="c1")
    jobs = memory.jobs.list(user=s.user, tenant=s.tenant).items
    assert len(jobs) == 1
    assert jobs[0].kind == EXTRACT_JOB
    assert jobs[0].enqueue_count == 4  # user, reply, user, reply: not the tool turns
    # No LLM: the job waits, blocked, and is never claimed (nor dropped).
    assert memory.jobs.blocked(EXTRACT_JOB) is not None
    _force_due(memory, jobs[0].id)
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 0
    assert memory.jobs.get(jobs[0].id).status is JobStatus.QUEUED
    status = memory.longterm.status()
    assert status["extraction"] == "disabled"
    assert status["jobs"]["queued"] >= 1
    with pytest.raises(ConfigurationError):
        memory.longterm.flush(s, c.id)
    # Configure a model: the waiting job runs.
    models(memory, facts_llm=FakeLLM(rule_extractor))
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 1
    assert _contents(memory, s) == ["User likes chess"]


def test_malformed_output_is_repaired_or_retried_then_dead_lettered(
    memory: Memory, models: Models
) -> None:
    good = json.dumps({"newFacts": [{"content": "likes rain", "confidence": 0.9}]})
    llm = FakeLLM([good[:-2], "no json here", good])
    _setup(models, memory, llm)
    s = fresh_scope()
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("rain", "ok"))
    # A truncated answer is repaired without another call.
    assert memory.longterm.flush(s, c.id).llm_calls == 1
    assert _contents(memory, s) == ["likes rain"]
    # Prose first: one retry with the error fed back.
    _talk(memory, s, c.id, ("more rain", "ok"))
    assert memory.longterm.flush(s, c.id).llm_calls == 2
    assert "could not be used" in llm.calls[2].messages[-1]["content"]

    # Never usable: each attempt makes max_llm_calls calls, then the job is dead.
    bad = FakeLLM(
        ['{"newFacts": [{"confidence": true}], "factsToRemove": [{"id": "f1", "reason": "x"}]}'],
        cycle=True,
    )
    models(memory, facts_llm=bad)
    memory.longterm.kit.max_attempts = 2
    _talk(memory, s, c.id, ("I like snow", "ok"))
    job = memory.longterm.observe(s, c.id)
    for _ in range(2):
        _force_due(memory, job.id)
        assert memory.jobs.run_pending([EXTRACT_JOB]) == 1
    dead = memory.jobs.get(job.id)
    assert dead.status is JobStatus.DEAD
    assert "ExtractionFailed" in (dead.last_error or "")
    assert len(bad.calls) == 4
    failed = [u for u in memory.longterm.updates(s) if u["outcome"] == "failed"]
    assert len(failed) == 2
    assert "unsafe partial update" in failed[0]["error"]
    assert '"confidence": true' in failed[0]["raw_output"]
    # The removal that came with malformed facts was not applied; nothing was lost.
    assert _contents(memory, s) == ["likes rain"]
    memory.jobs.retry(job.id)
    models(memory, facts_llm=FakeLLM(rule_extractor))
    _force_due(memory, job.id)
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 1
    assert "User likes snow" in _contents(memory, s)


def test_a_model_error_fails_the_attempt_and_keeps_the_messages_unseen(
    memory: Memory, models: Models
) -> None:
    llm = FakeLLM(rule_extractor)
    llm.fail_next(1)
    _setup(models, memory, llm)
    s = fresh_scope()
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("I like maps", "ok"))
    with pytest.raises(Exception, match=r"unavailable|fail"):
        memory.longterm.flush(s, c.id)
    assert memory.longterm.updates(s)[0]["outcome"] == "failed"
    assert memory.longterm.flush(s, c.id).outcome == "applied"
    assert _contents(memory, s) == ["User likes maps"]


def test_a_rerun_after_a_landed_update_changes_nothing(memory: Memory, models: Models) -> None:
    """A worker that died after the update committed but before the job completed: the
    job runs again and finds nothing new, so nothing is applied twice."""
    llm = FakeLLM(rule_extractor)
    _setup(models, memory, llm)
    s = fresh_scope()
    c = memory.conversations.create(s)
    _talk(memory, s, c.id, ("I like kites", "ok"))
    job = memory.longterm.observe(s, c.id)
    memory.longterm.flush(s, c.id)  # the update lands ...
    _force_due(memory, job.id)
    assert memory.jobs.run_pending([EXTRACT_JOB]) == 1  # ... and the job runs again
    assert len(llm.calls) == 1
    assert _contents(memory, s) == ["User likes kites"]


def test_branches_are_extracted_once_each(memory: Memory, models: Models) -> None:
    llm = FakeLLM(rule_extractor)
    _setup(models, memory, llm)
    s = fresh_scope()
    c = memory.conversations.create(s)
    q = memory.messages.append(s, c.id, role="user", content="I like owls")
    memory.messages.append(s, c.id, role="assistant", content="a")
    memory.longterm.flush(s, c.id)
    # Edit the question: a sibling branch whose user message is new.
    memory.messages.append(s, c.id, role="user", content="I like hawks", parent_id=q.parent_id)
    memory.messages.append(s, c.id, role="assistant", content="b")
    memory.longterm.flush(s, c.id)
    # The fact of the edited-away question is withdrawn (see test_branch_facts.py).
    assert _contents(memory, s) == ["User likes hawks"]
    assert _contents(memory, s, "superseded") == ["User likes owls"]
    assert "owls" not in llm.calls[1].messages[-1]["content"].split("<conversation>")[1]


# -- forgetting --------------------------------------------------------------------------------


def test_deleting_a_conversation_forgets_what_only_it_taught(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    s = fresh_scope()
    a = memory.conversations.create(s)
    b = memory.conversations.create(s)
    _talk(memory, s, a.id, ("I like figs. I work as a baker.", "ok"))
    memory.longterm.flush(s, a.id)
    _talk(memory, s, b.id, ("I like figs. I like plums", "ok"))
    memory.longterm.flush(s, b.id)
    memory.facts.add(s, "manual note")
    _talk(memory, s, b.id, ("I no longer like plums", "ok"))
    memory.longterm.flush(s, b.id)
    assert _contents(memory, s) == ["User likes figs", "User no longer likes plums", "manual note"]

    memory.conversations.delete(s, b.id)
    # Plums came only from b: erased, and its supersession is gone with it. Figs stay (a
    # taught them too), without b in their provenance. The manual fact stays.
    assert _contents(memory, s, "all") == ["User likes figs", "manual note"]
    figs = next(f for f in memory.facts.list(s).items if f.content == "User likes figs")
    assert {x.conversation_id for x in figs.sources} == {a.id}
    assert all(u["conversation_id"] != b.id for u in memory.longterm.updates(s))
    profile = {p.name: p.summary for p in memory.longterm.profile(s)}
    assert profile["workContext"] == "Works as a baker."
    memory.conversations.delete(s, a.id)
    assert _contents(memory, s, "all") == ["manual note"]
    assert all(p.summary == "" for p in memory.longterm.profile(s))


def test_deleting_a_user_erases_every_trace_of_them(memory: Memory, models: Models) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    s = fresh_scope()
    keep = Scope(s.tenant, "someone-else")
    canary = "zebracanary7731"
    for scope in (s, keep):
        c = memory.conversations.create(scope)
        memory.messages.append(scope, c.id, role="user", content="hello")
        word = canary if scope is s else "otherword"
        _talk(memory, scope, c.id, (f"I like {word}. I work as {word} keeper.", word))
        memory.longterm.flush(scope, c.id)
        memory.longterm.observe(scope, c.id)
        memory.facts.add(scope, f"manual {word}")
        node = memory.nodes.open(scope, "app1", c.id, "llm-node")
        node.add_turn(message_id=c.id, user_content=f"node {word}", assistant_content=word)
        node.flush()
    agent = Scope(s.tenant, s.user, "helper")
    memory.facts.add(agent, f"agent fact {canary}")
    assert _blobs_mentioning(memory, canary)  # the scan sees what is there
    assert memory.users.delete(s) >= 1
    memory.jobs.run_pending()  # the blob purge the cascade queued
    assert _tables_mentioning(memory, canary) == []
    # Only the deletion's receipt names the user (ids and counts, never content).
    assert _tables_mentioning(memory, s.user) == ["deletion_receipts"]
    assert _blobs_mentioning(memory, canary) == []
    assert "User likes otherword" in _contents(memory, keep)
    assert _blobs_mentioning(memory, "otherword")


def _blobs_mentioning(memory: Memory, needle: str) -> list[str]:
    from memstrata.nodes.service import blobs_for

    store = blobs_for(memory.core).store
    found = []
    for meta in store.list_prefix(""):
        data = store.get(meta.key).data
        if data[:2] == b"\x1f\x8b":  # node memory objects are gzip-compressed JSON
            data = gzip.decompress(data)
        if needle.encode() in data:
            found.append(meta.key)
    return found


def _tables_mentioning(memory: Memory, needle: str) -> list[str]:
    from memstrata.storage.plan import Query, read

    engine = memory.core.engine

    def tables() -> Any:
        if engine.dialect == "sqlite":
            rows = yield Query("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = yield Query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        return [r[0] for r in rows]

    found = []
    for table in engine.run(read(tables)):
        if table.startswith(("recall_terms_", "sqlite_")):
            continue  # FTS5 shadow tables hold tokens, read through recall_terms itself

        def rows(t: str = table) -> Any:
            return (yield Query(f"SELECT * FROM {t}"))

        if any(needle in repr(r) for r in engine.run(read(rows))):
            found.append(table)
    return found


# -- isolation under concurrency ------------------------------------------------------------------


def test_users_stay_isolated_under_concurrent_extraction(memory: Memory, models: Models) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    tenant = fresh_scope().tenant
    scopes = [Scope(tenant, f"user{i}") for i in range(4)] + [Scope(tenant, "user0", "bot")]
    errors: list[BaseException] = []

    def run(scope: Scope, n: int) -> None:
        try:
            for round_ in range(3):
                c = memory.conversations.create(scope)
                tag = f"{scope.user}{scope.agent or ''}x{round_}"
                _talk(memory, scope, c.id, (f"I like canary{tag}", "ok"))
                memory.longterm.flush(scope, c.id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s, i)) for i, s in enumerate(scopes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for scope in scopes:
        mine = f"{scope.user}{scope.agent or ''}x"
        contents = _contents(memory, scope)
        assert contents == sorted(f"User likes canary{mine}{r}" for r in range(3))
    counts = Counter(u["outcome"] for s in scopes for u in memory.longterm.updates(s))
    assert counts == Counter({"applied": 15})


def test_compaction_makes_the_pending_extraction_due_at_once(
    memory: Memory, models: Models
) -> None:
    from memstrata.context.summarize import SECTIONS

    _setup(models, memory, None)
    memory.longterm.kit.capture = True
    memory.longterm.kit.debounce_s = 300.0
    memory.core.context.auto_compact = False
    models(
        memory,
        llm=FakeLLM(
            ["\n".join(f"### {name}\n- point about {name.lower()} 42" for name in SECTIONS)],
            cycle=True,
        ),
    )
    s = fresh_scope()
    c = memory.conversations.create(s)
    for i in range(40):
        _talk(memory, s, c.id, (f"question {i} " + "word " * 60, "answer " * 60))
    [job] = memory.jobs.list(tenant=s.tenant, user=s.user).items
    assert job.run_after > job.created_at  # debounced: 300 s out
    result = memory.compact(s, c.id)
    assert result.outcome == "compacted", result.reason
    due = memory.jobs.get(job.id)
    assert due.run_after <= due.updated_at  # due now: extraction runs before the window moves on
