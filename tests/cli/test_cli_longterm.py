"""The long-term commands of the ``memstrata`` command line: facts, export / import, jobs,
and doctor's long-term entry (typer's CliRunner, in process, on a SQLite file)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.testing import FakeLLM, override
from support import Models

ALICE = Scope("acme", "alice")
BOB = Scope("acme", "bob")


@pytest.fixture
def mem(tmp_path: Path, db: str) -> Iterator[Memory]:
    """A handle on the same database to set up and check state; it runs no jobs by itself."""
    memory = Memory.open(db, settings=Settings(home=tmp_path, worker="off"))
    with override(memory, facts_embedder=None):
        yield memory
    memory.close()


def _turn(mem: Memory, scope: Scope, text: str = "I like green tea.") -> str:
    cid = mem.conversations.create(scope).id
    mem.messages.append(scope, cid, role="user", content=text)
    mem.messages.append(scope, cid, role="assistant", content="Noted.")
    return cid


def _dead_extraction(mem: Memory, scope: Scope) -> str:
    """An extraction job whose only attempt failed: a dead letter."""
    kit = mem.longterm.kit
    llm = FakeLLM(["never used"])
    llm.fail_next(1, TimeoutError("the model timed out\nmore detail"))
    kit.debounce_s, kit.max_attempts = 0.0, 1
    with override(mem, facts_llm=llm):
        job = mem.longterm.observe(scope, _turn(mem, scope))
        assert mem.jobs.run_pending() == 1
    assert mem.jobs.get(job.id).status.value == "dead"
    return job.id


def _as_json(result: Any) -> Any:
    return json.loads(result.stdout)


def _facts(mem: Memory, scope: Scope) -> list[tuple[str, str, float, str | None]]:
    return sorted(
        (f.content, f.category, f.confidence, f.source_error)
        for f in mem.facts.list(scope, limit=500).items
    )


def _profile(mem: Memory, scope: Scope) -> dict[str, str]:
    return {p.name: p.summary for p in mem.longterm.profile(scope)}


# -- export / import -------------------------------------------------------------------------


def test_export_import_round_trip_between_two_users(run, mem, tmp_path, models: Models):
    reply = {
        "profile": {"workContext": "Backend engineer at Acme.", "topOfMind": "Moving to Lisbon."},
        "newFacts": [
            {"content": "User likes green tea", "category": "preference", "confidence": 0.9},
            {"content": "User knows Rust", "category": "knowledge", "confidence": 0.8},
        ],
    }
    models(mem, facts_llm=FakeLLM([json.dumps(reply)]))
    assert mem.longterm.flush(ALICE, _turn(mem, ALICE)).outcome == "applied"
    run(
        "facts",
        "add",
        "Never suggest tabs: the user's team uses spaces",
        "--category",
        "correction",
        "--confidence",
        "0.75",
        "--source-error",
        "suggested tabs",
        "--tenant",
        "acme",
        "--user",
        "alice",
    )
    printed = _as_json(run("export", "--format", "deerflow", "--tenant", "acme", "--user", "alice"))
    out = tmp_path / "alice.json"
    result = run(
        "export", "--format", "deerflow", "--tenant", "acme", "--user", "alice", "--out", str(out)
    )
    assert result.stdout == ""
    assert "3 facts" in result.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["user"] == printed["user"]
    assert document["facts"] == printed["facts"]
    assert len(document["facts"]) == 3

    counts = _as_json(
        run(
            "import",
            str(out),
            "--format",
            "deerflow",
            "--tenant",
            "acme",
            "--user",
            "bob",
            "--json",
        )
    )
    assert counts == {
        "profile_sections": 2,
        "facts_added": 3,
        "duplicates": 0,
        "evicted": 0,
        "warnings": [],
    }
    assert _facts(mem, BOB) == _facts(mem, ALICE)
    assert len(_facts(mem, BOB)) == 3
    assert _profile(mem, BOB) == _profile(mem, ALICE)
    assert _profile(mem, BOB)["topOfMind"] == "Moving to Lisbon."
    assert {f.origin.value for f in mem.facts.list(BOB).items} == {"imported"}

    # Importing the same document again adds nothing; the summary is for people.
    again = run("import", str(out), "--format", "deerflow", "--tenant", "acme", "--user", "bob")
    assert "facts added 0" in again.stdout
    assert "duplicates skipped 3" in again.stdout
    assert len(_facts(mem, BOB)) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "must be a JSON object"),
        (
            json.dumps(
                {
                    "user": {"workContext": {"summary": "Should not be written."}},
                    "facts": [
                        {"content": "User likes tea", "category": "preference", "confidence": 0.9},
                        {"content": "", "category": "preference", "confidence": 0.9},
                    ],
                }
            ),
            "facts[1].content",
        ),
        (json.dumps({"facts": [{"content": "  ", "confidence": 0.5}]}), "facts[0].content"),
        (json.dumps({"facts": {"content": "x"}}), "facts must be a list"),
        (json.dumps({"user": {"workContext": {"summary": 3}}}), "user.workContext.summary"),
    ],
)
def test_import_of_a_malformed_document_fails_and_writes_nothing(run, mem, tmp_path, text, message):
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8")
    result = run(
        "import", str(bad), "--format", "deerflow", "--tenant", "acme", "--user", "bob", code=1
    )
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert mem.facts.list(BOB, status="all").items == []
    assert set(_profile(mem, BOB).values()) == {""}


def test_import_and_export_refuse_other_formats_and_missing_files(run, tmp_path):
    doc = tmp_path / "m.json"
    doc.write_text("{}", encoding="utf-8")
    for args in (("import", str(doc), "--format", "mem0"), ("export", "--format", "json")):
        result = run(*args, code=1)
        assert "unknown format" in result.stderr
        assert "deerflow" in result.stderr
    result = run("import", str(tmp_path / "missing.json"), code=1)
    assert "missing.json" in result.stderr
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert "error: " in run("import", str(binary), code=1).stderr


# -- facts -----------------------------------------------------------------------------------


def test_facts_add_list_delete(run, mem):
    fid = run("facts", "add", "User drinks oat milk", "--category", "preference").stdout.strip()
    other = run("facts", "add", "User is vegetarian", "--confidence", "0.6").stdout.strip()
    assert mem.facts.get(Scope("local", "local"), fid).category == "preference"

    listed = _as_json(run("facts", "list", "--json"))
    assert [f["id"] for f in listed["items"]] == [other, fid]  # newest first
    assert listed["items"][0]["confidence"] == 0.6
    assert listed["items"][0]["category"] == "context"
    assert listed["next_cursor"] is None
    table = run("facts", "list").stdout
    assert fid in table
    assert "User drinks oat milk" in table
    page = _as_json(run("facts", "list", "--limit", "1", "--json"))
    assert [f["id"] for f in page["items"]] == [other]
    rest = _as_json(run("facts", "list", "--cursor", page["next_cursor"], "--json"))
    assert [f["id"] for f in rest["items"]] == [fid]
    # The two clocks: nothing was true in 2000, as known then or now; a bad time exits 1.
    listed_now = _as_json(run("facts", "list", "--json"))["items"]
    assert all(f["valid_from"] and f["recorded_at"] for f in listed_now)
    assert _as_json(run("facts", "list", "--as-of", "2000-01-01", "--json"))["items"] == []
    then = run("facts", "list", "--as-of", "2000-01-01", "--known-at", "now", "--json")
    assert _as_json(then)["items"] == []
    future = _as_json(run("facts", "list", "--as-of", "2100-01-01", "--known-at", "now", "--json"))
    assert [f["id"] for f in future["items"]] == [f["id"] for f in listed_now]
    assert "as_of" in run("facts", "list", "--as-of", "someday", code=1).stderr
    only = _as_json(run("facts", "list", "--category", "preference", "--json"))
    assert [f["id"] for f in only["items"]] == [fid]

    # Another user sees none of them.
    assert _as_json(run("facts", "list", "--user", "someone", "--json"))["items"] == []
    run("facts", "delete", fid, "--user", "someone", code=1)

    assert "deleted" in run("facts", "delete", fid).stdout
    assert [f["id"] for f in _as_json(run("facts", "list", "--json"))["items"]] == [other]
    assert "not found" in run("facts", "delete", fid, code=1).stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("facts", "add", "User likes tea", "--category", "hobby"), "category must be one of"),
        (("facts", "add", "User likes tea", "--confidence", "1.5"), "confidence"),
        (("facts", "add", "   "), "content"),
        (("facts", "list", "--status", "gone"), "status must be"),
        (("facts", "list", "--category", "hobby"), "category must be one of"),
        (("facts", "list", "--user", "bad user"), "scope user"),
        (("jobs", "list", "--status", "stuck"), "status must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(run, args, message):
    result = run(*args, code=1)
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_duplicate_active_fact_is_refused(run):
    first = run("facts", "add", "User likes tea").stdout.strip()
    result = run("facts", "add", "user   LIKES tea", code=1)
    assert first in result.stderr
    added = _as_json(run("facts", "add", "User likes tea", "--user", "other", "--json"))
    assert added["content"] == "User likes tea"
    assert added["origin"] == "manual"


# -- jobs ------------------------------------------------------------------------------------


def test_jobs_list_shows_a_queued_extraction_as_blocked_without_an_llm(run, mem):
    job = mem.longterm.observe(ALICE, _turn(mem, ALICE))
    listed = _as_json(run("jobs", "list", "--json"))
    [item] = listed["items"]
    assert item["id"] == job.id
    assert (item["kind"], item["status"], item["tenant"], item["user"]) == (
        "longterm.extract",
        "queued",
        "acme",
        "alice",
    )
    assert "needs an LLM" in item["blocked"]
    result = run("jobs", "list", "--status", "queued", "--tenant", "acme")
    assert job.id in result.stdout
    assert "needs an LLM" in result.stdout
    assert "MEMSTRATA_LLM_MODEL" in result.stderr  # the whole reason, once, under the table
    assert _as_json(run("jobs", "list", "--status", "dead", "--json"))["items"] == []
    assert _as_json(run("jobs", "list", "--tenant", "other", "--json"))["items"] == []
    assert _as_json(run("jobs", "list", "--user", "bob", "--json"))["items"] == []


def test_jobs_retry_sends_a_dead_extraction_back_to_the_queue(run, mem):
    jid = _dead_extraction(mem, ALICE)
    [dead] = _as_json(run("jobs", "list", "--status", "dead", "--json"))["items"]
    assert dead["id"] == jid
    assert dead["attempts"] == 1
    assert "the model timed out" in dead["last_error"]
    assert dead["blocked"] is None  # only a queued job waits for something
    table = run("jobs", "list", "--status", "dead").stdout
    assert jid in table
    assert "the model timed out" in table
    assert "more detail" not in table  # the first line of the error only

    result = run("jobs", "retry", jid)
    assert "queued again" in result.stdout
    assert "needs an LLM" in result.stderr  # it will wait: this setup has no model
    job = mem.jobs.get(jid)
    assert (job.status.value, job.attempts) == ("queued", 0)
    [queued] = _as_json(run("jobs", "list", "--status", "queued", "--json"))["items"]
    assert queued["id"] == jid
    assert "needs an LLM" in queued["blocked"]

    assert "only dead jobs" in run("jobs", "retry", jid, code=1).stderr
    assert "not found" in run("jobs", "retry", "no-such-job", code=1).stderr


# -- doctor ----------------------------------------------------------------------------------


def test_doctor_reports_disabled_extraction_as_a_warning(run, mem):
    report = _as_json(run("doctor", "--json"))
    longterm = report["longterm"]
    assert report["ok"] is True  # a warning does not fail the installation check
    assert longterm["ok"] is True
    assert longterm["extraction"] == "disabled"
    assert "needs an LLM" in longterm["reason"]
    assert longterm["capture"] is False
    assert longterm["jobs"] == {"queued": 0, "running": 0, "done": 0, "dead": 0}
    assert any("extraction disabled" in w for w in longterm["warnings"])

    _dead_extraction(mem, ALICE)
    mem.longterm.observe(BOB, _turn(mem, BOB))
    report = _as_json(run("doctor", "--json"))
    assert report["longterm"]["jobs"]["dead"] == 1
    assert report["longterm"]["jobs"]["queued"] == 1
    assert any("1 dead" in w for w in report["longterm"]["warnings"])
    table = run("doctor").stdout
    row = next(line for line in table.splitlines() if "long-term" in line)
    assert "warning" in row
    assert "extraction disabled" in row
    assert "1 dead: see memstrata jobs list --status dead" in " ".join(table.split())
