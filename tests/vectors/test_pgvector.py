"""The pgvector path: detection, privileges, schemas, backfill, the HNSW plan.

Runs on the session's embedded PostgreSQL with pgvector (``pgvector_url``); the
shared conformance tests for every backend are in test_vectors.py.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest

from memstrata.backends.postgres import PostgresEngine
from memstrata.errors import MemstrataError
from memstrata.storage.plan import Exec, Op, Query, read, write
from memstrata.types import Scope
from memstrata.vectors import Space, VectorItem, detect, open_vector_index
from memstrata.vectors.pgvector import HNSW_MAX_DIM, PgvectorIndex
from support import (  # noqa: F401  (pgvector_url is a fixture)
    NO_SORT,
    explained,
    pgvector_url,
    schema_on,
)

A = Scope("acme", "alice")
B = Scope("acme", "bob")


@pytest.fixture
def engine(pgvector_url: str) -> Iterator[PostgresEngine]:  # noqa: F811
    with schema_on(pgvector_url) as schema:
        eng = PostgresEngine(pgvector_url, schema=schema, max_size=4)
        try:
            yield eng
        finally:
            eng.close()


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def with_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.split("@", 1)[1] if "@" in parts.netloc else parts.netloc
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


@contextmanager
def fresh_database(url: str, owner: str | None = None) -> Iterator[str]:
    """A new database without the extension; yields its URL."""
    name = f"d_{secrets.token_hex(5)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
    try:
        yield with_database(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def extension_schema(url: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
            "ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        ).fetchone()
    return None if row is None else str(row[0])


def random_items(scope: Scope, n: int, dim: int, seed: int, prefix: str) -> list[VectorItem]:
    matrix = np.random.default_rng(seed).standard_normal((n, dim))
    return [VectorItem(f"{prefix}{i}", scope, "c", f"m-{prefix}{i}", matrix[i]) for i in range(n)]


# -- detection ----------------------------------------------------------------------------------


def test_detection_creates_the_extension_where_it_may(pgvector_url: str) -> None:  # noqa: F811
    with fresh_database(pgvector_url) as url:
        assert extension_schema(url) is None
        eng = PostgresEngine(url, max_size=2)
        try:
            looked = detect(eng, install=False)
            assert looked.kind == "exact"
            assert "not installed" in looked.reason
            assert extension_schema(url) is None  # looking only never installs

            found = detect(eng)
            assert found.kind == "pgvector-hnsw"
            assert found.pgvector is not None
            assert found.pgvector.schema == "public"
            assert extension_schema(url) == "public"
            assert open_vector_index(eng, Space("e", 4)).kind == "pgvector-hnsw"
        finally:
            eng.close()


def test_without_the_privilege_the_exact_fallback_is_used(
    pgvector_url: str,  # noqa: F811
) -> None:
    role = f"r_{secrets.token_hex(5)}"
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # no superuser: vector is untrusted
    try:
        with fresh_database(pgvector_url, owner=role) as url:
            eng = PostgresEngine(with_user(url, role), max_size=2)
            try:
                capability = detect(eng)
                assert capability.kind == "exact"
                assert "CREATE EXTENSION vector failed" in capability.reason
                assert "permission denied" in capability.reason
                # The failed CREATE left nothing broken: the same engine goes on working.
                index = open_vector_index(eng, Space("e", 4))
                assert index.kind == "exact"
                index.add([VectorItem("v1", A, "c", "m", [1.0, 0, 0, 0])])
                assert [h.id for h in index.search(A, [1.0, 0, 0, 0], 3)] == ["v1"]
                with pytest.raises(MemstrataError) as err:
                    open_vector_index(eng, Space("e", 4), prefer="pgvector")
                assert "permission denied" in str(err.value)
            finally:
                eng.close()
            assert extension_schema(url) is None
    finally:
        with psycopg.connect(pgvector_url, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


def test_an_extension_outside_the_search_path_still_works(
    pgvector_url: str,  # noqa: F811
) -> None:
    with fresh_database(pgvector_url) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA ext")
            conn.execute("CREATE EXTENSION vector WITH SCHEMA ext")
            conn.execute("CREATE SCHEMA app")
        eng = PostgresEngine(url, schema="app", max_size=2)
        try:
            index = open_vector_index(eng, Space("e", 4))
            assert isinstance(index, PgvectorIndex)
            assert index.info.schema == "ext"
            index.add([VectorItem("v1", A, "c", "m1", [1.0, 0, 0, 0])])
            index.add([VectorItem("v2", A, "c", "m2", [0, 1.0, 0, 0])])
            assert [h.id for h in index.search(A, [0.1, 1.0, 0, 0], 2)] == ["v2", "v1"]
        finally:
            eng.close()


def test_dimensions_over_the_hnsw_limit_use_exact(engine: PostgresEngine) -> None:
    dim = HNSW_MAX_DIM + 1
    index = open_vector_index(engine, Space("wide", dim))
    assert index.kind == "exact"
    assert str(HNSW_MAX_DIM) in index.reason
    index.add(random_items(A, 3, dim, 1, "w"))
    assert len(index.search(A, np.ones(dim), 5)) == 3


# -- the derived table --------------------------------------------------------------------------


def test_rows_written_without_pgvector_are_copied_in_on_open(engine: PostgresEngine) -> None:
    space = Space("late", 16)
    exact = open_vector_index(engine, space, prefer="exact")
    exact.add(random_items(A, 700, 16, 4, "e"))  # more than one copy batch
    hnsw = open_vector_index(engine, space)
    assert isinstance(hnsw, PgvectorIndex)
    derived = engine.run(read(lambda: (yield Query(f"SELECT count(*) FROM {hnsw.table}"))))
    assert derived[0][0] == 700
    q = np.random.default_rng(9).standard_normal(16)
    assert [h.id for h in hnsw.search(A, q, 5)] == [h.id for h in exact.search(A, q, 5)]
    # Written by the exact index after the table exists: caught up at the next open.
    exact.add(random_items(A, 3, 16, 5, "late"))
    assert open_vector_index(engine, space).count() == 703
    derived = engine.run(read(lambda: (yield Query(f"SELECT count(*) FROM {hnsw.table}"))))
    assert derived[0][0] == 703


def test_processes_opening_a_new_space_together_do_not_race(engine: PostgresEngine) -> None:
    errors: list[BaseException] = []
    kinds: list[str] = []
    start = threading.Barrier(4)

    def opener() -> None:
        try:
            start.wait()
            kinds.append(open_vector_index(engine, Space("together", 8)).kind)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert kinds == ["pgvector-hnsw"] * 4


# -- the HNSW plan ------------------------------------------------------------------------------


def test_the_search_query_can_use_the_hnsw_index(engine: PostgresEngine) -> None:
    """The query's shape (schema-qualified operator, cast, filters, ORDER BY distance)
    must let PostgreSQL walk the HNSW index; with sorting off it has no other way."""
    index = open_vector_index(engine, Space("plan", 32))
    assert isinstance(index, PgvectorIndex)
    index.add(random_items(A, 500, 32, 6, "p"))
    engine.run(write(lambda: (yield Exec(f"ANALYZE {index.table}"))))
    q = np.random.default_rng(7).standard_normal(32)
    op = index.search_op(A, q, 10, conversation_id="c", exclude_message_ids=["m-p1"])
    plan = engine.run(read(lambda: explained(op, settings=(NO_SORT,))))
    assert f"Index Scan using {index.table}_hnsw" in plan, plan
    assert "Sort" not in plan


def test_a_small_scope_among_many_still_gets_k_hits_through_hnsw(
    engine: PostgresEngine,
) -> None:
    """Bob's 5 vectors sit among Alice's 3,000, all of them nearer the query. Even when
    the HNSW index drives the search, the iterative scan keeps going until Bob's rows
    are found, instead of filtering the first candidates down to nothing."""
    dim = 16
    index = open_vector_index(engine, Space("crowd", dim))
    assert isinstance(index, PgvectorIndex)
    q = np.zeros(dim)
    q[0] = 1.0
    rng = np.random.default_rng(12)
    near = rng.standard_normal((3000, dim)) * 0.1 + q
    far = rng.standard_normal((5, dim)) * 0.1 - q
    index.add([VectorItem(f"a{i}", A, "c", f"ma{i}", near[i]) for i in range(3000)])
    index.add([VectorItem(f"b{i}", B, "c", f"mb{i}", far[i]) for i in range(5)])
    engine.run(write(lambda: (yield Exec(f"ANALYZE {index.table}"))))
    # Sorting off: the planner must take the ordered HNSW scan even for a tiny scope.
    plan = engine.run(read(lambda: explained(index.search_op(B, q, 5), settings=(NO_SORT,))))
    assert f"{index.table}_hnsw" in plan, plan

    def forced() -> Op[list[str]]:
        yield Exec(NO_SORT)
        hits = yield from index.search_op(B, q, 5)
        return sorted(h.id for h in hits)

    assert index.info.has_iterative_scan
    assert engine.run(read(forced)) == [f"b{i}" for i in range(5)]
    assert sorted(h.id for h in index.search(B, q, 5)) == [f"b{i}" for i in range(5)]
