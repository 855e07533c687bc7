"""What the facade offers so that surfaces need not go around it: ``facts.add(id=...)``
with the idempotency rules of messages, and ``compaction.schedule(...)`` returning the
queued job."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from memstrata import AsyncMemory, Memory, Scope
from memstrata.api.core import Core
from memstrata.config import Settings
from memstrata.context import COMPACT_JOB
from memstrata.errors import ConfigurationError, Conflict, InvalidInput, NotFound
from memstrata.jobs.ops import JobStatus
from memstrata.runtime import Runtime
from memstrata.testing.conformance import fresh_scope
from memstrata.tokens import get_tokenizer


def test_fact_id_is_the_callers_and_a_replay_changes_nothing(memory: Memory) -> None:
    s = fresh_scope()
    fid = str(uuid.uuid4())
    fact = memory.facts.add(s, "Prefers tea", category="preference", id=fid)
    assert fact.id == fid
    events = memory.facts.history(s, fid)
    again = memory.facts.add(s, "Prefers  tea", category="preference", id=fid)  # same, stored
    assert again == fact
    assert memory.facts.history(s, fid) == events
    assert [f.id for f in memory.facts.list(s).items] == [fid]


@pytest.mark.parametrize(
    ("content", "category", "confidence"),
    [
        ("Prefers coffee", "preference", 1.0),
        ("Prefers tea", "context", 1.0),
        ("Prefers tea", "preference", 0.5),
    ],
)
def test_fact_id_with_other_fields_is_a_conflict(
    memory: Memory, content: str, category: str, confidence: float
) -> None:
    s = fresh_scope()
    fid = str(uuid.uuid4())
    memory.facts.add(s, "Prefers tea", category="preference", id=fid)
    with pytest.raises(Conflict):
        memory.facts.add(s, content, category=category, confidence=confidence, id=fid)
    assert memory.facts.get(s, fid).content == "Prefers tea"


def test_fact_id_of_another_scope_is_a_conflict_and_shows_nothing(memory: Memory) -> None:
    owner, other = fresh_scope(), fresh_scope()
    fid = str(uuid.uuid4())
    memory.facts.add(owner, "Lives in Lyon", id=fid)
    with pytest.raises(Conflict) as caught:
        memory.facts.add(other, "Lives in Lyon", id=fid)
    assert "Lyon" not in str(caught.value)
    assert memory.facts.list(other).items == []
    with pytest.raises(NotFound):
        memory.facts.get(other, fid)


def test_fact_id_must_be_a_uuid_and_content_stays_unique(memory: Memory) -> None:
    s = fresh_scope()
    with pytest.raises(InvalidInput):
        memory.facts.add(s, "Likes jazz", id="not-a-uuid")
    memory.facts.add(s, "Likes jazz")
    with pytest.raises(Conflict):  # the same active content under a new id, as without id=
        memory.facts.add(s, "Likes jazz", id=str(uuid.uuid4()))


def test_schedule_queues_one_compaction_per_conversation(memory: Memory) -> None:
    s = fresh_scope()
    conv = memory.conversations.create(s)
    first = memory.messages.append(s, conv.id, role="user", content="hello")
    job = memory.compaction.schedule(s, conv.id, delay_s=30.0, max_wait_s=60.0)
    assert (job.kind, job.conversation_id, job.status) == (COMPACT_JOB, conv.id, JobStatus.QUEUED)
    assert job.payload == {"leaf_id": None}
    merged = memory.compaction.schedule(s, conv.id, leaf_id=first.id)
    assert merged.id == job.id
    assert merged.payload == {"leaf_id": first.id}
    other = memory.conversations.create(s)
    assert memory.compaction.schedule(s, other.id).id != job.id


def test_schedule_refuses_a_conversation_of_another_scope(memory: Memory) -> None:
    owner, other = fresh_scope(), fresh_scope()
    conv = memory.conversations.create(owner)
    with pytest.raises(NotFound):
        memory.compaction.schedule(other, conv.id)
    assert memory.jobs.list(tenant=other.tenant).items == []


def test_the_async_facade_has_both(memory: Memory) -> None:
    async def main() -> None:
        amem = AsyncMemory(memory.core)
        s = Scope(fresh_scope().tenant, "u1")
        fid = str(uuid.uuid4())
        fact = await amem.facts.add(s, "Speaks Basque", id=fid)
        assert (await amem.facts.add(s, "Speaks Basque", id=fid)) == fact
        conv = await amem.conversations.create(s)
        job = await amem.compaction.schedule(s, conv.id)
        assert job.kind == COMPACT_JOB

    anyio.run(main)


def test_core_installs_its_features_in_order(tmp_path: Path) -> None:
    from memstrata.api.features import FEATURES, Feature, Kits
    from memstrata.backends.registry import open_engine
    from memstrata.retention import RETENTION_JOB

    seen: list[str] = []

    def probe(core: Core, kits: Kits) -> Kits:
        seen.append(",".join(f.name for f in core.features))
        assert kits.context is not None
        assert kits.recall is not None
        return kits

    extra = Feature("probe", probe)
    s = Settings(home=tmp_path, worker="off")
    rt = Runtime(tokenizer=get_tokenizer(s.token_encoding))
    core = Core(open_engine(f"sqlite:///{tmp_path}/m.db"), rt, s, features=(*FEATURES, extra))
    try:
        assert seen == [",".join(f.name for f in (*FEATURES, extra))]
        assert RETENTION_JOB in core.jobs.kinds()  # every listed feature ran
        assert core.recall.tier in core.context.providers
    finally:
        core.close()
    bare = Core(open_engine(f"sqlite:///{tmp_path}/b.db"), rt, s, features=())
    try:
        assert bare.jobs.kinds() == []
        assert bare.kits == Kits()
        assert bare.fact_usage is None
        with pytest.raises(ConfigurationError, match="recall feature is not installed"):
            bare.recall  # noqa: B018
    finally:
        bare.close()
