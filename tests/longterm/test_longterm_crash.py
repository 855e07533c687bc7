"""Crash safety of extraction: a worker process SIGKILLed while the model is answering
leaves nothing behind; after its lease runs out the job runs again and the update lands
exactly once."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from longterm_support import rule_extractor
from memstrata import Memory
from memstrata.jobs.ops import JobStatus
from memstrata.longterm.service import EXTRACT_JOB
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from support import Models, kill_once_started, open_memory, postgres_url_for

_CHILD = """
import sys, time
from collections.abc import Iterator
from pathlib import Path
from memstrata import Memory
from memstrata.config import Settings
from memstrata.testing import FakeLLM, override
url, home, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
mem = Memory.open(url, settings=Settings(home=home, worker="off", longterm_lease_seconds=2))
def hang(messages):
    with marker.open("a") as f:
        f.write("asked\\n")
    time.sleep(120)
    return "{}"
with override(mem, facts_llm=FakeLLM(hang), facts_embedder=None):
    mem.jobs.run_pending()
"""


@pytest.fixture(
    params=[
        pytest.param("sqlite-file", marks=pytest.mark.xdist_group("sqlite-file")),
        pytest.param("postgres", marks=pytest.mark.xdist_group("postgres")),
    ]
)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """Backends a second process can open."""
    yield from open_memory(request.param, tmp_path)


@pytest.mark.slow
def test_worker_killed_mid_extraction_finishes_once_after_restart(
    memory: Memory, tmp_path: Path, models: Models
) -> None:
    engine = memory.core.engine
    if engine.dialect == "postgres":
        schema = engine._kwargs["options"].split("=", 1)[1]  # type: ignore[attr-defined]
        url = postgres_url_for(schema)
    else:
        url = f"sqlite:///{tmp_path / 'memstrata.db'}"
    s = fresh_scope()
    c = memory.conversations.create(s)
    memory.messages.append(s, c.id, role="user", content="I like lighthouses")
    memory.messages.append(s, c.id, role="assistant", content="Lovely.")
    memory.longterm.kit.debounce_s = 1.0
    job = memory.longterm.observe(s, c.id)
    time.sleep(1.1)  # debounce over: the job is due
    marker = tmp_path / "marker.txt"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, url, str(tmp_path), str(marker)])
    kill_once_started(child, marker, "asking the model")
    assert memory.jobs.get(job.id).status is JobStatus.RUNNING  # its lease has not run out
    # Nothing of the killed attempt landed.
    assert memory.facts.list(s, status="all").items == []
    assert memory.longterm.updates(s) == []

    llm = FakeLLM(rule_extractor)
    models(memory, facts_llm=llm, facts_embedder=None)
    deadline = time.monotonic() + 30
    while memory.jobs.get(job.id).status is not JobStatus.DONE:  # the lease ends within ~2 s
        assert time.monotonic() < deadline, "the job was never reclaimed"
        memory.jobs.run_pending([EXTRACT_JOB])
        time.sleep(0.1)
    done = memory.jobs.get(job.id)
    assert done.attempts == 2
    assert [f.content for f in memory.facts.list(s, status="all").items] == [
        "User likes lighthouses"
    ]
    assert len(llm.calls) == 1
    assert [u["outcome"] for u in memory.longterm.updates(s)] == ["applied"]
    assert marker.read_text().count("asked") == 1
