"""Vector-search conformance: the same tests on every index a database can give.

``vec`` runs each test on SQLite (exact), the system PostgreSQL without pgvector
(exact fallback) and an embedded PostgreSQL with pgvector (HNSW).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from memstrata import Memory
from memstrata.config import Settings
from memstrata.errors import Conflict, InvalidInput, MemstrataError
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Op, Query, read, write
from memstrata.types import Scope
from memstrata.vectors import (
    Space,
    VectorHit,
    VectorIndex,
    VectorItem,
    aopen_vector_index,
    delete_for_conversations,
    delete_for_user,
    detect,
    open_vector_index,
)
from memstrata.vectors.pgvector import PgvectorIndex, PgvectorInfo, index_table, vector_text
from memstrata.vectors.port import MAX_K, PlannedIndex
from support import (
    NO_SORT,
    POSTGRES_URL,
    explained,
    memory_on_postgres,
    pgvector_url,  # noqa: F401  (a session fixture, used through request)
    postgres_schema,
    schema_on,
    settings_then,
)

A = Scope("acme", "alice")
B = Scope("acme", "bob")
A_OTHER_TENANT = Scope("globex", "alice")  # same user name, another tenant
SPACE = Space("test-emb:8", 8)


@dataclass
class Env:
    """One backend: its memory (for the deletion cascade), engine and expected index kind."""

    name: str
    memory: Memory
    expected: str

    @property
    def engine(self) -> Engine:
        return self.memory.core.engine

    def index(self, space: Space = SPACE, **kw: Any) -> PlannedIndex:
        return open_vector_index(self.engine, space, **kw)


BACKENDS = {"sqlite": "exact", "postgres": "exact", "pgvector": "pgvector-hnsw"}


@pytest.fixture(params=list(BACKENDS))
def vec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    name = request.param
    if name == "sqlite":
        settings = Settings(home=tmp_path, worker="off")
        mem = Memory.open(f"sqlite:///{(tmp_path / 'm.db').as_posix()}", settings=settings)
        yield from _with_cascade(Env(name, mem, BACKENDS[name]))
    elif name == "postgres":
        with postgres_schema() as schema:
            mem = memory_on_postgres(POSTGRES_URL, schema, tmp_path)
            yield from _with_cascade(Env(name, mem, BACKENDS[name]))
    else:
        url = request.getfixturevalue("pgvector_url")
        with schema_on(url) as schema:
            mem = memory_on_postgres(url, schema, tmp_path)
            yield from _with_cascade(Env(name, mem, BACKENDS[name]))


def _with_cascade(env: Env) -> Iterator[Env]:
    # The recall feature registers these; the tests do it themselves.
    env.memory.core.rt.cascade.on_conversation_delete(delete_for_conversations)
    env.memory.core.rt.cascade.on_user_delete(delete_for_user)
    try:
        yield env
    finally:
        env.memory.close()


def item(vid: str, scope: Scope, vector: Any, conversation: str = "c1", message: str | None = None):
    return VectorItem(vid, scope, conversation, message or f"m-{vid}", vector)


def basis(i: int, dim: int = 8) -> list[float]:
    v = [0.0] * dim
    v[i] = 1.0
    return v


def cosines(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    m = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return m @ (q / np.linalg.norm(q))


# -- capability ---------------------------------------------------------------------------------


def test_each_backend_gets_its_index_kind(vec: Env) -> None:
    index = vec.index()
    assert index.kind == vec.expected
    assert isinstance(index, VectorIndex)
    capability = detect(vec.engine)
    assert capability.kind == vec.expected
    assert index.reason == capability.reason
    if vec.name == "postgres":
        # The system server has no pgvector: the fallback is chosen and says why.
        assert "not available" in capability.reason
        assert capability.pgvector is None
    if vec.name == "pgvector":
        assert isinstance(index, PgvectorIndex)
        assert capability.pgvector is not None
        assert capability.pgvector.has_hnsw


def test_migration_3_applies_without_the_extension(vec: Env) -> None:
    assert vec.engine.schema_version() >= 3
    rows = vec.engine.run(read(lambda: (yield Query("SELECT count(*) FROM vectors"))))
    assert rows[0][0] == 0


def test_exact_is_chosen_when_asked(vec: Env) -> None:
    index = vec.index(prefer="exact")
    assert index.kind == "exact"
    index.add([item("v1", A, basis(0))])
    assert [h.id for h in index.search(A, basis(0), 1)] == ["v1"]


def test_pgvector_demanded_where_missing_is_a_configuration_error(vec: Env) -> None:
    if vec.expected == "pgvector-hnsw":
        assert vec.index(prefer="pgvector").kind == "pgvector-hnsw"
    else:
        with pytest.raises(MemstrataError) as err:
            vec.index(prefer="pgvector")
        assert err.value.code == "configuration_error"


# -- search -------------------------------------------------------------------------------------


def test_search_ranks_by_cosine_and_honours_k(vec: Env) -> None:
    index = vec.index()
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((40, 8))
    index.add([item(f"v{i:02}", A, matrix[i] * (i + 1)) for i in range(40)])  # lengths vary
    q = rng.standard_normal(8)
    want = cosines(matrix, q)
    order = sorted(range(40), key=lambda i: -want[i])

    hits = index.search(A, q, k=5)
    assert [h.id for h in hits] == [f"v{i:02}" for i in order[:5]]
    for h in hits:
        assert h.score == pytest.approx(want[int(h.id[1:])], abs=1e-5)
        assert -1.0 <= h.score <= 1.0
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(index.search(A, q, k=MAX_K)) == 40
    assert index.search(B, q, k=5) == []


def test_scores_span_the_cosine_range(vec: Env) -> None:
    index = vec.index()
    index.add([item("same", A, basis(0)), item("ortho", A, basis(1))])
    index.add([item("opposite", A, [-2.0, 0, 0, 0, 0, 0, 0, 0])])
    hits = {h.id: h.score for h in index.search(A, basis(0), k=3)}
    assert hits["same"] == pytest.approx(1.0, abs=1e-6)
    assert hits["ortho"] == pytest.approx(0.0, abs=1e-6)
    assert hits["opposite"] == pytest.approx(-1.0, abs=1e-6)


def test_hits_carry_message_and_conversation(vec: Env) -> None:
    index = vec.index()
    index.add([VectorItem("v1", A, "conv-9", "msg-7", basis(2))])
    [hit] = index.search(A, basis(2), 1)
    assert (hit.id, hit.message_id, hit.conversation_id) == ("v1", "msg-7", "conv-9")
    assert hit.score == pytest.approx(1.0)


# -- isolation ----------------------------------------------------------------------------------


def test_a_canary_of_another_scope_is_never_returned(vec: Env) -> None:
    """Each other scope plants a vector equal to the query: the nearest there is."""
    index = vec.index()
    rng = np.random.default_rng(5)
    q = rng.standard_normal(8)
    index.add([item(f"a{i}", A, rng.standard_normal(8)) for i in range(30)])
    index.add([item("canary-bob", B, q), item("canary-globex", A_OTHER_TENANT, q)])
    index.add([item("canary-agent", Scope("acme", "alice", "planner"), q)])

    for k in (1, 10, MAX_K):
        ids = {h.id for h in index.search(A.__class__("acme", "alice", "writer"), q, k)}
        assert not any(i.startswith("canary") for i in ids)
    ids = {h.id for h in index.search(A, q, MAX_K)}
    assert "canary-bob" not in ids
    assert "canary-globex" not in ids
    # No agent in the scope means all of the user's agents; an agent narrows to it.
    assert "canary-agent" in ids
    assert [h.id for h in index.search(Scope("acme", "alice", "planner"), q, 5)] == ["canary-agent"]
    assert [h.id for h in index.search(B, q, 5)] == ["canary-bob"]
    assert [h.id for h in index.search(A_OTHER_TENANT, q, 5)] == ["canary-globex"]
    assert index.count(A) == 31
    assert index.count(B) == 1
    assert index.count() == 33


def test_search_needs_a_scope(vec: Env) -> None:
    index = vec.index()
    with pytest.raises(InvalidInput):
        index.search(None, basis(0), 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        index.search("acme/alice", basis(0), 1)  # type: ignore[arg-type]


def test_identities_never_mix(vec: Env) -> None:
    first = vec.index(Space("emb-a", 8))
    second = vec.index(Space("emb-b", 8))
    first.add([item("from-a", A, basis(0))])
    second.add([item("from-b", A, basis(1))])
    assert [h.id for h in first.search(A, basis(1), 10)] == ["from-a"]
    assert [h.id for h in second.search(A, basis(0), 10)] == ["from-b"]
    assert first.count() == 1
    assert second.count() == 1

    # The same identity with another dimension is another space: refused.
    with pytest.raises(InvalidInput) as err:
        vec.index(Space("emb-a", 16))
    assert err.value.detail["field"] == "dim"
    assert first.count() == 1


@pytest.mark.parametrize(
    "bad",
    [
        [1.0] * 7,
        [1.0] * 9,
        [[1.0] * 8],
        [float("nan")] + [1.0] * 7,
        [float("inf")] + [0.0] * 7,
        [0.0] * 8,
        ["x"] * 8,
    ],
    ids=["short", "long", "2d", "nan", "inf", "zero", "text"],
)
def test_bad_vectors_are_invalid_input(vec: Env, bad: Any) -> None:
    index = vec.index()
    index.add([item("ok", A, basis(0))])
    with pytest.raises(InvalidInput):
        index.add([item("good", A, basis(1)), item("bad", A, bad)])
    with pytest.raises(InvalidInput):
        index.search(A, bad, 1)
    assert index.count() == 1  # nothing of the failed batch was written


def test_bad_arguments_are_invalid_input(vec: Env) -> None:
    index = vec.index()
    for k in (0, -1, MAX_K + 1, 1.5, True):
        with pytest.raises(InvalidInput):
            index.search(A, basis(0), k)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        index.add([item("dup", A, basis(0)), item("dup", A, basis(1))])
    with pytest.raises(InvalidInput):
        index.add([VectorItem("", A, "c", "m", basis(0))])
    with pytest.raises(InvalidInput):
        index.add([("v", A, "c", "m", basis(0))])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        index.search(A, basis(0), 3, exclude_message_ids="m-1")
    assert index.add([]) == 0
    assert index.count() == 0


# -- filters ------------------------------------------------------------------------------------


def test_excluded_messages_are_skipped(vec: Env) -> None:
    index = vec.index()
    index.add([item(f"v{i}", A, [1.0, i / 10, 0, 0, 0, 0, 0, 0]) for i in range(6)])
    assert [h.id for h in index.search(A, basis(0), 3)] == ["v0", "v1", "v2"]
    hits = index.search(A, basis(0), 3, exclude_message_ids=["m-v0", "m-v2", "unknown"])
    assert [h.id for h in hits] == ["v1", "v3", "v4"]
    hits = index.search(A, basis(0), 3, exclude_message_ids=iter({"m-v1"}))
    assert [h.id for h in hits] == ["v0", "v2", "v3"]
    everything = [f"m-v{i}" for i in range(6)]
    assert index.search(A, basis(0), 3, exclude_message_ids=everything) == []


def test_conversation_filter(vec: Env) -> None:
    index = vec.index()
    index.add([item("x1", A, basis(0), "cx"), item("x2", A, basis(1), "cx")])
    index.add([item("y1", A, basis(0), "cy"), item("b1", B, basis(0), "cx")])
    assert [h.id for h in index.search(A, basis(0), 5, conversation_id="cx")] == ["x1", "x2"]
    assert [h.id for h in index.search(A, basis(0), 5, conversation_id="cy")] == ["y1"]
    assert index.search(A, basis(0), 5, conversation_id="none") == []
    # Another user's conversation id gives nothing, even when its vectors match.
    assert [h.id for h in index.search(B, basis(0), 5, conversation_id="cx")] == ["b1"]


# -- writes -------------------------------------------------------------------------------------


def test_adding_an_id_again_replaces_it(vec: Env) -> None:
    index = vec.index()
    index.add([item("v1", A, basis(0), "c1", "m1"), item("v2", A, basis(1), "c1")])
    index.add([item("v1", A, basis(3), "c2", "m9")])
    assert index.count() == 2
    [hit] = index.search(A, basis(3), 1)
    assert (hit.id, hit.message_id, hit.conversation_id) == ("v1", "m9", "c2")
    assert hit.score == pytest.approx(1.0)
    # The old vector and its old conversation are gone with it.
    assert [h.id for h in index.search(A, basis(0), 5, conversation_id="c1")] == ["v2"]
    assert max(h.score for h in index.search(A, basis(0), 5)) == pytest.approx(0.0, abs=1e-6)
    assert _derived_rows(vec, index) in (None, 2)


def test_an_id_of_another_scope_is_a_conflict(vec: Env) -> None:
    index = vec.index()
    index.add([item("v1", A, basis(0))])
    with pytest.raises(Conflict):
        index.add([item("v2", B, basis(1)), item("v1", B, basis(1))])
    assert index.count(A) == 1
    assert index.count(B) == 0
    assert [h.id for h in index.search(A, basis(0), 1)] == ["v1"]


def test_large_batches_and_exclusions(vec: Env) -> None:
    """More rows than one statement carries, and many excluded ids."""
    index = vec.index()
    rng = np.random.default_rng(11)
    matrix = rng.standard_normal((1200, 8))
    assert index.add([item(f"v{i:04}", A, matrix[i]) for i in range(1200)]) == 1200
    assert index.count(A) == 1200
    q = rng.standard_normal(8)
    order = np.argsort(-cosines(matrix, q))
    excluded = [f"m-v{i:04}" for i in order[:700]]
    hits = index.search(A, q, 5, exclude_message_ids=excluded)
    got = [int(h.id[1:]) for h in hits]
    if vec.expected == "exact":
        assert got == [int(i) for i in order[700:705]]
    else:
        assert not set(got) & {int(i) for i in order[:700]}
        assert len(got) == 5


# -- deletion cascade ---------------------------------------------------------------------------


def _conversation_with_vectors(mem: Memory, index: PlannedIndex, scope: Scope, n: int) -> str:
    conv = mem.conversations.create(scope)
    items = []
    for i in range(n):
        msg = mem.messages.append(scope, conv.id, role="user", content=f"turn {i}")
        items.append(VectorItem(f"{conv.id}:{i}", scope, conv.id, msg.id, basis(i % 8)))
    index.add(items)
    return conv.id


def _derived_rows(env: Env, index: PlannedIndex) -> int | None:
    if not isinstance(index, PgvectorIndex):
        return None
    rows = env.engine.run(read(lambda: (yield Query(f"SELECT count(*) FROM {index.table}"))))
    return int(rows[0][0])


def test_deleting_a_conversation_deletes_its_vectors(vec: Env) -> None:
    index = vec.index()
    other_space = vec.index(Space("test-emb-2:8", 8))
    mem = vec.memory
    gone = _conversation_with_vectors(mem, index, A, 5)
    kept = _conversation_with_vectors(mem, index, A, 3)
    other_space.add([item("second-space", A, basis(0), gone)])
    bobs = _conversation_with_vectors(mem, index, B, 2)
    assert index.count() == 10
    assert _derived_rows(vec, index) in (None, 10)

    mem.conversations.delete(A, gone)
    assert index.count(A) == 3
    assert index.count(B) == 2
    assert other_space.count() == 0  # every space of the conversation goes
    assert {h.conversation_id for h in index.search(A, basis(0), MAX_K)} == {kept}
    assert _derived_rows(vec, index) in (None, 5)
    assert {h.conversation_id for h in index.search(B, basis(0), MAX_K)} == {bobs}


def test_deleting_a_user_deletes_their_vectors(vec: Env) -> None:
    index = vec.index()
    mem = vec.memory
    _conversation_with_vectors(mem, index, A, 4)
    index.add([item("loose", A, basis(0), "not-a-stored-conversation")])
    _conversation_with_vectors(mem, index, A_OTHER_TENANT, 2)
    _conversation_with_vectors(mem, index, B, 2)

    mem.users.delete(A)
    assert index.count(A) == 0
    assert index.search(A, basis(0), MAX_K) == []
    assert index.count(A_OTHER_TENANT) == 2
    assert index.count(B) == 2
    assert _derived_rows(vec, index) in (None, 4)


def test_cascade_steps_are_methods_too(vec: Env) -> None:
    index = vec.index()
    index.add([item("v1", A, basis(0), "c1"), item("v2", A, basis(0), "c2")])
    vec.engine.run(write(lambda: index.delete_for_conversations(["c1"])))
    assert [h.id for h in index.search(A, basis(0), 5)] == ["v2"]
    vec.engine.run(write(lambda: index.delete_for_user("acme", "alice")))
    assert index.count() == 0


# -- recall against a reference -----------------------------------------------------------------


def test_top10_matches_the_exact_reference(vec: Env) -> None:
    """2,000 random vectors: exact indexes must agree with numpy exactly; HNSW must
    overlap the exact top 10 by at least 0.9 on average."""
    dim = 64
    index = vec.index(Space("random:64", dim))
    exact = vec.index(Space("random:64", dim), prefer="exact")
    rng = np.random.default_rng(2024)
    matrix = rng.standard_normal((2000, dim)).astype(np.float32)
    index.add([item(f"v{i:04}", A, matrix[i]) for i in range(2000)])
    settings: tuple[str, ...] = ()
    if isinstance(index, PgvectorIndex):
        # On a table this small PostgreSQL may prefer an exact sort; measure the graph.
        settings = (NO_SORT,)
        plan = vec.engine.run(
            read(lambda: explained(index.search_op(A, matrix[0], 10), settings=settings))
        )
        assert f"{index.table}_hnsw" in plan, plan
    overlaps = []
    for _ in range(40):
        q = rng.standard_normal(dim)
        reference = {f"v{i:04}" for i in np.argsort(-cosines(matrix, q))[:10]}
        assert {h.id for h in exact.search(A, q, 10)} == reference

        def search(q: np.ndarray = q) -> Op[list[VectorHit]]:
            return settings_then(settings, index.search_op(A, q, 10))

        hits = vec.engine.run(read(search))
        assert len(hits) == 10
        overlaps.append(len({h.id for h in hits} & reference) / 10)
    if vec.expected == "exact":
        assert min(overlaps) == 1.0
    else:
        assert float(np.mean(overlaps)) >= 0.9, overlaps


# -- async --------------------------------------------------------------------------------------


def test_async_search_matches_sync(vec: Env) -> None:
    rng = np.random.default_rng(8)
    q = rng.standard_normal(8)

    async def main() -> tuple[str, list[VectorHit], int]:
        index = await aopen_vector_index(vec.engine, SPACE)
        await index.aadd([item(f"v{i}", A, rng.standard_normal(8)) for i in range(25)])
        hits = await index.asearch(A, q, 7, exclude_message_ids=["m-v3"])
        return index.kind, hits, await index.acount(A)

    kind, async_hits, count = anyio.run(main)
    index = vec.index()
    assert kind == index.kind == vec.expected
    assert count == 25
    assert async_hits == index.search(A, q, 7, exclude_message_ids=["m-v3"])
    assert len(async_hits) == 7


# -- pieces without a database ------------------------------------------------------------------


def test_vector_text_round_trips_float32() -> None:
    v = np.random.default_rng(1).standard_normal(16).astype("<f4")
    text = vector_text(v)
    back = np.array([float(x) for x in text.strip("[]").split(",")], dtype="<f4")
    assert text.startswith("[")
    assert text.endswith("]")
    assert np.array_equal(back, v)


def test_index_table_names_are_safe_and_distinct() -> None:
    names = {
        index_table(Space('x"; DROP TABLE vectors; --', 8)),
        index_table(Space("x", 8)),
        index_table(Space("x", 9)),
    }
    assert len(names) == 3
    assert all(n.startswith("vectors_hnsw_") and n.replace("_", "").isalnum() for n in names)
    assert index_table(Space("x", 8)) == index_table(Space("x", 8))


@pytest.mark.parametrize(
    ("version", "hnsw", "iterative"),
    [
        ("0.4.4", False, False),
        ("0.5.0", True, False),
        ("0.7.4", True, False),
        ("0.8.0", True, True),
        ("0.10.1", True, True),
    ],
)
def test_pgvector_versions(version: str, hnsw: bool, iterative: bool) -> None:
    info = PgvectorInfo(version, "public")
    assert info.has_hnsw is hnsw
    assert info.has_iterative_scan is iterative


@pytest.mark.parametrize("bad", [("", 8), ("x", 0), ("x", 16_001), ("x", True), ("x", 8.0)])
def test_bad_spaces(bad: tuple[Any, Any]) -> None:
    with pytest.raises(InvalidInput):
        Space(*bad)
