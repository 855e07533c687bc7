"""``mem.admin`` and the other public pieces the surfaces use instead of ``mem.core``, and
the job context a core gets from its facade."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from memstrata import AsyncMemory, Memory, Scope
from memstrata.api.core import Core
from memstrata.backends.registry import open_engine
from memstrata.config import Settings
from memstrata.errors import ConfigurationError
from memstrata.recall.service import EMBED_JOB
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.schema import MIGRATIONS
from memstrata.tokens import get_tokenizer


def _settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, worker="off", embedder="none")


def _count(tenant: str) -> Op[int]:
    rows = yield Query("SELECT count(*) FROM tenants WHERE id = ?", (tenant,))
    return int(rows[0][0])


def _add(tenant: str) -> Op[int]:
    n = yield Exec("INSERT INTO tenants (id, created_at) VALUES (?, 0)", (tenant,))
    return int(n)


def test_admin_answers_what_doctor_and_readiness_ask(tmp_path: Path) -> None:
    with Memory.open(f"sqlite:///{tmp_path}/m.db", settings=_settings(tmp_path)) as mem:
        admin = mem.admin
        assert admin.dialect == "sqlite"
        assert admin.schema_version() == max(m.version for m in MIGRATIONS["sqlite"])
        assert admin.migrate() == []  # opening applied them all
        assert admin.check() == {"sqlite": "ok"}
        assert admin.check(timeout_s=30.0) == {"sqlite": "ok"}
        assert admin.settings.worker == "off"
        assert admin.runtime.tokenizer.count_text("hello") > 0
        assert admin.write(_add, "t-admin") == 1
        assert admin.read(_count, "t-admin") == 1
        assert (mem.recall.embedder is None) == (mem.recall.keyword_only is not None)
        assert EMBED_JOB in mem.jobs.kinds()
        assert mem.usage.snapshot() == {"llm": {}, "embed": {}}


def test_the_async_admin_is_the_same(tmp_path: Path) -> None:
    async def main() -> None:
        mem = AsyncMemory.open(f"sqlite:///{tmp_path}/a.db", settings=_settings(tmp_path))
        try:
            assert await mem.admin.migrate() == []
            assert await mem.admin.schema_version() == max(m.version for m in MIGRATIONS["sqlite"])
            assert await mem.admin.check(5.0) == {"sqlite": "ok"}
            assert await mem.admin.read(_count, "nobody") == 0
        finally:
            await mem.close()

    anyio.run(main)


def test_job_handlers_get_the_sync_facade_whichever_facade_opened_the_core(
    tmp_path: Path,
) -> None:
    s = _settings(tmp_path)
    core = Core(open_engine(f"sqlite:///{tmp_path}/j.db"), Runtime(get_tokenizer()), s)
    try:
        with pytest.raises(ConfigurationError, match="no facade"):
            core.worker()  # a bare core runs no jobs
        amem = AsyncMemory(core)
        seen: list[object] = []
        amem.jobs.register("test.probe", lambda job, memory: seen.append(memory))
        Memory(core).jobs.enqueue(_scope(), "test.probe")
        assert core.run_pending(["test.probe"]) == 1
        assert len(seen) == 1
        assert isinstance(seen[0], Memory)
    finally:
        core.close()


def _scope() -> Scope:
    return Scope("t-jobs", "u")
