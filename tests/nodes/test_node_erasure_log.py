"""The rewrite that erases a deleted message's turns from a node memory's objects, stepped
by hand against a store: a compaction racing it, a crash between its checkpoint and its
deletes, and a compaction still running when it commits. Readers see every other turn
once, and no object keeps an erased turn."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstrata.backends.registry import open_blob_store
from memstrata.blobs import BlobOp, BlobRequest, Blobs, BlobStore, Delete, Get, Put
from memstrata.config import Settings
from memstrata.domain.nodes import Turn
from memstrata.errors import MemstrataError
from memstrata.ids import UUID_NIL
from memstrata.nodes import log
from memstrata.nodes.layout import NodeKey, decode_turns, mentions

PREFIX = NodeKey("t", "app", "conv", "node").prefix("gen1")
GONE = "m-gone"


def _turn(mid: str, text: str) -> Turn:
    return Turn(
        uid=f"u-{mid}-{text}",
        message_id=mid,
        parent_message_id=UUID_NIL,
        user_content=text,
        user_files=(),
        assistant_content="",
        assistant_files=(),
        created_at=1,
    )


class Stepper:
    """Drives a blob operation one request at a time against ``store``."""

    def __init__(self, op: BlobOp[Any], store: BlobStore) -> None:
        self.op, self.blobs = op, Blobs(store)
        self.request: BlobRequest | None = next(op)
        self.value: Any = None

    def step(self) -> None:
        assert self.request is not None
        try:
            reply, error = self.blobs.execute(self.request), None
        except MemstrataError as exc:
            reply, error = None, exc
        try:
            self.request = self.op.throw(error) if error else self.op.send(reply)
        except StopIteration as stop:
            self.request, self.value = None, stop.value

    def until(self, pending: Callable[[BlobRequest], bool]) -> BlobRequest:
        """Run up to the first request for which ``pending`` holds (not run yet)."""
        while self.request is not None and not pending(self.request):
            self.step()
        assert self.request is not None, "the operation finished first"
        return self.request

    def finish(self) -> Any:
        while self.request is not None:
            self.step()
        return self.value


def _run(op: BlobOp[Any], store: BlobStore) -> Any:
    return Stepper(op, store).finish()


def _checkpoint_put(request: BlobRequest) -> bool:
    return isinstance(request, Put) and "/ckpt/" in request.key


def _store(tmp_path: Path) -> BlobStore:
    return open_blob_store("memory://", Settings(home=tmp_path, worker="off"))


def _plant(store: BlobStore) -> None:
    """A chunk (a kept turn and one to erase) and two loose segments (one of each)."""
    _run(log.write_segment(PREFIX, [_turn("m1", "kept one"), _turn(GONE, "secret one")]), store)
    assert _run(log.compact(PREFIX, min_segments=1), store) == 1
    _run(log.write_segment(PREFIX, [_turn(GONE, "secret two")]), store)
    _run(log.write_segment(PREFIX, [_turn("m2", "kept two")]), store)


def _readable(store: BlobStore) -> list[str]:
    """Every turn a reader sees, oldest first."""
    collected: list[Turn] = []

    class Collect:
        done = False

        def feed(self, turns: list[Turn]) -> bool:
            collected.extend(turns)
            return False

    _run(log.read_newest_first(PREFIX, Collect), store)
    return [t.user_content for t in reversed(collected)]


def _secret_objects(store: BlobStore) -> list[str]:
    found = []
    for meta in store.list_prefix(PREFIX):
        if "/ckpt/" in meta.key:
            continue
        kind = "chunk" if "/chunk/" in meta.key else "segment"
        turns = decode_turns(store.get(meta.key).data, meta.key, kind)
        if any(t.message_id == GONE for t in turns):
            found.append(meta.key)
    return found


def test_the_rewrite_keeps_every_other_turn_in_order(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _plant(store)
    assert _readable(store) == ["kept one", "secret one", "secret two", "kept two"]
    assert _run(log.drop_messages(PREFIX, [GONE]), store) == (2, 2)
    assert _readable(store) == ["kept one", "kept two"]
    assert _secret_objects(store) == []
    assert _run(log.drop_messages(PREFIX, [GONE]), store) == (0, 0)  # nothing left: no write
    # The chunk in its place, the loose segments folded into one after it.
    assert len(_chunks(store)) == 2


def _chunks(store: BlobStore) -> list[str]:
    return [m.key for m in store.list_prefix(PREFIX) if "/chunk/" in m.key]


def test_a_chunk_without_an_erased_turn_is_kept_as_it_is(tmp_path: Path) -> None:
    """Chunks keep their size (history stops after the newest few): only those holding an
    erased turn are written again, and loose segments without one stay loose."""
    store = _store(tmp_path)
    for mid in ("m1", GONE, "m2"):  # three chunks of two turns each
        _run(log.write_segment(PREFIX, [_turn(mid, "a"), _turn(mid, "b")]), store)
        assert _run(log.compact(PREFIX, min_segments=1), store) == 1
    _run(log.write_segment(PREFIX, [_turn("m3", "loose")]), store)
    before = _chunks(store)
    assert len(before) == 3
    assert _run(log.drop_messages(PREFIX, [GONE]), store) == (2, 0)
    after = _chunks(store)
    assert after == [before[0], before[2]]  # the erased one's chunk had nothing else
    assert _readable(store) == ["a", "b", "a", "b", "loose"]
    assert len([m for m in store.list_prefix(PREFIX) if "/seg/" in m.key]) == 1


def test_a_compaction_that_wins_the_checkpoint_makes_the_rewrite_start_over(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _plant(store)
    rewrite = Stepper(log.drop_messages(PREFIX, [GONE]), store)
    rewrite.until(_checkpoint_put)
    _run(log.write_segment(PREFIX, [_turn("m3", "kept three")]), store)
    assert _run(log.compact(PREFIX, min_segments=1), store) == 3  # takes the checkpoint first
    assert rewrite.finish() == (2, 0)
    assert _readable(store) == ["kept one", "kept two", "kept three"]
    assert _secret_objects(store) == []


def test_a_crash_after_the_checkpoint_leaves_a_chunk_the_next_run_deletes(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _plant(store)
    crashed = Stepper(log.drop_messages(PREFIX, [GONE]), store)
    crashed.until(_checkpoint_put)
    crashed.step()  # the checkpoint is written ...
    crashed.until(lambda r: isinstance(r, Delete))  # ... and the process dies before its deletes
    assert _readable(store) == ["kept one", "kept two"]  # readers already see the rewrite
    assert _secret_objects(store)  # but the old chunk still holds the words
    assert _run(log.drop_messages(PREFIX, [GONE]), store) == (0, 0)
    assert _secret_objects(store) == []
    assert _readable(store) == ["kept one", "kept two"]


def test_a_compaction_still_running_at_the_commit_loses_and_its_chunk_goes(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _plant(store)
    compaction = Stepper(log.compact(PREFIX, min_segments=1), store)
    compaction.until(_checkpoint_put)  # its chunk (with "secret two") is written
    assert _run(log.drop_messages(PREFIX, [GONE]), store) == (2, 2)
    assert _secret_objects(store) == []  # the running compaction's chunk went too
    assert compaction.finish() == 0  # it lost the checkpoint
    assert _readable(store) == ["kept one", "kept two"]
    assert _secret_objects(store) == []


def _latest_read(request: BlobRequest) -> bool:
    return isinstance(request, Get) and "/ckpt/" in request.key


def _outrun_at_head(op: BlobOp[Any], store: BlobStore) -> Any:
    """Run ``op`` past its checkpoint, to the read of the latest one it has just listed;
    then a compaction commits a newer one and the next writer's settling deletes the one
    listed; then finish ``op``."""
    stepper = Stepper(op, store)
    stepper.until(_checkpoint_put)
    stepper.step()
    stepper.until(lambda r: isinstance(r, Get) and "/ckpt/" in r.key)
    _run(log.write_segment(PREFIX, [_turn("m3", "kept three")]), store)
    assert _run(log.compact(PREFIX, min_segments=1), store) >= 1
    assert _run(log.compact(PREFIX, min_segments=99), store) == 0  # settles, writes nothing
    return stepper.finish()


def test_a_compaction_whose_latest_checkpoint_is_deleted_before_it_reads_it_lists_again(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _plant(store)
    assert _outrun_at_head(log.compact(PREFIX, min_segments=1), store) == 2
    assert _readable(store) == ["kept one", "secret one", "secret two", "kept two", "kept three"]


def test_an_erasure_whose_latest_checkpoint_is_deleted_before_it_reads_it_lists_again(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _plant(store)
    removed, _ = _outrun_at_head(log.drop_messages(PREFIX, [GONE]), store)
    assert removed >= 2
    assert _readable(store) == ["kept one", "kept two", "kept three"]
    assert _secret_objects(store) == []


def test_an_erasure_reads_each_chunk_once(tmp_path: Path) -> None:
    """A chunk found without an erased turn is not read again by the pass that checks
    the rewrite took (objects are never rewritten in place), nor is the rewrite's own."""
    store = _store(tmp_path)
    for mid in ("m1", GONE, "m2"):
        _run(log.write_segment(PREFIX, [_turn(mid, "a"), _turn(mid, "b")]), store)
        assert _run(log.compact(PREFIX, min_segments=1), store) == 1
    reads: list[str] = []
    stepper = Stepper(log.drop_messages(PREFIX, [GONE]), store)
    while stepper.request is not None:
        if isinstance(stepper.request, Get) and "/chunk/" in stepper.request.key:
            reads.append(stepper.request.key)
        stepper.step()
    assert stepper.value == (2, 0)
    assert len(reads) == 3 == len(set(reads))
    assert _readable(store) == ["a", "b", "a", "b"]


