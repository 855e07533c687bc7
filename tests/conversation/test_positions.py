"""Message order numbers are per conversation: nothing an answer shows counts the
messages of other conversations (``seq`` is the position; cursors carry it too)."""

from __future__ import annotations

import base64

from memstrata import Memory
from memstrata.storage.plan import Exec, write
from memstrata.storage.positions import fill_positions
from memstrata.testing.conformance import fresh_scope


def test_seq_counts_the_conversations_own_messages(memory: Memory):
    s, other = fresh_scope(), fresh_scope()
    mine = memory.conversations.create(s).id
    theirs = memory.conversations.create(other).id
    for i in range(3):
        memory.messages.append(other, theirs, role="user", content=f"noise {i}")
        memory.messages.append(s, mine, role="user", content=f"mine {i}")
        memory.messages.append(other, theirs, role="user", content=f"more noise {i}")
    got = memory.messages.list(s, mine).items
    assert [m.to_dict()["seq"] for m in got] == [1, 2, 3]
    assert [m.position for m in got] == [1, 2, 3]
    assert [m.to_dict()["seq"] for m in memory.messages.list(other, theirs).items] == list(
        range(1, 7)
    )
    # A deleted newest message's number is not given again.
    memory.messages.delete(s, mine, got[-1].id)
    again = memory.messages.append(s, mine, role="user", content="after")
    assert again.position == 4


def test_cursors_carry_positions_and_pages_cover_everything(memory: Memory):
    s, other = fresh_scope(), fresh_scope()
    cid = memory.conversations.create(s).id
    noise = memory.conversations.create(other).id
    made = []
    for i in range(5):
        memory.messages.append(other, noise, role="user", content=f"n{i}")
        made.append(memory.messages.append(s, cid, role="user", content=f"m{i}").id)
    seen, cursor = [], None
    while True:
        page = memory.messages.list(s, cid, limit=2, cursor=cursor)
        seen += [m.id for m in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        value = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        assert value == f"p{page.items[-1].position}"
    assert seen == made


def test_positions_are_filled_in_order_after_an_import(memory: Memory, tmp_path):
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    for i in range(4):
        memory.messages.append(s, cid, role="user", content=f"m{i}")
    lines: list[str] = []
    memory.transfer.export(lines.append)
    with Memory.open(f"sqlite:///{(tmp_path / 'copy.db').as_posix()}") as copy:
        copy.transfer.import_(lines)
        assert [m.position for m in copy.messages.list(s, cid).items] == [1, 2, 3, 4]
        assert copy.messages.append(s, cid, role="user", content="next").position == 5
    # The migration's fill: positions lost are given back in seq order.
    engine = memory.core.engine
    engine.run(write(lambda: _forget_positions(cid)))
    engine.run(write(lambda: fill_positions([cid])))
    assert [m.position for m in memory.messages.list(s, cid).items] == [1, 2, 3, 4]
    assert memory.messages.append(s, cid, role="user", content="next").position == 5


def _forget_positions(cid: str):
    yield Exec("UPDATE messages SET position = NULL WHERE conversation_id = ?", (cid,))
    yield Exec("UPDATE conversations SET last_position = 0 WHERE id = ?", (cid,))
