"""The data commands of the ``memstrata`` command line: conversations, messages, history,
context, working memory, node memory and profile (typer's CliRunner, in process, on a
SQLite file)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli.render import transcript
from memstrata.config import Settings
from memstrata.types import Message, Role, Status, ToolCall, ToolCallFunction

LOCAL = Scope("local", "local")
ALICE = ["--tenant", "acme", "--user", "alice"]
BOB = ["--tenant", "acme", "--user", "bob"]
MISSING = "01a00000-0000-7000-8000-000000000000"


@pytest.fixture
def run(tmp_path: Path, db: str) -> Callable[..., Any]:
    """Run one command against the test database; asserts the exit code."""
    from memstrata.cli import app

    runner = CliRunner()
    env = {
        "MEMSTRATA_HOME": str(tmp_path / "home"),
        "MEMSTRATA_DB": None,
        "MEMSTRATA_BLOBS": None,
        "MEMSTRATA_LOCAL_TENANT": None,
        "MEMSTRATA_LOCAL_USER": None,
        "MEMSTRATA_LLM_MODEL": None,
        "MEMSTRATA_LLM_BASE_URL": None,
        "MEMSTRATA_EMBEDDER": "none",
        "MEMSTRATA_WORKER": "off",  # nothing here needs a job to run
        "COLUMNS": "250",  # one table row per line, whatever the terminal of the test run
    }

    def _run(*args: str, code: int = 0, input: str | None = None) -> Any:
        result = runner.invoke(app, [*args, "--db", db], env=env, input=input)
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    return _run


@pytest.fixture
def mem(tmp_path: Path, db: str) -> Iterator[Memory]:
    """The same database and blob store as the commands, to set up and check state."""
    memory = Memory.open(db, settings=Settings(home=tmp_path / "home", blobs=None, worker="off"))
    yield memory
    memory.close()


def _as_json(result: Any) -> Any:
    return json.loads(result.stdout)


def _fails(result: Any, *words: str) -> None:
    """A memstrata error: one ``error:`` line on stderr, nothing on stdout."""
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1
    for word in words:
        assert word in result.stderr


def _branched(run: Callable[..., Any], *scope: str) -> tuple[str, str, str, str]:
    """A conversation (cid) with a user message (a) and two answers: b, then c (active)."""
    cid = run("conversations", "create", "--title", "Trip", *scope).stdout.strip()
    a = run("messages", "add", cid, "--role", "user", "--content", "Plan a trip", *scope)
    b = run("messages", "add", cid, "--role", "assistant", "--content", "To Rome?", *scope)
    c = run(
        "messages",
        "add",
        cid,
        "--role",
        "assistant",
        "--content",
        "To Oslo?",
        "--parent",
        a.stdout.strip(),
        *scope,
    )
    return cid, a.stdout.strip(), b.stdout.strip(), c.stdout.strip()


# -- conversations ---------------------------------------------------------------------------


def test_conversations_create_prints_only_the_id_in_the_local_scope(run, mem):
    result = run("conversations", "create", "--title", "Hello [there]")
    cid = result.stdout.strip()
    assert result.stdout == cid + "\n"
    assert "local/local" in result.stderr
    conv = mem.conversations.get(LOCAL, cid)
    assert conv.title == "Hello [there]"
    listed = run("conversations", "list").stdout
    assert cid in listed
    assert "Hello [there]" in listed  # brackets are text, not rich markup


def test_conversations_create_json(run, mem):
    body = _as_json(run("conversations", "create", "--json", *ALICE))
    assert body["title"] is None
    assert body["message_count"] == 0
    assert mem.conversations.get(Scope("acme", "alice"), body["id"]).id == body["id"]


def test_conversations_list_json_pages_newest_first(run):
    ids = [run("conversations", "create", *ALICE).stdout.strip() for _ in range(3)]
    first = _as_json(run("conversations", "list", "--limit", "2", "--json", *ALICE))
    assert set(first) == {"items", "next_cursor"}
    assert [c["id"] for c in first["items"]] == ids[::-1][:2]
    rest = run(
        "conversations", "list", "--limit", "2", "--cursor", first["next_cursor"], "--json", *ALICE
    )
    assert [c["id"] for c in _as_json(rest)["items"]] == ids[:1]
    assert _as_json(rest)["next_cursor"] is None
    table = run("conversations", "list", "--limit", "2", *ALICE)
    assert f"--cursor {first['next_cursor']}" in table.stderr


def test_conversations_show_lists_the_leaves(run):
    cid, _, b, c = _branched(run)
    body = _as_json(run("conversations", "show", cid, "--json"))
    assert set(body) == {"conversation", "leaves"}
    assert body["conversation"]["id"] == cid
    assert body["conversation"]["active_leaf_id"] == c
    assert body["conversation"]["message_count"] == 3
    assert {m["id"] for m in body["leaves"]} == {b, c}
    table = run("conversations", "show", cid).stdout
    assert b in table
    assert c in table
    active = next(line for line in table.splitlines() if line.strip().startswith(c))
    assert "yes" in active
    assert "To Oslo?" in active


def test_conversations_delete(run, mem):
    cid, *_ = _branched(run)
    first, second = run("conversations", "delete", cid).stdout.strip().splitlines()
    assert first == f"deleted conversation {cid}"
    assert second.startswith("receipt ")
    assert second.endswith("rows removed; verified: nothing left)")
    rid = second.split()[1]
    shown = run("receipts", "show", rid).stdout
    assert f"conversation of {LOCAL.tenant}/{LOCAL.user}" in shown
    assert "by        cli" in shown
    assert "messages" in shown
    assert "verified  yes" in shown
    data = json.loads(run("receipts", "show", rid, "--json").stdout)
    assert (data["kind"], data["subject_ids"], data["verified"]) == ("conversation", [cid], True)
    assert data["tables"]["messages"] > 0
    _fails(run("receipts", "show", rid, "--tenant", "other", code=1), "not found")
    assert mem.conversations.list(LOCAL).items == []
    _fails(run("conversations", "delete", cid, code=1), cid, "not found")


# -- messages --------------------------------------------------------------------------------


def test_messages_add_prints_only_the_id_and_branches_with_parent(run, mem):
    cid, a, b, c = _branched(run)
    for message_id in (a, b, c):
        assert mem.messages.get(LOCAL, cid, message_id).id == message_id
    assert mem.messages.get(LOCAL, cid, b).parent_id == a
    assert mem.messages.get(LOCAL, cid, c).parent_id == a
    # Without --parent the message follows the active leaf.
    d = run("messages", "add", cid, "--role", "user", "--content", "Oslo").stdout.strip()
    assert mem.messages.get(LOCAL, cid, d).parent_id == c


def test_messages_add_json_and_stdin(run):
    cid = run("conversations", "create").stdout.strip()
    body = _as_json(
        run(
            "messages",
            "add",
            cid,
            "--role",
            "user",
            "--content",
            "-",
            "--json",
            input="line one\nline two\n",
        )
    )
    assert body["content"] == "line one\nline two\n"
    assert body["role"] == "user"
    assert body["conversation_id"] == cid


def test_messages_add_bad_role_is_an_error(run):
    cid = run("conversations", "create").stdout.strip()
    _fails(run("messages", "add", cid, "--role", "wizard", "--content", "x", code=1), "role")


def test_messages_list_covers_every_branch(run):
    cid, a, b, c = _branched(run)
    body = _as_json(run("messages", "list", cid, "--json"))
    assert set(body) == {"items", "next_cursor"}
    assert [m["id"] for m in body["items"]] == [a, b, c]
    assert body["next_cursor"] is None
    page = _as_json(run("messages", "list", cid, "--limit", "2", "--json"))
    rest = _as_json(run("messages", "list", cid, "--cursor", page["next_cursor"], "--json"))
    assert [m["id"] for m in page["items"] + rest["items"]] == [a, b, c]
    table = run("messages", "list", cid).stdout
    assert all(message_id in table for message_id in (a, b, c))
    assert "To Rome?" in table


# -- history and context ---------------------------------------------------------------------


def test_history_prints_a_transcript_of_the_active_branch(run):
    cid, _, b, _ = _branched(run)
    result = run("history", cid)
    assert result.stdout == "user: Plan a trip\nassistant: To Oslo?\n"
    assert "2 messages" in result.stderr
    other = run("history", cid, "--leaf", b)
    assert other.stdout == "user: Plan a trip\nassistant: To Rome?\n"


def test_history_json_is_the_api_shape(run, mem):
    cid, _, b, _ = _branched(run)
    d = run("messages", "add", cid, "--role", "user", "--content", "Oslo").stdout.strip()
    e = run("messages", "add", cid, "--role", "assistant", "--content", "Booked").stdout.strip()
    body = _as_json(run("history", cid, "--json", "--max-messages", "2"))
    assert body == mem.history(LOCAL, cid, max_messages=2).to_dict()
    assert [m["id"] for m in body["messages"]] == [d, e]
    assert body["truncated"] is True
    full = _as_json(run("history", cid, "--leaf", b, "--max-tokens", "5000", "--json"))
    assert [m["content"] for m in full["messages"]] == ["Plan a trip", "To Rome?"]
    assert set(full) == {"leaf_id", "messages", "tokens", "truncated", "over_budget"}


def test_context_table_and_json(run):
    cid, *_ = _branched(run)
    body = _as_json(run("context", cid, "--budget", "500", "--query", "trip", "--json"))
    assert set(body) == {"messages", "report"}
    report = body["report"]
    assert report["budget"] == 500
    assert report["total"] == sum(t["granted"] for t in report["tiers"].values())
    assert [m["content"] for m in body["messages"]][-2:] == ["Plan a trip", "To Oslo?"]
    result = run("context", cid, "--budget", "500")
    lines = result.stdout.splitlines()
    for tier, numbers in report["tiers"].items():
        row = next(line.split() for line in lines if line.strip().startswith(tier + " "))
        assert row[1:] == [str(numbers["asked"]), str(numbers["granted"]), str(numbers["items"])]
    assert "dropped 0" in result.stdout


def test_context_reports_what_was_dropped(run):
    cid = run("conversations", "create").stdout.strip()
    for i in range(30):
        role = "user" if i % 2 == 0 else "assistant"
        run("messages", "add", cid, "--role", role, "--content", f"message {i} " + "word " * 40)
    body = _as_json(run("context", cid, "--budget", "300", "--json"))
    dropped = len(body["report"]["dropped"])
    assert dropped > 0
    assert body["report"]["total"] <= 300
    assert f"dropped {dropped}" in run("context", cid, "--budget", "300").stdout


# -- working memory --------------------------------------------------------------------------


def test_working_memory_markdown_round_trip(run, mem):
    assert run("working", "put", "# Notes\n- pack light").stdout.strip() == (
        "working memory version 1 (markdown)"
    )
    result = run("working", "get")
    assert result.stdout == "# Notes\n- pack light\n"
    assert "version 1" in result.stderr
    run("working", "put", "-", input="from stdin")
    body = _as_json(run("working", "get", "--json"))
    assert body["content"] == "from stdin"
    assert body["version"] == 2
    assert body["scope"] == "user"
    assert mem.working.get(LOCAL).content == "from stdin"


def test_working_memory_json_per_conversation(run, mem):
    cid = run("conversations", "create").stdout.strip()
    run("working", "put", '{"city": "Oslo"}', "--format", "json", "--conversation", cid)
    # Without --format the stored JSON format is kept: the text is parsed, not stored raw.
    run("working", "put", '{"city": "Rome"}', "--conversation", cid)
    body = _as_json(run("working", "get", "--conversation", cid, "--json"))
    assert body["content"] == {"city": "Rome"}
    assert body["format"] == "json"
    assert body["conversation_id"] == cid
    assert json.loads(run("working", "get", "--conversation", cid).stdout) == {"city": "Rome"}
    _fails(run("working", "get", code=1), "working memory")  # the user's own: none yet
    _fails(run("working", "put", "{oops", "--conversation", cid, code=1), "not JSON", "line 1")
    assert mem.working.get(LOCAL, conversation_id=cid).version == 2


def test_working_memory_bad_format_is_a_usage_error(run):
    result = run("working", "put", "x", "--format", "yaml", code=2)
    assert "yaml" in result.stderr


# -- node memory -----------------------------------------------------------------------------


def test_nodes_history_and_delete(run, mem):
    cid = run("conversations", "create", *ALICE).stdout.strip()
    alice = Scope("acme", "alice")
    mem.nodes.add_turn(
        alice, "app1", cid, "llm1", message_id="m1", user_content="hi", assistant_content="hello"
    )
    mem.nodes.add_turn(
        alice,
        "app1",
        cid,
        "llm1",
        message_id="m2",
        parent_message_id="m1",
        user_content="weather?",
        assistant_content="sunny",
    )
    result = run("nodes", "history", "app1", cid, "llm1", *ALICE)
    assert result.stdout == "user: hi\nassistant: hello\nuser: weather?\nassistant: sunny\n"
    assert "2 turns" in result.stderr
    body = _as_json(run("nodes", "history", "app1", cid, "llm1", "--json", *ALICE))
    assert body == mem.nodes.history(alice, "app1", cid, "llm1").to_dict()
    small = _as_json(
        run("nodes", "history", "app1", cid, "llm1", "--max-tokens", "15", "--json", *ALICE)
    )
    assert small["truncated"] is True
    assert [m["content"] for m in small["messages"]] == ["weather?", "sunny"]
    # Another user cannot read or delete it.
    _fails(run("nodes", "history", "app1", cid, "llm1", *BOB, code=1), "not found")
    _fails(run("nodes", "delete", "app1", cid, "llm1", *BOB, code=1), "not found")
    deleted = run("nodes", "delete", "app1", cid, "llm1", *ALICE)
    assert deleted.stdout.strip() == f"deleted node memory app1/{cid}/llm1"
    assert mem.nodes.history(alice, "app1", cid, "llm1").messages == []


# -- profile ---------------------------------------------------------------------------------

SECTIONS = {
    "workContext",
    "personalContext",
    "topOfMind",
    "recentMonths",
    "earlierContext",
    "longTermBackground",
}


def test_profile_shows_six_sections(run, mem):
    body = _as_json(run("profile", "--json", *ALICE))
    assert set(body) == {"sections"}
    assert set(body["sections"]) == SECTIONS
    assert all(s == {"summary": "", "updated_at": None} for s in body["sections"].values())
    document = {"user": {"workContext": {"summary": "Backend engineer [Acme]."}}, "facts": []}
    mem.longterm.import_memory(Scope("acme", "alice"), document, format="deerflow")
    body = _as_json(run("profile", "--json", *ALICE))
    assert body["sections"]["workContext"]["summary"] == "Backend engineer [Acme]."
    assert body["sections"]["workContext"]["updated_at"] is not None
    table = run("profile", *ALICE).stdout
    assert all(name in table for name in SECTIONS)
    assert "Backend engineer [Acme]." in table
    # Bob's profile is his own.
    assert _as_json(run("profile", "--json", *BOB))["sections"]["workContext"]["summary"] == ""


# -- errors and isolation --------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["conversations", "show", MISSING],
        ["conversations", "delete", MISSING],
        ["messages", "list", MISSING],
        ["messages", "add", MISSING, "--role", "user", "--content", "hi"],
        ["history", MISSING],
        ["context", MISSING],
        ["working", "get", "--conversation", MISSING],
        ["working", "put", "x", "--conversation", MISSING],
        ["nodes", "history", "app1", MISSING, "llm1"],
    ],
)
def test_unknown_conversation_is_an_error(run, command):
    _fails(run(*command, code=1), f"conversation {MISSING} not found")


def test_another_user_cannot_see_or_touch_a_conversation(run, mem):
    cid, a, *_ = _branched(run, *ALICE)
    assert _as_json(run("conversations", "list", "--json", *BOB))["items"] == []
    assert cid not in run("conversations", "list", *BOB).stdout
    for command in (
        ["conversations", "show", cid],
        ["messages", "list", cid],
        ["history", cid],
        ["context", cid],
        ["messages", "add", cid, "--role", "user", "--content", "mine now", "--parent", a],
        ["conversations", "delete", cid],
    ):
        _fails(run(*command, *BOB, code=1), "not found")
    # The local user (no scope options) is someone else again.
    _fails(run("conversations", "show", cid, code=1), "not found")
    alice = Scope("acme", "alice")
    assert mem.conversations.get(alice, cid).message_count == 3
    assert [c.id for c in mem.conversations.list(alice).items] == [cid]


# -- transcript ------------------------------------------------------------------------------

_T = datetime(2025, 1, 1, tzinfo=UTC)


def _message(role: Role, content: str, **extra: Any) -> Message:
    fields: dict[str, Any] = {
        "id": "m",
        "conversation_id": "c",
        "parent_id": None,
        "role": role,
        "content": content,
        "files": (),
        "tool_calls": (),
        "tool_call_id": None,
        "status": Status.COMPLETE,
        "metadata": {},
        "occurred_at": _T,
        "created_at": _T,
        "seq": 1,
        "depth": 0,
        "token_count": 1,
        "branch_tokens": 1,
    }
    fields.update(extra)
    return Message(**fields)


def test_transcript_keeps_every_role():
    call = ToolCall(id="call_1", function=ToolCallFunction(name="weather", arguments="{}"))
    messages = [
        _message(Role.SYSTEM, "Be brief."),
        _message(Role.USER, "Weather in Oslo?\nAnd Rome?"),
        _message(Role.ASSISTANT, "", tool_calls=(call,)),
        _message(Role.TOOL, "sunny", tool_call_id="call_1"),
        _message(Role.ASSISTANT, "", status=Status.PENDING),
    ]
    assert transcript(messages) == (
        "system: Be brief.\n"
        "user: Weather in Oslo?\n"
        "  And Rome?\n"
        "assistant: [calls weather]\n"
        "tool (call_1): sunny\n"
        "assistant: (pending)"
    )


@given(st.lists(st.tuples(st.sampled_from([Role.USER, Role.ASSISTANT]), st.text(min_size=1))))
def test_transcript_starts_each_message_at_the_margin(items):
    text = transcript([_message(role, content) for role, content in items])
    starts = [line for line in text.split("\n") if not line.startswith("  ")] if items else []
    assert [line.split(":", 1)[0] for line in starts] == [role.value for role, _ in items]


# -- registration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first", ["memstrata.cli.longterm", "memstrata.cli.conversations", "memstrata.cli"]
)
def test_commands_register_whichever_module_is_imported_first(first):
    # A fresh interpreter: in this one the modules are loaded already.
    code = (
        f"import {first}\n"
        "import typer.main\n"
        "from memstrata.cli import app\n"
        "names = typer.main.get_command(app).commands\n"
        "print(' '.join(sorted(names)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    names = set(done.stdout.split())
    new = {"conversations", "messages", "history", "context", "working", "nodes", "profile"}
    assert new | {"facts", "jobs", "mcp"} <= names
