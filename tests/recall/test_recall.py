"""Recall: keyword + vector indexing at append, hybrid search, branches, cascade, reindex."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memstrata import Memory, Scope
from memstrata.errors import InvalidInput, NotFound
from memstrata.recall.fusion import Candidate, FusionParams, fuse
from memstrata.recall.text import analyse_query, document_text, mentions_time
from memstrata.testing import FakeEmbedder
from support import scalar

SCOPE = Scope("acme", "u1")

CHAT = [
    ("user", "Ann", "I adopted a puppy named Rex from the shelter"),
    ("assistant", None, "Congratulations! What breed is Rex?"),
    ("user", "Ann", "He is a beagle and he loves chasing squirrels in the park"),
    ("assistant", None, "Beagles are energetic. Do you take him on long walks?"),
    ("user", "Ann", "My sister is learning pottery and made me a blue vase"),
    ("assistant", None, "A handmade vase is a lovely gift."),
    ("user", "Ann", "Yesterday I started training for the city marathon"),
    ("assistant", None, "Good luck with the marathon training!"),
]


def _chat(mem: Memory, scope: Scope = SCOPE, start: datetime | None = None) -> list[str]:
    conv = mem.conversations.create(scope)
    when = start or datetime(2024, 1, 1, tzinfo=UTC)
    ids = []
    for n, (role, speaker, text) in enumerate(CHAT):
        meta = {"speaker": speaker} if speaker else {}
        m = mem.messages.append(
            scope,
            conv.id,
            role=role,
            content=text,
            metadata=meta,
            occurred_at=when + timedelta(days=n // 2),
        )
        ids.append(m.id)
    return ids


@pytest.fixture
def mem(memory: Memory) -> Memory:
    memory.core.recall.use(FakeEmbedder(64))
    return memory


def test_hybrid_search_finds_the_message(mem: Memory) -> None:
    ids = _chat(mem)
    hits = mem.recall.search(SCOPE, "which breed is the dog Rex?", k=3)
    assert ids[2] in [h.message.id for h in hits[:3]]  # "He is a beagle"
    assert ids[1] in [h.message.id for h in hits[:3]]
    top = mem.recall.search(SCOPE, "pottery vase", k=1)
    assert top[0].message.id == ids[4]
    assert top[0].provenance == (ids[4],)
    assert (
        top[0].conversation_id
        == mem.messages.get(SCOPE, top[0].conversation_id, ids[4]).conversation_id
    )
    assert all(h.score > 0 for h in hits)


def test_keywords_only_without_an_embedder(mem: Memory) -> None:
    mem.core.recall.use(None)
    ids = _chat(mem)
    hits = mem.recall.search(SCOPE, "marathon", k=5)
    assert [h.message.id for h in hits][:2] == [ids[6], ids[7]] or {
        h.message.id for h in hits[:2]
    } == {ids[6], ids[7]}
    assert mem.recall.search(SCOPE, "zebra xylophone", k=5) == []


def test_conversation_filter_exclude_and_range(mem: Memory) -> None:
    a = _chat(mem)
    b = _chat(mem)
    conv_b = mem.messages.get(
        SCOPE, mem.conversations.list(SCOPE).items[0].id, b[0]
    ).conversation_id
    hits = mem.recall.search(SCOPE, "pottery vase", k=5, conversation_id=conv_b)
    assert hits
    assert all(h.conversation_id == conv_b for h in hits)
    hits = mem.recall.search(SCOPE, "pottery vase", k=3, exclude_ids=[a[4], b[4]])
    assert not {a[4], b[4]} & {h.message.id for h in hits}
    hits = mem.recall.search(SCOPE, "pottery vase", k=1, conversation_id=conv_b, message_range=1)
    assert [h.message.id for h in hits] == [b[3], b[4], b[5]]
    assert [h.neighbour_of for h in hits] == [b[4], None, b[4]]
    with pytest.raises(NotFound):
        mem.recall.search(Scope("acme", "u2"), "vase", conversation_id=conv_b)
    for bad in ({"k": 0}, {"message_range": -1}, {"exclude_ids": "x"}):
        with pytest.raises(InvalidInput):
            mem.recall.search(SCOPE, "vase", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        mem.recall.search(SCOPE, "   ")


def test_leaf_restricts_to_its_branch(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    root = mem.messages.append(SCOPE, conv.id, role="user", content="plan a trip")
    left = mem.messages.append(SCOPE, conv.id, role="assistant", content="visit Lisbon tram")
    right = mem.messages.append(
        SCOPE, conv.id, role="assistant", content="visit Kyoto temple", parent_id=root.id
    )
    on_left = mem.recall.search(SCOPE, "visit", k=5, conversation_id=conv.id, leaf_id=left.id)
    assert {h.message.id for h in on_left} <= {root.id, left.id}
    assert on_left[0].message.id == left.id
    on_right = mem.recall.search(SCOPE, "visit", k=5, conversation_id=conv.id, leaf_id=right.id)
    assert {h.message.id for h in on_right} <= {root.id, right.id}
    assert on_right[0].message.id == right.id
    # No leaf: the conversation's active branch (the newest answer), unless asked for all.
    active = mem.recall.search(SCOPE, "visit", k=5, conversation_id=conv.id)
    assert {h.message.id for h in active} <= {root.id, right.id}
    both = mem.recall.search(
        SCOPE, "visit", k=5, conversation_id=conv.id, include_other_branches=True
    )
    assert {left.id, right.id} <= {h.message.id for h in both}
    with pytest.raises(InvalidInput):
        mem.recall.search(SCOPE, "visit", leaf_id=left.id)


def test_pending_message_is_indexed_when_completed(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    mem.messages.append(SCOPE, conv.id, role="user", content="tell me a fact")
    pending = mem.messages.append(SCOPE, conv.id, role="assistant", status="pending")
    assert pending.id not in {h.message.id for h in mem.recall.search(SCOPE, "octopus", k=3)}
    mem.messages.complete(SCOPE, conv.id, pending.id, content="An octopus has three hearts")
    assert next(h.message.id for h in mem.recall.search(SCOPE, "octopus hearts", k=3)) == pending.id


def test_system_messages_are_not_recalled(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    mem.messages.append(SCOPE, conv.id, role="system", content="You are a walrus assistant")
    assert mem.recall.search(SCOPE, "walrus", k=3) == []


def test_cascade_removes_index_rows(mem: Memory) -> None:
    _chat(mem)
    ids = _chat(mem)
    mem.recall.flush(SCOPE)  # embeds everything (the job's work)
    cid = mem.messages.get(SCOPE, mem.conversations.list(SCOPE).items[0].id, ids[0]).conversation_id
    assert scalar(mem, "SELECT count(*) FROM recall_docs") == 2 * len(CHAT)
    mem.conversations.delete(SCOPE, cid)
    assert scalar(mem, "SELECT count(*) FROM recall_docs") == len(CHAT)
    assert scalar(mem, "SELECT count(*) FROM vectors") == len(CHAT)
    assert all(h.conversation_id != cid for h in mem.recall.search(SCOPE, "beagle", k=10))
    mem.users.delete(SCOPE)
    assert scalar(mem, "SELECT count(*) FROM recall_docs") == 0
    assert scalar(mem, "SELECT count(*) FROM vectors") == 0
    if mem.core.engine.dialect == "sqlite":
        assert scalar(mem, "SELECT count(*) FROM recall_terms") == 0


def test_reindex_moves_to_the_new_space(mem: Memory) -> None:
    _chat(mem)
    assert mem.recall.flush() == len(CHAT)
    assert mem.recall.flush() == 0
    new = FakeEmbedder(32, name="other")
    mem.core.recall.use(new)
    assert mem.recall.pending() == len(CHAT)
    # Before reindexing, vectors of the old space are never compared with the new query.
    assert mem.recall.search(SCOPE, "pottery vase", k=1)[0].message.content.startswith("My sister")
    done: list[int] = []
    assert mem.recall.flush(reindex=True, progress=done.append) == len(CHAT)
    assert sum(done) == len(CHAT)
    assert mem.recall.pending() == 0
    assert scalar(mem, "SELECT count(*) FROM vectors WHERE embedder = ?", new.identity) == len(CHAT)
    assert scalar(mem, "SELECT count(*) FROM vectors WHERE embedder <> ?", new.identity) == 0


def test_background_mode_queues_a_debounced_job(mem: Memory) -> None:
    mem.core.recall.mode = "background"
    _chat(mem)
    jobs = mem.jobs.list().items
    assert [j.kind for j in jobs] == ["recall.embed"]  # one per conversation, merged
    assert mem.recall.pending() == len(CHAT)
    ran = mem.jobs.run_pending(kinds=["recall.embed"])
    assert ran == 1 or mem.recall.pending() == len(CHAT)  # not due yet: the debounce holds it
    mem.recall.flush()
    assert mem.recall.pending() == 0


def test_backfill_indexes_older_messages(mem: Memory) -> None:
    ids = _chat(mem)
    assert mem.recall.backfill() == 0
    cid = mem.conversations.list(SCOPE).items[0].id

    def wipe():  # type: ignore[no-untyped-def]
        from memstrata.recall import index as idx

        yield from idx.delete_for_conversations(mem.core.engine.dialect, [cid])

    from memstrata.storage.plan import write

    mem.core.recall.use(None)  # keywords only: the wiped rows are what is tested
    mem.core.engine.run(write(wipe))
    assert mem.recall.search(SCOPE, "pottery", k=1) == []
    assert mem.recall.backfill() == len(CHAT)
    assert mem.recall.search(SCOPE, "pottery", k=1)[0].message.id == ids[4]


# -- pure parts ------------------------------------------------------------------------------


def test_query_analysis() -> None:
    q = analyse_query("When did Ann adopt the puppy?")
    assert q.temporal
    assert q.terms == ("ann", "adopt", "puppy")
    assert not analyse_query("What breed is Rex?").temporal
    assert analyse_query("how long has she been running").temporal
    assert analyse_query("what is it").terms  # only function words: kept rather than nothing
    assert mentions_time("we went there last Saturday")
    assert mentions_time("back in 2019")
    assert not mentions_time("I like blue vases")


def test_document_text_names_the_speaker(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    m = mem.messages.append(
        SCOPE, conv.id, role="user", content="hello", metadata={"speaker": "Bo"}
    )
    assert document_text(m) == "Bo: hello"


def test_fusion_prefers_agreement_and_context() -> None:
    def cand(i: str, kw: int | None, vec: int | None, parent: str | None = None, seg: int = 0):  # type: ignore[no-untyped-def]
        return Candidate(i, "c", parent, ("c", seg), keyword_rank=kw, vector_rank=vec)

    ranked = fuse([cand("a", 1, None), cand("b", 2, 2), cand("c", None, 1)], temporal=False)
    assert ranked[0].id == "b"
    # A neighbour of a strong hit outranks an isolated weak one.
    plain = FusionParams(segment_share=0)
    ranked = fuse(
        [cand("q", 1, 1), cand("ans", 30, 30, parent="q"), cand("x", 25, 25, seg=1)],
        temporal=False,
        params=plain,
    )
    assert [c.id for c in ranked] == ["q", "ans", "x"]
    t = Candidate("t", "c", None, ("c", 0), mentions_time=True, keyword_rank=2)
    u = Candidate("u", "c", None, ("c", 1), keyword_rank=1)
    assert (
        fuse([t, u], temporal=True, params=FusionParams(time_boost=1.0, segment_share=0))[0].id
        == "t"
    )


def test_sessions_ranked_by_the_terms_they_hold() -> None:
    from memstrata.recall.scoring import DocMatch, Matches, session_ranks

    def doc(seq: int, second: int) -> DocMatch:
        return DocMatch(seq, f"m{seq}", "c", 10, second)

    # Session 1 holds both terms over two turns; session 2 one term in two turns;
    # session 3 both terms in a single turn (left to the message scores).
    postings = {
        "kayak": [doc(1, 100), doc(5, 200), doc(6, 200), doc(9, 300)],
        "river": [doc(2, 100), doc(9, 300)],
    }
    assert session_ranks(Matches.of(postings)) == {("c", 100): 1, ("c", 200): 2}
    # A candidate in the best session outranks an equal one outside any session.
    a = Candidate("a", "c", None, ("c", 100), keyword_rank=3, session_rank=1)
    b = Candidate("b", "c", None, ("c", 900), keyword_rank=2)
    assert fuse([a, b], temporal=False, params=FusionParams(segment_share=0))[0].id == "a"
    off = FusionParams(segment_share=0, session_weight=0.0)
    assert fuse([a, b], temporal=False, params=off)[0].id == "b"


def test_default_embedder_searches_offline(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import socket

    from memstrata.config import Settings
    from memstrata.embeddings.minilm import MiniLMEmbedder

    def no_network(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("recall tried to use the network")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("MEMSTRATA_EMBEDDER", raising=False)
    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    mem = Memory.open("sqlite:///:memory:", settings=Settings(home=tmp_path, worker="off"))
    try:
        emb = mem.core.recall.embedder
        assert isinstance(getattr(emb, "inner", emb), MiniLMEmbedder)  # inside the usage meter
        ids = _chat(mem)
        mem.recall.flush(SCOPE)  # what the debounced embedding job does after the appends
        assert mem.recall.pending() == 0
        hits = mem.recall.search(SCOPE, "a dog from the animal shelter", k=3)
        assert ids[0] in [h.message.id for h in hits]
    finally:
        mem.close()


def test_cli_search_and_reindex(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from memstrata.cli import app
    from memstrata.config import Settings

    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "none")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    with Memory.open(db, settings=Settings(home=tmp_path, worker="off")) as mem:
        ids = _chat(mem)
    runner = CliRunner()
    args = ["search", "pottery vase", "--db", db, "--tenant", "acme", "--user", "u1", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"][0]["message"]["id"] == ids[4]
    other = runner.invoke(app, [*args[:3], db, "--tenant", "acme", "--user", "u9", "--json"])
    assert json.loads(other.stdout)["hits"] == []
    result = runner.invoke(app, ["reindex", "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"embedder": None, "keyword_rows_added": 0, "embedded": 0}
