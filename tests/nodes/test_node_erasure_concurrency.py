"""Messages deleted while two writers flush turns into the same node memory and a third
thread compacts it without pause: no writer's turn is lost or doubled, and once the
erasure jobs have run no object holds a deleted message's turn (on files: S3's round trips
make each rewrite read slowly while the writers keep adding objects, and the log
protocol is the same)."""

from __future__ import annotations

import gzip
import threading
from collections import Counter
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.domain.nodes import Turn
from memstrata.ids import UUID_NIL
from memstrata.nodes import log
from memstrata.nodes.layout import NodeKey
from memstrata.nodes.ops import ERASE_JOB, generation
from memstrata.nodes.service import blobs_for
from memstrata.storage.plan import read

from .conftest import store_url

S = Scope("t1", "alice")
MESSAGES = 16


class _All:
    done = False

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    def feed(self, turns: list[Turn]) -> bool:
        self.turns.extend(turns)
        return False


@pytest.mark.parametrize("kind", ["file"])
def test_deletions_racing_writers_and_a_compactor(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    blobs, settings = store_url(kind, tmp_path, request)
    settings = settings.model_copy(update={"worker": "off"})
    url = f"sqlite:///{(tmp_path / 'e.db').as_posix()}"
    mem = Memory.open(url, blobs=blobs, settings=settings)
    cid = mem.conversations.create(S).id
    ids = [mem.messages.append(S, cid, role="user", content=f"q{i}").id for i in range(MESSAGES)]
    node = mem.nodes.open(S, "app", cid, "n")
    for mid in ids:
        node.add_turn(mid, UUID_NIL, f"said-in-{mid}")
        node.flush()

    stop = threading.Event()
    errors: list[str] = []
    written: Counter[str] = Counter()

    def worker(target: str, w: int) -> None:
        other = Memory.open(url, blobs=blobs, settings=settings)
        try:
            mine = other.nodes.open(S, "app", cid, "n")
            i = 0
            while not stop.is_set():
                if target == "write":
                    mid = f"w{w}-{i}"
                    mine.add_turn(mid, UUID_NIL, f"kept-{mid}")
                    mine.flush()
                    written[mid] += 1
                    i += 1
                else:
                    mine.compact()
        except Exception as exc:  # reported below, with the thread's name
            errors.append(f"{target} {w}: {exc!r}")
        finally:
            other.close()

    threads = [
        threading.Thread(target=worker, args=("write", 0)),
        threading.Thread(target=worker, args=("write", 1)),
        threading.Thread(target=worker, args=("compact", 2)),
    ]
    for t in threads:
        t.start()
    try:
        deleted = ids[::2]
        for mid in deleted:
            mem.messages.delete(S, cid, mid, mode="splice")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    mem.jobs.run_pending([ERASE_JOB])  # what a receipt could not erase under the race

    key = NodeKey(S.tenant, "app", cid, "n")
    gen = mem.core.engine.run(read(lambda: generation(S, key)))
    assert gen is not None
    found, _, _ = blobs_for(mem.core).run(log.read_newest_first(key.prefix(gen), _All))
    assert isinstance(found, _All)
    seen = Counter(t.message_id for t in found.turns)
    assert [m for m in deleted if seen[m]] == []
    assert [m for m in ids[1::2] if seen[m] != 1] == []
    assert written
    assert [m for m in written if seen[m] != 1] == []
    store = blobs_for(mem.core).store
    for meta in store.list_prefix("node_memory/"):
        text = gzip.decompress(store.get(meta.key).data)
        assert not any(f"said-in-{m}".encode() in text for m in deleted), meta.key
    mem.close()
