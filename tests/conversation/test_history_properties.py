"""Properties of history(), checked against a naive full-load reference.

Random message trees are built through the public API (turns, regenerations,
edits, tool calls, system messages, pending replies, legacy UUID_NIL parents,
leaf switches) while a plain-Python model records what each append should have
done. Then history() for random leaves and budgets is compared with a reference
that loads the whole branch and applies the rules from scratch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

from memstrata import Conflict, Memory, Scope
from memstrata.conversation.history import History
from memstrata.ids import UUID_NIL
from memstrata.tokens import get_tokenizer
from memstrata.types import ToolCall
from support import open_memory

# -- the model -------------------------------------------------------------------------------


@dataclass
class Rec:
    id: str
    parent: str | None
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...]
    status: str
    order: int  # append order = server order (seq)


@dataclass
class Model:
    """What the store should hold, maintained without asking the store."""

    recs: dict[str, Rec] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    active: str | None = None
    conflicts: int = 0

    def add(self, rec: Rec) -> None:
        self.recs[rec.id] = rec
        self.order.append(rec.id)
        self.active = rec.id

    def of_role(self, role: str) -> list[Rec]:
        return [self.recs[i] for i in self.order if self.recs[i].role == role]

    def pending(self) -> list[Rec]:
        return [self.recs[i] for i in self.order if self.recs[i].status == "pending"]

    def branch(self, leaf: str) -> list[Rec]:
        out: list[Rec] = []
        cur: str | None = leaf
        while cur is not None:
            out.append(self.recs[cur])
            cur = self.recs[cur].parent
        return out[::-1]


# -- the reference ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    ids: list[str]
    tokens: int
    truncated: bool
    over_budget: bool
    system: int  # length of the leading system run
    body: list[list[Rec]]  # the turns of the branch (pending dropped), oldest first
    kept_turns: int


def reference(
    model: Model, leaf: str | None, max_tokens: int | None, max_messages: int, enc: str | None
) -> Expected:
    tok = get_tokenizer(enc)

    def cost(r: Rec) -> int:
        return tok.count_message(r.content, r.tool_calls)

    branch = model.branch(leaf) if leaf is not None else []
    n_sys = 0
    while n_sys < len(branch) and branch[n_sys].role == "system":
        n_sys += 1
    system, rest = branch[:n_sys], [r for r in branch[n_sys:] if r.status != "pending"]
    turns: list[list[Rec]] = []
    for r in rest:
        if r.role == "user" or not turns:
            turns.append([r])
        else:
            turns[-1].append(r)
    used = sum(cost(r) for r in system)
    kept: list[list[Rec]] = []
    count = 0
    for turn in reversed(turns):
        t = sum(cost(r) for r in turn)
        fits = (max_tokens is None or used + t <= max_tokens) and count + len(turn) <= max_messages
        if not fits and kept:
            break
        kept.append(turn)
        used += t
        count += len(turn)
    kept.reverse()
    ids = [r.id for r in system] + [r.id for turn in kept for r in turn]
    over = (max_tokens is not None and used > max_tokens) or count > max_messages
    return Expected(ids, used, len(kept) < len(turns), over, n_sys, turns, len(kept))


# -- building trees --------------------------------------------------------------------------

VOCAB = (  # noqa: SIM905 - a word list reads better as one string
    "the a of to and in is it you that he was for on are with as I his they be at one "
    "have this from or had by hot word but what some we can out other were all there when "
    "weather Lisbon flight booking tool result summary Привет мир 天气 😀 data,json {}"
).split()

texts = st.one_of(
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=12).map(" ".join),
    st.lists(st.sampled_from(VOCAB), min_size=20, max_size=120).map(" ".join),
    # NUL and lone surrogates are refused by validation (see the conformance suite).
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40),
)
picks = st.integers(min_value=0, max_value=10**6)

actions = st.one_of(
    st.tuples(st.just("say"), st.sampled_from(["user", "user", "assistant"]), texts),
    st.tuples(st.just("system"), st.booleans(), texts),
    st.tuples(
        st.just("tools"), st.one_of(st.just(""), texts), st.lists(texts, min_size=1, max_size=3)
    ),
    st.tuples(st.just("regenerate"), picks, texts),
    st.tuples(st.just("edit"), picks, texts),
    st.tuples(st.just("pending")),
    st.tuples(st.just("complete"), picks, texts),
    st.tuples(st.just("legacy"), st.sampled_from(["user", "assistant"]), texts),
    st.tuples(st.just("switch"), picks),
    st.tuples(st.just("replay"), picks),
)

_call_ids = itertools.count()


class Builder:
    """Applies actions to a conversation through the facade and to the model."""

    def __init__(self, mem: Memory, scope: Scope) -> None:
        self.mem = mem
        self.scope = scope
        self.cid = mem.conversations.create(scope).id
        self.model = Model()

    def _append(self, expected_parent: str | None, **fields: Any) -> str | None:
        """Append; a reply to a pending message must be refused and change nothing."""
        if expected_parent is not None and self.model.recs[expected_parent].status == "pending":
            with pytest.raises(Conflict):
                self.mem.messages.append(self.scope, self.cid, **fields)
            self.model.conflicts += 1
            return None
        stored = self.mem.messages.append(self.scope, self.cid, **fields)
        assert stored.parent_id == expected_parent
        self.model.add(
            Rec(
                stored.id,
                expected_parent,
                fields["role"],
                fields.get("content", ""),
                tuple(ToolCall.model_validate(c) for c in fields.get("tool_calls", ())),
                fields.get("status", "complete"),
                len(self.model.order),
            )
        )
        return stored.id

    def apply(self, action: tuple[Any, ...]) -> None:  # noqa: C901 - one branch per action
        m = self.model
        kind = action[0]
        if kind == "say":
            self._append(m.active, role=action[1], content=action[2])
        elif kind == "system":
            if action[1]:
                self._append(None, role="system", content=action[2], parent_id=None)
            else:
                self._append(m.active, role="system", content=action[2])
        elif kind == "tools":
            content, results = action[1], action[2]
            calls = [
                {"id": f"call_{next(_call_ids)}", "type": "function",
                 "function": {"name": "lookup", "arguments": f'{{"n": {i}}}'}}
                for i in range(len(results))
            ]  # fmt: skip
            if self._append(m.active, role="assistant", content=content, tool_calls=calls):
                for call, result in zip(calls, results, strict=True):
                    self._append(m.active, role="tool", content=result, tool_call_id=call["id"])
        elif kind in ("regenerate", "edit"):
            role = "assistant" if kind == "regenerate" else "user"
            options = m.of_role(role)
            if options:
                target = options[action[1] % len(options)]
                self._append(target.parent, role=role, content=action[2], parent_id=target.parent)
        elif kind == "pending":
            self._append(m.active, role="assistant", content="", status="pending")
        elif kind == "complete":
            options = m.pending()
            if options:
                target = options[action[1] % len(options)]
                done = self.mem.messages.complete(
                    self.scope, self.cid, target.id, content=action[2]
                )
                assert done.status.value == "complete"
                target.status, target.content = "complete", action[2]
        elif kind == "legacy":
            newest = m.order[-1] if m.order else None
            self._append(newest, role=action[1], content=action[2], parent_id=UUID_NIL)
        elif kind == "switch":
            if m.order:
                target = m.order[action[1] % len(m.order)]
                self.mem.conversations.set_active_leaf(self.scope, self.cid, target)
                m.active = target
        elif kind == "replay" and m.order:
            rec = m.recs[m.order[action[1] % len(m.order)]]
            if rec.status == "complete" and not rec.tool_calls and rec.role != "tool":
                stored, created = self.mem.messages.put(
                    self.scope, self.cid, id=rec.id, role=rec.role, content=rec.content
                )
                assert (stored.id, created) == (rec.id, False)

    def check_store(self) -> None:
        """The store agrees with the model: parents, content, status, cumulative tokens."""
        tok = self.mem.core.rt.tokenizer
        conv = self.mem.conversations.get(self.scope, self.cid)
        assert conv.active_leaf_id == self.model.active
        assert conv.message_count == len(self.model.order)
        for rec in self.model.recs.values():
            got = self.mem.messages.get(self.scope, self.cid, rec.id)
            path = self.model.branch(rec.id)
            assert (got.parent_id, got.role.value, got.content, got.status.value) == (
                rec.parent,
                rec.role,
                rec.content,
                rec.status,
            )
            assert got.depth == len(path) - 1
            assert got.branch_tokens == sum(
                tok.count_message(r.content, r.tool_calls) for r in path
            )
        leaves = {m.id for m in self.mem.messages.leaves(self.scope, self.cid, limit=500).items}
        parents = {r.parent for r in self.model.recs.values()}
        assert leaves == {i for i in self.model.order if i not in parents}


# -- checking one history --------------------------------------------------------------------


def check_history(
    model: Model,
    h: History,
    leaf: str | None,
    max_tokens: int | None,
    max_messages: int,
    enc: str | None,
) -> Expected:
    want = reference(model, leaf, max_tokens, max_messages, enc)
    got_ids = [m.id for m in h.messages]
    note(f"want={want.ids} got={got_ids} tokens={want.tokens}/{h.tokens}")
    assert h.leaf_id == leaf
    assert h.encoding == get_tokenizer(enc).name
    assert got_ids == want.ids
    assert h.tokens == want.tokens
    assert (h.truncated, h.over_budget) == (want.truncated, want.over_budget)

    # Invariants, stated without the reference.
    branch = model.branch(leaf) if leaf is not None else []
    position = {r.id: i for i, r in enumerate(branch)}
    assert all(i in position for i in got_ids), "a message off the branch"
    assert [position[i] for i in got_ids] == sorted(position[i] for i in got_ids), "order"
    assert all(model.recs[i].status == "complete" for i in got_ids), "a pending message"
    assert h.tokens == sum(
        get_tokenizer(enc).count_message(m.content, m.tool_calls) for m in h.messages
    )
    body = h.messages[want.system :]
    if body:
        first = position[body[0].id]
        # The kept body is a contiguous run up to the leaf that starts a turn:
        # nothing answers a user message that was dropped.
        rest = [r for r in branch[first:] if r.status == "complete"]
        assert [m.id for m in body] == [r.id for r in rest]
        starts_turn = body[0].role.value == "user" or all(
            r.role != "user" for r in branch[want.system : first]
        )
        assert starts_turn, "an orphaned reply"
    calls_seen: set[str] = set()
    for m in body:
        calls_seen.update(c.id for c in m.tool_calls)
        if m.role.value == "tool":
            assert m.tool_call_id in calls_seen, "a tool result without its call"
    body_count = len(body)
    within = (max_tokens is None or h.tokens <= max_tokens) and body_count <= max_messages
    if not within:
        assert h.over_budget, "over budget without the flag"
        # Only the system run and the newest turn may break a limit.
        assert want.kept_turns <= 1, "over budget with more than the newest turn"
    return want


# -- properties ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    # One store for all examples (each builds its own conversation); the SQL is shared
    # by every backend, and the conformance suite runs it on each.
    yield from open_memory("sqlite-memory", tmp_path_factory.mktemp("properties"))


_scopes = itertools.count()

queries = st.tuples(
    picks,
    st.one_of(st.none(), st.integers(0, 60), st.integers(0, 4000)),
    st.one_of(st.integers(1, 12), st.just(500)),
    st.sampled_from([None, "gpt-4", "gpt-4o", "o200k_base", "some-local-model"]),
)


@settings(max_examples=settings().max_examples * 2)
@given(
    plan=st.lists(actions, max_size=40),
    asks=st.lists(queries, min_size=1, max_size=8),
)
def test_history_matches_reference(
    mem: Memory, plan: list[tuple[Any, ...]], asks: list[tuple[Any, ...]]
) -> None:
    b = Builder(mem, Scope("props", f"u{next(_scopes)}"))
    for action in plan:
        b.apply(action)
    b.check_store()
    ids = b.model.order
    for pick, max_tokens, max_messages, enc in asks:
        leaf = None if not ids or pick % (len(ids) + 1) == len(ids) else ids[pick % len(ids)]
        h = b.mem.history(
            b.scope,
            b.cid,
            leaf_id=leaf,
            max_tokens=max_tokens,
            max_messages=max_messages,
            model=enc,
        )
        check_history(b.model, h, leaf or b.model.active, max_tokens, max_messages, enc)


# Rows a history may read beyond what it returns: the leaf (read twice), the system run
# (fetched on its own), a pending leaf and the row that crosses the budget (an
# over-budget newest turn is read to its user message and no further).
STORE_SLACK = 10
# In another encoding the stored token counts only guide the reads, so allow the turn
# that did not fit as well, and some more slack.
OTHER_SLACK = 16

SIZES = {"tiny": (1, 2), "large": (40, 120)}


def read_to_refuse(
    want: Expected, max_tokens: int | None, max_messages: int, enc: str | None
) -> int:
    """Rows of the newest turn that did not fit that a history must read to learn so: from
    the turn's newest message back until the room left (tokens or messages) is exceeded. A
    turn of many small messages ahead of a large one is read almost whole (found by a
    random run: ten 5-token messages before a 50-token question, budget 83)."""
    if not want.truncated:
        return 0
    tok = get_tokenizer(enc)
    tokens_left = None if max_tokens is None else max_tokens - want.tokens
    kept = sum(len(turn) for turn in want.body[len(want.body) - want.kept_turns :])
    rows = 0
    for r in reversed(want.body[-want.kept_turns - 1]):
        rows += 1
        if tokens_left is not None:
            tokens_left -= tok.count_message(r.content, r.tool_calls)
        if (tokens_left is not None and tokens_left < 0) or kept + rows > max_messages:
            break
    return rows


def long_prefix(b: Builder, length: int, early: str, late: str) -> None:
    """A linear run of turns whose message sizes change half-way (``early`` then ``late``),
    so an estimate from the branch's average message size is wrong in one direction."""
    for i in range(length):
        lo, hi = SIZES[early if i < length // 2 else late]
        words = lo + (i * 7919) % (hi - lo + 1)
        role = "user" if i % 2 == 0 else "assistant"
        b.apply(("say", role, " ".join(VOCAB[(i + j) % len(VOCAB)] for j in range(words))))


@settings(max_examples=max(10, settings().max_examples // 2))
@given(
    prefix=st.tuples(
        st.integers(0, 300), st.sampled_from(sorted(SIZES)), st.sampled_from(sorted(SIZES))
    ),
    plan=st.lists(actions, max_size=30),
    asks=st.lists(queries, min_size=1, max_size=6),
)
@example(  # a turn of small messages after a large question does not fit: read whole
    prefix=(1, "large", "large"),
    plan=[
        ("say", "assistant", "the"),
        ("system", False, "the"),
        ("tools", "", ["the", "the"]),
        ("tools", "", ["the", "the", "0"]),
        ("say", "user", "0"),
    ],
    asks=[(0, 83, 500, None)],
)
def test_history_reads_about_what_it_returns(
    mem: Memory,
    prefix: tuple[int, str, str],
    plan: list[tuple[Any, ...]],
    asks: list[tuple[Any, ...]],
) -> None:
    b = Builder(mem, Scope("rows", f"u{next(_scopes)}"))
    long_prefix(b, *prefix)
    for action in plan:
        b.apply(action)
    ids = b.model.order
    for pick, max_tokens, max_messages, enc in asks:
        # Mostly the newest messages: the deep leaves are where a full load would show.
        leaf = ids[-1 - pick % min(len(ids), 8)] if ids else None
        h = b.mem.history(
            b.scope,
            b.cid,
            leaf_id=leaf,
            max_tokens=max_tokens,
            max_messages=max_messages,
            model=enc,
        )
        want = check_history(b.model, h, leaf or b.model.active, max_tokens, max_messages, enc)
        note(f"rows_read={h.rows_read} returned={len(h.messages)} depth={len(ids)}")
        if get_tokenizer(enc).name == mem.core.rt.tokenizer.name:
            refused = read_to_refuse(want, max_tokens, max_messages, enc)
            assert h.rows_read <= len(h.messages) + want.system + refused + STORE_SLACK
        else:
            dropped = len(want.body[-want.kept_turns - 1]) if want.truncated else 0
            assert h.rows_read <= len(h.messages) + dropped + want.system + OTHER_SLACK


def test_an_over_budget_newest_turn_is_read_to_its_user_message_and_no_further(
    memory: Memory,
) -> None:
    """The newest turn is kept whole whatever it costs, so the history reads on to its
    user message: in one statement that stops there, not in growing blind chunks that
    overshoot into older turns (8 then 16 rows read 24 for a turn of 13)."""
    scope = Scope("rows", f"u{next(_scopes)}")
    cid = memory.conversations.create(scope).id
    for i in range(20):
        memory.messages.append(
            scope, cid, role="user" if i % 2 == 0 else "assistant", content=f"earlier {i}"
        )
    memory.messages.append(scope, cid, role="user", content="start the long task")
    for i in range(12):
        memory.messages.append(scope, cid, role="assistant", content=f"step {i} " * 20)
    for model in (None, "cl100k_base"):  # the store's encoding, and another one
        h = memory.history(scope, cid, max_tokens=5, model=model)
        assert h.over_budget
        assert h.messages[0].content == "start the long task"
        assert len(h.messages) == 13
        assert h.rows_read <= len(h.messages) + 2  # the leaf is read twice; nothing older
