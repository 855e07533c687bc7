"""NodeMemory on the memory, file and S3 stores: turns, threads, budgets, files, ids,
scopes, compaction, clear, cascade, gc and damaged objects."""

from __future__ import annotations

import anyio
import pytest

from memstrata import AsyncMemory, Memory, Scope
from memstrata.errors import ConfigurationError, Corruption, InvalidInput, NotFound
from memstrata.ids import UUID_NIL
from memstrata.nodes import MemoryConfig, MemoryMode, log
from memstrata.nodes.service import blobs_for
from memstrata.types import FileRef

S = Scope("t1", "alice")
OTHER = Scope("t1", "bob")


def conv(mem: Memory, scope: Scope = S) -> str:
    return mem.conversations.create(scope).id


def texts(h) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in h.messages]


def test_turns_are_durable_at_flush_and_read_back(node_mem):
    cid = conv(node_mem)
    node = node_mem.nodes.open(S, "app", cid, "llm1")
    node.add_turn("m1", None, "hello", assistant_content="hi there")
    assert node_mem.nodes.history(S, "app", cid, "llm1").messages == []  # not flushed
    assert texts(node.history()) == [("user", "hello"), ("assistant", "hi there")]  # buffered
    assert node.flush() == 1
    assert node.pending == []
    with node_mem.nodes.open(S, "app", cid, "llm1") as n2:
        n2.add_turn("m2", "m1", "and you?", assistant_content="fine")
    h = node_mem.nodes.history(S, "app", cid, "llm1")
    assert texts(h) == [
        ("user", "hello"),
        ("assistant", "hi there"),
        ("user", "and you?"),
        ("assistant", "fine"),
    ]
    # Another node of the same conversation has its own memory.
    assert node_mem.nodes.history(S, "app", cid, "llm2").messages == []
    assert node_mem.nodes.history(S, "other-app", cid, "llm1").messages == []


def test_thread_extraction_follows_parents(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "n")
    n.add_turn("a", None, "q-a", assistant_content="r-a")
    n.add_turn("b", "a", "q-b", assistant_content="r-b")
    n.add_turn("c", "b", "q-c", assistant_content="r-c")
    n.add_turn("c2", "b", "q-c2 regenerated", assistant_content="r-c2")  # sibling of c
    n.add_turn("d", "c", "q-d", assistant_content="r-d")
    n.flush()
    users = lambda h: [m.content for m in h.messages if m.role.value == "user"]  # noqa: E731
    assert users(n.history("d")) == ["q-a", "q-b", "q-c", "q-d"]
    assert users(n.history("c2")) == ["q-a", "q-b", "q-c2 regenerated"]
    # Newest first without a current message (Dify): the newest turn starts the thread.
    assert users(n.history()) == ["q-a", "q-b", "q-c", "q-d"]
    # A message not stored yet: its parent says where the thread is.
    assert users(n.history("e", parent_message_id="c2")) == ["q-a", "q-b", "q-c2 regenerated"]
    assert users(n.history("e", parent_message_id=None)) == []
    # A current message with no stored turn (Dify asks before storing it): the thread
    # ends at the newest stored turn.
    assert users(n.history("unknown")) == ["q-a", "q-b", "q-c", "q-d"]
    # An empty parent ends the thread: turns before a new root do not belong.
    n.add_turn("r", None, "new root")
    n.add_turn("s", "r", "after root")
    n.flush()
    assert users(n.history("s")) == ["new root", "after root"]


def test_legacy_nil_parent_takes_every_older_turn_and_loops_repeat_a_message(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "n")
    n.add_turn("w", None, "zero")
    n.add_turn("v", None, "other root")
    n.add_turn("x", "w", "one")
    n.add_turn("y", UUID_NIL, "two")  # no branch information: takes the previous turn
    n.add_turn("z", UUID_NIL, "three")
    n.add_turn("z", UUID_NIL, "three, second loop iteration")
    n.flush()
    users = [m.content for m in n.history("z").messages if m.role.value == "user"]
    # NIL accepts x; x names its parent w, so the other root v is skipped.
    assert users == ["zero", "one", "two", "three", "three, second loop iteration"]