def test_ids_json_could_write_otherwise_are_found_by_parsing(tmp_path: Path) -> None:
    """An id whose JSON form is not certain from its characters is looked for in the
    parsed turns, and one named only as a parent leaves its child's turn in place."""
    store = _store(tmp_path)
    odd = 'm "é\\'
    child = Turn(
        uid="u-child",
        message_id="m-child",
        parent_message_id=GONE,
        user_content="child",
        user_files=(),
        assistant_content="",
        assistant_files=(),
        created_at=1,
    )
    _run(log.write_segment(PREFIX, [_turn(odd, "odd"), _turn("m1", "kept"), child]), store)
    assert _run(log.compact(PREFIX, min_segments=1), store) == 1
    assert _run(log.drop_messages(PREFIX, [odd, GONE]), store) == (1, 0)
    assert _readable(store) == ["kept", "child"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("m-gone", True), ("m-kept", False), ("m-gone-later", False), ('say "hi"', None), ("é", None)],
)
def test_mentions_tells_only_what_the_bytes_show(text: str, expected: bool | None) -> None:
    raw = json.dumps({"turns": [{"message_id": "m-gone"}, {"x": "m-gone-later-x"}]}).encode()
    assert mentions(raw, text) is expected


def test_turns_flushed_in_bulk_are_compacted_into_bounded_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past CHUNK_TURNS, compaction writes several chunks, in log order; a deletion then
    rewrites only the one holding its turn, and a chunk written before the bound (or
    loose turns folded by the erasure) is split as it is rewritten."""
    store = _store(tmp_path)
    monkeypatch.setattr(log, "CHUNK_TURNS", 100)
    old = [_turn(GONE if i == 1 else f"m{i}", f"old {i}") for i in range(5)]
    _run(log.write_segment(PREFIX, old), store)
    assert _run(log.compact(PREFIX, min_segments=1), store) == 1  # a chunk of 5
    monkeypatch.setattr(log, "CHUNK_TURNS", 2)
    _run(log.write_segment(PREFIX, [_turn(f"n{i}", f"new {i}") for i in range(5)]), store)
    assert _run(log.compact(PREFIX, min_segments=1), store) == 1
    assert len(_chunks(store)) == 1 + 3  # the new five as 2 + 2 + 1
    _run(
        log.write_segment(PREFIX, [_turn(GONE, "loose"), _turn("l1", "l1"), _turn("l2", "l2")]),
        store,
    )
    before = _chunks(store)
    assert _run(log.drop_messages(PREFIX, [GONE]), store) == (2, 1)
    after = _chunks(store)
    assert set(before[1:]) <= set(after)  # the bounded chunks without the turn are kept
    # The old chunk's four kept turns as 2 + 2, the two loose ones as one chunk.
    assert len(after) == 3 + 2 + 1
    expected = [f"old {i}" for i in range(5) if i != 1] + [f"new {i}" for i in range(5)]
    assert _readable(store) == [*expected, "l1", "l2"]
    assert _secret_objects(store) == []
