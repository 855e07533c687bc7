"""Digests of a user's content stored beside sealed text are keyed with the owner's digest
key under encryption at rest: a context's prefix chain (``context_prefixes``) and a node
turn's digest (``node_turn_ids``). Unkeyed, they would confirm a guessed text to anyone
holding the database. They still do their job: the cacheable prefix is counted, a
replayed node turn writes nothing (also one recorded before digests were keyed), and
with encryption off both are the plain SHA-256 they always were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.config import Settings
from memstrata.context.prefix import fingerprint
from memstrata.nodes import turn_ids
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.types import Scope
from support import postgres_available, postgres_schema
from test_encryption_at_rest import ALICE, BOB, open_pg, settings

needs_postgres = pytest.mark.skipif(not postgres_available(), reason="needs PostgreSQL")

BUDGET = 4000


def chat(mem: Memory, scope: Scope) -> str:
    """The same two turns for any owner; returns the conversation id."""
    cid = mem.conversations.create(scope).id
    for role, text in (
        ("user", "My sister Ines lives in Porto."),
        ("assistant", "Noted: Ines, Porto."),
        ("user", "What city does my sister live in?"),
    ):
        mem.messages.append(scope, cid, role=role, content=text)
    return cid


def stored_chain(mem: Memory, cid: str) -> list[list[object]]:
    rows = mem.core.engine.run(
        read(
            lambda: (
                yield Query("SELECT chain FROM context_prefixes WHERE conversation_id = ?", (cid,))
            )
        )
    )
    chain: list[list[object]] = json.loads(rows[0][0])
    return chain


def unkeyed(ctx) -> list[str]:  # type: ignore[no-untyped-def]
    """The context's chain as an unkeyed SHA-256 would make it."""
    tokens = [n for n, _ in ctx.fingerprint.chain]
    counts = [b - a for a, b in zip([0, *tokens], tokens, strict=False)]
    fp = fingerprint(ctx.report.leaf_id, ctx.fingerprint.encoding, ctx.messages, counts)
    return [h for _, h in fp.chain]


def test_prefix_chain_is_keyed_per_owner_and_still_counts_the_prefix(tmp_path: Path) -> None:
    mem = Memory.open(settings=settings(tmp_path))
    try:
        keyed_chains(mem)
    finally:
        mem.close()


@needs_postgres
def test_postgres_prefix_chain_is_keyed_per_owner(tmp_path: Path) -> None:
    with postgres_schema() as schema:
        mem = open_pg(schema, settings(tmp_path))
        try:
            keyed_chains(mem)
        finally:
            mem.close()


def keyed_chains(mem: Memory) -> None:
    """Alice's chain is hers: keyed, unlike Bob's of the same texts, and it counts the
    prefix her next context shares."""
    a, b = chat(mem, ALICE), chat(mem, BOB)
    first = mem.context(ALICE, a, budget=BUDGET)
    assert first.report.cache.prefix_tokens == 0
    assert first.fingerprint is not None
    alice = stored_chain(mem, a)
    assert [h for _, h in alice] == [h for _, h in first.fingerprint.chain]
    # No entry is the plain hash of the same messages: a guess cannot be checked.
    assert not {h for _, h in alice} & set(unkeyed(first))
    mem.context(BOB, b, budget=BUDGET)
    bob = stored_chain(mem, b)
    assert len(bob) == len(alice)
    assert not {h for _, h in bob} & {h for _, h in alice}  # same texts, other key
    # The next turn shares the whole previous context as its prefix.
    mem.messages.append(ALICE, a, role="assistant", content="She lives in Porto.")
    leaf = mem.messages.append(ALICE, a, role="user", content="And my brother?")
    second = mem.context(ALICE, a, budget=BUDGET)
    assert second.report.leaf_id == leaf.id
    assert second.report.cache.prefix_tokens == first.fingerprint.chain[-1][0]


def test_with_encryption_off_the_chain_is_plain_sha256(tmp_path: Path) -> None:
    mem = Memory.open(settings=Settings(home=tmp_path, worker="off"))
    try:
        cid = chat(mem, ALICE)
        ctx = mem.context(ALICE, cid, budget=BUDGET)
        assert [h for _, h in stored_chain(mem, cid)] == unkeyed(ctx)
    finally:
        mem.close()


def stored_digests(mem: Memory) -> dict[str, str]:
    rows = mem.core.engine.run(
        read(lambda: (yield Query("SELECT message_id, digest FROM node_turn_ids", ())))
    )
    return {str(m): str(d) for m, d in rows}


def test_node_turn_digests_are_keyed_and_replays_still_write_nothing(tmp_path: Path) -> None:
    mem = Memory.open(settings=settings(tmp_path))
    try:
        cid = mem.conversations.create(ALICE).id
        node = mem.nodes.open(ALICE, "app", cid, "llm")
        turn = node.add_turn("m1", None, "my PIN is 4921", assistant_content="noted")
        assert node.flush() == 1
        plain = turn_ids.turn_digest([turn])
        stored = stored_digests(mem)["m1"]
        assert stored != plain
        assert len(stored) == len(plain) == 64
        node.add_turn("m1", None, "my PIN is 4921", assistant_content="noted")
        assert node.flush() == 0  # a replay: nothing written
        # A digest recorded before digests were keyed still names a replay.
        mem.core.engine.run(
            write(lambda: (yield Exec("UPDATE node_turn_ids SET digest = ?", (plain,))))
        )
        node.add_turn("m1", None, "my PIN is 4921", assistant_content="noted")
        assert node.flush() == 0
        # Other content is a replacement, recorded with a keyed digest.
        node.add_turn("m1", None, "my PIN is 4921", assistant_content="noted, twice")
        assert node.flush() == 1
        assert stored_digests(mem)["m1"] not in (plain, stored)
        assert [t.assistant_content for t in node.message_log("m1")] == ["noted", "noted, twice"]
    finally:
        mem.close()


def test_node_turn_digest_is_plain_sha256_with_encryption_off(tmp_path: Path) -> None:
    mem = Memory.open(settings=Settings(home=tmp_path, worker="off"))
    try:
        cid = mem.conversations.create(ALICE).id
        node = mem.nodes.open(ALICE, "app", cid, "llm")
        turn = node.add_turn("m1", None, "hello", assistant_content="hi")
        node.flush()
        assert stored_digests(mem)["m1"] == turn_ids.turn_digest([turn])
    finally:
        mem.close()