def _same_as_conversation_history(mem: Memory, turns, max_tokens, model=None):
    """Node history must cut exactly where conversation history cuts."""
    cid = conv(mem)
    n = mem.nodes.open(S, "app", cid, "n")
    parent = None
    for i, (q, a) in enumerate(turns):
        n.add_turn(f"m{i}", parent, q, assistant_content=a)
        parent = f"m{i}"
        mem.messages.append(S, cid, role="user", content=q)
        if a:
            mem.messages.append(S, cid, role="assistant", content=a)
    n.flush()
    node_h = n.history(parent, max_tokens=max_tokens, model=model)
    conv_h = mem.history(S, cid, max_tokens=max_tokens, model=model)
    assert node_h.to_openai() == conv_h.to_openai()
    assert (node_h.tokens, node_h.truncated, node_h.over_budget) == (
        conv_h.tokens,
        conv_h.truncated,
        conv_h.over_budget,
    )
    return node_h


@pytest.mark.parametrize("max_tokens", [0, 10, 40, 75, 120, 2000, None])
def test_truncation_matches_conversation_history(node_mem, max_tokens):
    turns = [
        ("what is the capital of France?", "Paris."),
        ("and of Italy? " * 5, "Rome, of course. " * 6),
        ("tell me a long story " * 10, ""),
        ("shorter", "ok"),
    ]
    h = _same_as_conversation_history(node_mem, turns, max_tokens)
    if max_tokens == 0:
        assert h.over_budget
        assert len(h.turns) == 1  # the newest turn is kept whole
    if max_tokens is None:
        assert not h.truncated
        assert len(h.turns) == 4


def test_truncation_with_another_model_encoding(node_mem):
    _same_as_conversation_history(node_mem, [("hello " * 30, "hi " * 30)] * 5, 200, "gpt-4")


def test_files_are_references_and_the_resolver_rebuilds_them(node_mem):
    cid = conv(node_mem)
    img = {"type": "image", "transfer_method": "local_file", "upload_file_id": "up-1"}
    out = FileRef(type="document", transfer_method="tool_file", tool_file_id="tf-9")
    seen = []

    def resolver(ref):
        seen.append(ref)
        return {"rebuilt": ref.upload_file_id or ref.tool_file_id}

    n = node_mem.nodes.open(S, "app", cid, "n", resolver=resolver)
    n.add_turn("m1", None, "look", [img], "done", [out])
    n.flush()
    h = n.history("m1")
    assert h.turns[0].user_files == [{"rebuilt": "up-1"}]
    assert h.turns[0].assistant_files == [{"rebuilt": "tf-9"}]
    assert h.messages[0].files[0].upload_file_id == "up-1"
    assert h.messages[0].files[0].belongs_to == "user"
    assert h.messages[1].files[0].belongs_to == "assistant"
    assert len(seen) == 2
    # The default resolver passes the references through.
    plain = node_mem.nodes.history(S, "app", cid, "n", current_message_id="m1")
    assert plain.turns[0].assistant_files == [out.model_copy(update={"belongs_to": "assistant"})]
    with pytest.raises(InvalidInput):
        n.add_turn("m2", None, "bad file", [{"type": "image", "transfer_method": "local_file"}])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("app_id", "../etc"),
        ("app_id", "a/b"),
        ("node_id", ".."),
        ("node_id", "n\x00"),
        ("node_id", ""),
        ("conversation_id", "../x"),
    ],
)
def test_ids_that_could_leave_their_prefix_are_invalid(node_mem, field, value):
    cid = conv(node_mem)
    args = {"app_id": "app", "conversation_id": cid, "node_id": "n"}
    args[field] = value
    with pytest.raises(InvalidInput):
        node_mem.nodes.open(S, **args)


