"""Prompt provenance through the remote client: record=True, context_id on the append,
provenance of the reply and a fact's usage, as the embedded facade answers them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.client import RemoteMemory
from memstrata.config import Settings
from memstrata.errors import Conflict, NotFound
from support import served_in_thread

ALICE = Scope("acme", "alice")


@dataclasses.dataclass
class Live:
    url: str
    store: Memory


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    from memstrata.server import create_app

    db = f"sqlite:///{(tmp_path / 'server.db').as_posix()}"
    settings = Settings(home=tmp_path / "home", db=db, worker="off")
    with (
        served_in_thread(create_app(settings=settings)) as url,
        Memory.open(db, settings=settings) as store,
    ):
        yield Live(url, store)


def test_remote_provenance_matches_the_store(live: Live) -> None:
    key = live.store.keys.create("acme", user="alice")[1]
    with RemoteMemory(live.url, api_key=key) as mem:
        cid = mem.conversations.create(ALICE).id
        mem.messages.append(ALICE, cid, role="user", content="Which tea?")
        fact = mem.facts.add(ALICE, "Likes green tea", category="preference")
        assert mem.context(ALICE, cid).context_id is None
        ctx = mem.context(ALICE, cid, record=True)
        assert ctx.context_id is not None
        reply = mem.messages.append(
            ALICE, cid, role="assistant", content="Green.", context_id=ctx.context_id
        )
        remote = mem.provenance.get(ALICE, cid, reply.id)
        assert remote == live.store.provenance.get(ALICE, cid, reply.id)
        assert remote.record is not None
        assert remote.record.id == ctx.context_id
        usage = mem.provenance.fact_usage(ALICE, fact.id)
        assert usage == live.store.provenance.fact_usage(ALICE, fact.id)
        assert [u.message_id for u in usage.items] == [reply.id]
        with pytest.raises(Conflict):
            mem.messages.append(
                ALICE, cid, role="assistant", content="Again.", context_id=ctx.context_id
            )
        with pytest.raises(NotFound):
            mem.messages.append(
                ALICE,
                cid,
                role="assistant",
                content="x",
                context_id="01900000-0000-7000-8000-00000000dead",
            )
        assert len(mem.messages.list(ALICE, cid).items) == 2
