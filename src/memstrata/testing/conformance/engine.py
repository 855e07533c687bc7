"""Conformance of a storage engine itself (:class:`~memstrata.storage.engine.Engine`), below
the facade: placeholder rewriting, lock modes, unique violations and read retries.

A backend's test module provides an ``engine`` fixture (an open, migrated engine) and,
where the engine holds connections that can drop, ``lost_connection``: a request that
ends the connection it runs on (the retry test skips without one)::

    class TestMyEngine(EngineConformance):
        @pytest.fixture
        def engine(self): ...
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import anyio
import pytest

from memstrata.errors import Conflict, MemstrataError
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Exec, Op, Query, Request, Row, read, write

__all__ = ["EngineConformance"]

# A table of the conformance suite's own, in the dialect subset every backend accepts.
_TABLE = "conformance_engine_rows"


def _setup() -> Op[None]:
    yield Exec(
        f"CREATE TABLE IF NOT EXISTS {_TABLE} "
        "(id TEXT PRIMARY KEY, grp TEXT NOT NULL, n INTEGER NOT NULL, holder TEXT)"
    )


def _insert(grp: str, ids: list[str]) -> Op[None]:
    for i, rid in enumerate(ids):
        yield Exec(f"INSERT INTO {_TABLE} (id, grp, n) VALUES (?, ?, ?)", (rid, grp, i))


def _rows(grp: str, lock: Any = None) -> Op[list[Row]]:
    rows = yield Query(f"SELECT id, n FROM {_TABLE} WHERE grp = ? ORDER BY n", (grp,), lock=lock)
    return [tuple(r) for r in rows]


def _one(sql: str, *params: Any) -> Op[Any]:
    rows = yield Query(sql, params)
    return rows[0][0]


def _claim(grp: str, holder: str) -> Op[str | None]:
    """Take the first row nobody holds, as a job claim does."""
    rows = yield Query(
        f"SELECT id FROM {_TABLE} WHERE grp = ? AND holder IS NULL ORDER BY n LIMIT 1",
        (grp,),
        lock="skip_locked",
    )
    if not rows:
        return None
    rid = str(rows[0][0])
    # By id alone: only the row lock keeps two claimers off the same row.
    yield Exec(f"UPDATE {_TABLE} SET holder = ? WHERE id = ?", (holder, rid))
    return rid


class EngineConformance:
    """Tests every :class:`~memstrata.storage.engine.Engine` must pass."""

    @pytest.fixture
    def lost_connection(self) -> Request | None:
        """A request that ends its own connection (None: the engine has none to lose)."""
        return None

    @pytest.fixture
    def group(self, engine: Engine) -> str:
        engine.run(write(_setup))
        return f"g-{uuid.uuid4().hex[:12]}"

    # -- placeholders ------------------------------------------------------------------------

    def test_question_marks_become_the_drivers_placeholders(self, engine: Engine) -> None:
        assert engine.run(read(lambda: _one("SELECT ? || ?", "a", "b"))) == "ab"
        # A literal percent sign in the SQL text is not a placeholder of any driver.
        assert engine.run(read(lambda: _one("SELECT '10%' || ?", "!"))) == "10%!"
        assert engine.run(
            read(lambda: _one("SELECT CASE WHEN ? LIKE 'a%' THEN 1 ELSE 0 END", "ab"))
        )
        # Parameters are values, never SQL: their question marks and percents stay.
        assert engine.run(read(lambda: _one("SELECT ?", "why? 100% %s ?"))) == "why? 100% %s ?"

    def test_the_async_driver_rewrites_the_same_way(self, engine: Engine) -> None:
        async def both() -> tuple[Any, Any]:
            return (
                await engine.arun(read(lambda: _one("SELECT ? || '%'", "x"))),
                await engine.arun(read(lambda: _one("SELECT ?", "?%"))),
            )

        assert anyio.run(both) == ("x%", "?%")

    # -- lock modes --------------------------------------------------------------------------

    @pytest.mark.parametrize("lock", [None, "share", "update", "skip_locked"])
    def test_every_lock_mode_reads_the_same_rows(
        self, engine: Engine, group: str, lock: str | None
    ) -> None:
        ids = [f"{group}-{i}" for i in range(3)]
        engine.run(write(lambda: _insert(group, ids)))
        assert engine.run(write(lambda: _rows(group, lock))) == [
            (rid, i) for i, rid in enumerate(ids)
        ]

    def test_concurrent_claims_never_take_the_same_row(self, engine: Engine, group: str) -> None:
        ids = [f"{group}-{i}" for i in range(24)]
        engine.run(write(lambda: _insert(group, ids)))
        taken: dict[str, list[str]] = {"a": [], "b": []}
        errors: list[BaseException] = []

        def claimer(holder: str) -> None:
            try:
                while (rid := engine.run(write(lambda: _claim(group, holder)))) is not None:
                    taken[holder].append(rid)
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=claimer, args=(h,)) for h in taken]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert sorted(taken["a"] + taken["b"]) == sorted(ids)  # each row once, none twice

    # -- errors ------------------------------------------------------------------------------

    def test_a_unique_violation_is_a_conflict_and_writes_nothing(
        self, engine: Engine, group: str
    ) -> None:
        first, again = f"{group}-first", f"{group}-dup"
        with pytest.raises(Conflict):
            engine.run(write(lambda: _insert(group, [first, again, again])))
        assert engine.run(read(lambda: _rows(group))) == []

    def test_the_async_driver_says_conflict_too(self, engine: Engine, group: str) -> None:
        rid = f"{group}-x"
        engine.run(write(lambda: _insert(group, [rid])))

        async def again() -> None:
            await engine.arun(write(lambda: _insert(group, [rid])))

        with pytest.raises(Conflict):
            anyio.run(again)

    # -- retries -----------------------------------------------------------------------------

    def test_a_read_whose_connection_dropped_runs_again(
        self, engine: Engine, lost_connection: Request | None
    ) -> None:
        if lost_connection is None:
            pytest.skip("this engine holds no connection that can drop")
        attempts: list[int] = []

        def op() -> Op[int]:
            attempts.append(len(attempts) + 1)
            if len(attempts) == 1:
                yield lost_connection
            rows = yield Query("SELECT 41 + 1")
            return int(rows[0][0])

        assert engine.run(read(op)) == 42
        assert attempts == [1, 2]  # the whole operation again, on a fresh connection

    def test_a_write_whose_connection_dropped_is_not_replayed(
        self, engine: Engine, lost_connection: Request | None
    ) -> None:
        if lost_connection is None:
            pytest.skip("this engine holds no connection that can drop")
        attempts: list[int] = []

        def op() -> Op[None]:
            attempts.append(1)
            yield lost_connection

        with pytest.raises(MemstrataError):
            engine.run(write(op))
        assert attempts == [1]  # it may have committed: never run twice unasked