def test_turn_ids_and_contents_are_checked(node_mem):
    n = node_mem.nodes.open(S, "app", conv(node_mem), "n")
    with pytest.raises(InvalidInput):
        n.add_turn("a/b", None, "x")
    with pytest.raises(InvalidInput):
        n.add_turn("ok", "../p", "x")
    with pytest.raises(InvalidInput):
        n.add_turn("ok", None, "")  # no user input at all
    with pytest.raises(InvalidInput):
        n.add_turn("ok", None, "nul \x00")
    assert n.pending == []


def test_the_conversation_must_be_the_callers(node_mem):
    cid = conv(node_mem)
    node_mem.nodes.add_turn(S, "app", cid, "n", message_id="m1", user_content="secret")
    with pytest.raises(NotFound):
        node_mem.nodes.history(OTHER, "app", cid, "n")
    n = node_mem.nodes.open(OTHER, "app", cid, "n")
    n.add_turn("m2", None, "intrusion")
    with pytest.raises(NotFound):
        n.flush()
    assert len(n.pending) == 1
    with pytest.raises(NotFound):
        node_mem.nodes.delete(OTHER, "app", cid, "n")
    with pytest.raises(NotFound):
        node_mem.nodes.history(S, "app", "00000000-0000-7000-8000-000000000000", "n")
    assert [m.content for m in node_mem.nodes.history(S, "app", cid, "n").messages] == ["secret"]


def test_node_mode_needs_a_conversation_id(node_mem):
    with pytest.raises(ConfigurationError, match="conversation id"):
        node_mem.nodes.open(S, "app", None, "n")
    with pytest.raises(ConfigurationError, match="conversation id"):
        MemoryConfig(mode="node").check(conversation_id=None, node_id="n")
    MemoryConfig(mode="node").check(conversation_id="c", node_id="n")
    MemoryConfig().check(conversation_id=None)  # conversation mode: nothing needed
    assert MemoryConfig().mode is MemoryMode.CONVERSATION


def test_compaction_keeps_every_turn_and_history_reads_only_what_it_returns(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "n")
    parent = None
    for i in range(60):
        n.add_turn(f"m{i}", parent, f"question {i}", assistant_content=f"answer {i}")
        parent = f"m{i}"
        n.flush()
    before = n.history(parent, max_tokens=None)
    assert n.compact() == 60
    for i in range(60, 65):
        n.add_turn(f"m{i}", parent, f"question {i}", assistant_content=f"answer {i}")
        parent = f"m{i}"
        n.flush()
    after = n.history(parent, max_tokens=None)
    assert [m.content for m in after.messages[:120]] == [m.content for m in before.messages]
    assert len(after.turns) == 65
    assert len({t.turn.uid for t in after.turns}) == 65
    prefix = n.key.prefix(_generation(node_mem, n))
    keys = [m.key for m in blobs_for(node_mem.core).store.list_prefix(prefix)]
    assert sum("/seg/" in k for k in keys) == 5
    assert sum("/chunk/" in k for k in keys) == 1
    # A small budget is met by the newest segments alone: the chunk is not read.
    small = n.history(parent, max_tokens=30)
    assert len(small.turns) == 2
    # The checkpoint, two segments kept and the third that does not fit; not the chunk.
    assert small.objects_read == 4
    assert node_mem.core.blobs_url is not None


def _generation(mem: Memory, node) -> str:
    from memstrata.nodes import ops
    from memstrata.storage.plan import read

    gen = mem.core.engine.run(read(lambda: ops.generation(S, node.key)))
    assert gen is not None
    return gen


def test_compaction_job_runs_in_the_background(node_mem):
    from memstrata.nodes.service import COMPACT_AFTER

    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "n")
    for i in range(COMPACT_AFTER):
        n.add_turn(f"m{i}", UUID_NIL if i else None, f"q{i}")
        n.flush()
    assert node_mem.jobs.run_pending(["nodes.compact"]) == 1
    prefix = n.key.prefix(_generation(node_mem, n))
    keys = [m.key for m in blobs_for(node_mem.core).store.list_prefix(prefix)]
    assert sum("/seg/" in k for k in keys) == 0
    assert len(n.history(max_tokens=None).turns) == COMPACT_AFTER


def test_clear_cascade_and_gc(node_mem):
    cid = conv(node_mem)
    node_mem.nodes.add_turn(S, "app", cid, "a", message_id="m1", user_content="one")
    node_mem.nodes.add_turn(S, "app", cid, "b", message_id="m1", user_content="two")
    store = blobs_for(node_mem.core).store
    assert len(store.list_prefix("node_memory/")) == 2

    node_mem.nodes.delete(S, "app", cid, "a")
    assert node_mem.nodes.history(S, "app", cid, "a").messages == []  # unreadable at once
    node_mem.jobs.run_pending(["nodes.purge"])
    assert len(store.list_prefix("node_memory/")) == 1

    node_mem.conversations.delete(S, cid)
    with pytest.raises(NotFound):
        node_mem.nodes.history(S, "app", cid, "b")
    # Re-created with the same id, the conversation does not see the old turns.
    node_mem.conversations.create(S, id=cid)
    assert node_mem.nodes.history(S, "app", cid, "b").messages == []
    # The deletion's receipt purged the blobs at once and dropped the purge job it queued.
    assert node_mem.jobs.run_pending(["nodes.purge"]) == 0
    assert store.list_prefix("node_memory/") == []

    cid2 = conv(node_mem)
    node_mem.nodes.add_turn(S, "app", cid2, "old", message_id="m1", user_content="x")
    progress = []
    dry = node_mem.nodes.gc(0, dry_run=True, progress=lambda d, t: progress.append((d, t)))
    assert (dry.node_memories, dry.objects) == (1, 1)
    assert progress == [(1, 1)]
    assert node_mem.nodes.gc(3600).node_memories == 0  # written just now: kept
    report = node_mem.nodes.gc(0)
    assert (report.node_memories, report.objects, report.dry_run) == (1, 1, False)
    assert store.list_prefix("node_memory/") == []
    assert node_mem.nodes.history(S, "app", cid2, "old").messages == []


def test_a_damaged_object_is_named_and_the_others_stay_readable(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "n")
    for i in range(3):
        n.add_turn(f"m{i}", UUID_NIL, f"turn {i}")
        n.flush()
    prefix = n.key.prefix(_generation(node_mem, n))
    store = blobs_for(node_mem.core).store
    oldest = sorted(m.key for m in store.list_prefix(prefix + "seg/"))[0]
    whole = store.get(oldest).data
    store.put(oldest, whole[: len(whole) // 2])  # truncated
    with pytest.raises(Corruption) as info:
        n.history(max_tokens=None)
    assert info.value.detail["key"] == oldest
    assert oldest in str(info.value)
    # What does not need the damaged object still reads; so does the rest, on request.
    assert [m.content for m in n.history(max_tokens=10).messages] == ["turn 2"]
    h = n.history(max_tokens=None, skip_damaged=True)
    assert [m.content for m in h.messages] == ["turn 1", "turn 2"]
    assert h.damaged == [oldest]
    # Writes go on, and compaction leaves the damaged object where it is.
    n.add_turn("m3", UUID_NIL, "turn 3")
    n.flush()
    assert n.compact() == 3
    assert [m.content for m in n.history(max_tokens=None, skip_damaged=True).messages] == [
        "turn 1",
        "turn 2",
        "turn 3",
    ]


def test_async_api(tmp_path):
    async def main():
        mem = AsyncMemory.open(f"sqlite:///{(tmp_path / 'a.db').as_posix()}", blobs="memory://")
        try:
            cid = (await mem.conversations.create(S)).id
            async with mem.nodes.open(S, "app", cid, "n") as n:
                n.add_turn("m1", None, "async hello", assistant_content="async hi")
            h = await mem.nodes.history(S, "app", cid, "n", current_message_id="m1")
            return texts(h)
        finally:
            await mem.close()

    assert anyio.run(main) == [("user", "async hello"), ("assistant", "async hi")]


def test_count_turns_reads_everything(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "n")
    for i in range(5):
        n.add_turn(f"m{i}", UUID_NIL, "x")
    n.flush()
    prefix = n.key.prefix(_generation(node_mem, n))
    assert blobs_for(node_mem.core).run(log.count_turns(prefix)) == 5
