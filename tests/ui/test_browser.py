"""The web UI in a real browser: ``memstrata serve`` over a seeded SQLite file, driven by
headless chromium through playwright.

The checks are what a person would look at: how many messages and branches the tree
draws, which branch is highlighted, the token numbers of the context bar against the
API's own report, a fact's superseded chain, the dead job and its retry. Every page must
load without script errors and without asking anything of another origin.

Screenshots go to ``$MEMSTRATA_SCREENSHOTS`` (or a temporary directory; its path is
printed), at desktop and phone width, in the light and the dark colour scheme. Waits are
bounded (they fail instead of hanging); nothing asserts on timing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Locator,
    Page,
    Response,
    expect,
    sync_playwright,
)

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.testing import FakeLLM, override
from support import memstrata_serve, server_env

pytestmark = pytest.mark.server

# Debian's chromium (playwright downloads no browser here); elsewhere, one on PATH.
CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists() and shutil.which("chromium"):
    CHROMIUM = Path(str(shutil.which("chromium")))
WAIT_SECONDS = 90  # upper bound for start-up on a loaded CI machine, not an expectation
UI_TIMEOUT_MS = 60_000

expect.set_options(timeout=UI_TIMEOUT_MS)


# -- seed data -------------------------------------------------------------------------------


@dataclass
class Seeded:
    """What the store holds, as the test set it up."""

    alice: str  # a user key of acme/alice
    admin: str  # an admin key of acme
    cid: str  # alice's conversation with three branches
    other_cid: str  # alice's second conversation (an extraction waiting for a model)
    ids: dict[str, str] = field(default_factory=dict)  # message name -> id
    dead_job: str = ""
    blocked_job: str = ""
    carol: str = ""  # a user key of acme/carol, whose one conversation is long
    long_cid: str = ""
    long_fork: str = ""  # the first message of the long conversation's second branch

    @property
    def active_path(self) -> list[str]:
        return [self.ids[n] for n in ("q", "a1", "q2", "a2")]


def _extraction(facts: list[dict[str, Any]], profile: dict[str, str] | None = None) -> str:
    """A model's extraction answer (see tests/longterm/test_longterm.py for the shape)."""
    return json.dumps({"profile": profile or {}, "newFacts": facts, "factsToRemove": []})


def seed(db: str, home: Path) -> Seeded:
    settings = Settings(home=home, worker="off", recall_embed="off")
    mem = Memory.open(db, settings=settings)
    try:
        alice = Scope("acme", "alice")
        c = mem.conversations.create(alice, title="Tea")
        ids: dict[str, str] = {}

        def say(name: str, role: str, content: str, **kw: Any) -> None:
            ids[name] = mem.messages.append(alice, c.id, role=role, content=content, **kw).id

        say("q", "user", "I like green tea. Any brewing tips?")
        say("a1", "assistant", "Brew it at 75 °C for two minutes.")
        say("q2", "user", "And for oolong?")
        # The answer to q2 is linked to the recorded context it answered (provenance).
        recorded = mem.context(alice, c.id, record=True)
        ids["context"] = recorded.context_id or ""
        say("a2", "assistant", "Around 90 °C, several short steeps.", context_id=ids["context"])
        # A regeneration of the last answer, and an edit of the second question.
        say("regen", "assistant", "Water just off the boil, 85-95 °C.", parent_id=ids["q2"])
        say("edit", "user", "And for <b>pu-erh</b>?", parent_id=ids["a1"])
        say("e1", "assistant", "Rinse it first, then boiling water.")
        mem.conversations.set_active_leaf(alice, c.id, ids["a2"])

        # Two extractions: the second supersedes the first fact.
        extractions = FakeLLM(
            [
                _extraction(
                    [
                        {
                            "content": "User likes green tea",
                            "category": "preference",
                            "confidence": 0.95,
                        }
                    ],
                    {"workContext": "Works as a nurse."},
                ),
                _extraction(
                    [
                        {
                            "content": "User prefers oolong over green tea",
                            "category": "preference",
                            "confidence": 0.9,
                            "supersedes": ["f1"],
                            "reason": "the user changed their mind",
                        }
                    ]
                ),
            ]
        )
        with override(mem, facts_llm=extractions, facts_embedder=None):
            assert mem.longterm.flush(alice, c.id, leaf_id=ids["a1"]).counts["added"] == 1
            assert mem.longterm.flush(alice, c.id, leaf_id=ids["a2"]).counts["superseded"] == 1

        # A dead letter (a kind the server does not run) and an extraction left queued,
        # which the server cannot run without a model (blocked).
        def fail(job: Any, m: Any) -> None:
            raise RuntimeError("export failed: disk quota exceeded")

        mem.jobs.register("demo.export", fail)
        dead = mem.jobs.enqueue(alice, "demo.export", payload={"n": 1}, max_attempts=1)
        mem.core.worker()._backoff = lambda attempts: 0
        mem.jobs.run_pending(kinds=["demo.export"])
        other = mem.conversations.create(alice, title="Weekend plans")
        mem.messages.append(alice, other.id, role="user", content="I like hiking on Sundays.")
        blocked = mem.longterm.observe(alice, other.id)

        # A workflow node's own memory, and another user whose data must stay apart.
        mem.nodes.add_turn(
            alice,
            "support-bot",
            c.id,
            "classifier",
            message_id=ids["q"],
            user_content="I like green tea. Any brewing tips?",
            assistant_content="intent: brewing-advice",
        )
        bob = Scope("acme", "bob")
        mem.conversations.create(bob, title="Bob's notes")
        long_cid, long_fork = seed_long(mem, Scope("acme", "carol"))
        # The extractions above are alice's usage; a budget used up from the start.
        mem.usage.set_budget("acme", "compaction", 0)

        return Seeded(
            alice=mem.keys.create("acme", user="alice")[1],
            admin=mem.keys.create("acme", admin=True)[1],
            cid=c.id,
            other_cid=other.id,
            ids=ids,
            dead_job=dead.id,
            blocked_job=blocked.id,
            carol=mem.keys.create("acme", user="carol")[1],
            long_cid=long_cid,
            long_fork=long_fork,
        )
    finally:
        mem.close()


LONG = 60  # messages of the long conversation's first branch


def seed_long(mem: Memory, scope: Scope) -> tuple[str, str]:
    """A 60-message conversation, its oldest part compacted into a summary, and a second
    branch forking off in the middle. Returns (conversation id, the fork's first message)."""
    c = mem.conversations.create(scope, title="Planning the trip")
    ids = []
    for i in range(LONG):
        role = "user" if i % 2 == 0 else "assistant"
        text = (
            f"Day {i // 2 + 1}: which town should we see next, and how long is the drive?"
            if role == "user"
            else f"Day {i // 2 + 1}: drive about {40 + i} km along the coast, then stay two nights."
        )
        ids.append(mem.messages.append(scope, c.id, role=role, content=text).id)
    fork = mem.messages.append(
        scope, c.id, role="user", content="Let's fly to the islands instead.", parent_id=ids[29]
    )
    mem.conversations.set_active_leaf(scope, c.id, ids[-1])
    assert mem.compact(scope, c.id).outcome == "compacted"
    return c.id, fork.id


# -- the server ------------------------------------------------------------------------------


@dataclass
class Served:
    base: str
    seeded: Seeded

    def api(self, method: str, path: str, *, key: str = "", **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {key or self.seeded.alice}", **kw.pop("headers", {})}
        with httpx.Client(base_url=self.base, trust_env=False, timeout=60) as c:
            r = c.request(method, path, headers=headers, **kw)
        assert r.status_code < 400, r.text
        return r.json() if r.content else r.headers


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "home"
    db = f"sqlite:///{(tmp / 'ui.db').as_posix()}"
    seeded = seed(db, home)
    # The server sees no model and no embedder settings from the machine running the tests.
    env = server_env(home=str(home), recall_embed="off")
    with memstrata_serve(db, env, tmp / "server.log", WAIT_SECONDS) as (_, base):
        yield Served(base, seeded)


# -- the browser -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(
            "needs chromium (apt-get install chromium): the web UI test drives it as its "
            "browser server"
        )
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("MEMSTRATA_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nweb UI screenshots: {path}")
    return path


@dataclass
class UI:
    """One browser page on the served UI, and what went wrong on it."""

    page: Page
    base: str
    shots: Path
    problems: list[str] = field(default_factory=list)

    def watch(self) -> None:
        origin = self.base

        def on_console(msg: ConsoleMessage) -> None:
            # Failed loads are judged by on_response, which knows which ones are expected.
            if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
                self.problems.append(f"console: {msg.text}")

        def on_response(r: Response) -> None:
            path = urlsplit(r.url).path
            # Telling a user key from an admin key asks /v1/users, which a user key may not.
            if r.status >= 400 and not (r.status == 403 and path == "/v1/users"):
                self.problems.append(f"{r.status} {r.request.method} {r.url}")

        self.page.on("console", on_console)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("response", on_response)
        self.page.on(
            "request",
            lambda r: (
                None if r.url.startswith(origin) else self.problems.append(f"off-site: {r.url}")
            ),
        )

    def go(self, route: str) -> None:
        self.page.goto(f"{self.base}/#{route}")

    def sign_in(self, key: str) -> None:
        self.page.goto(f"{self.base}/")
        self.page.get_by_test_id("key-input").fill(key)
        self.page.get_by_test_id("signin").click()
        self.page.get_by_test_id("signout").wait_for()

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=path, full_page=True)
        return path

    def attrs(self, testid: str, name: str) -> list[str]:
        """``name`` of every element of the page with this test id, in document order."""
        return attrs(self.page.get_by_test_id(testid), name)


DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}  # a common phone, in CSS pixels


@contextmanager
def open_ui(
    browser: Browser, served: Served, shots: Path, viewport: dict[str, int], scheme: str
) -> Iterator[UI]:
    """A fresh browser context (no session) at ``viewport``, with the system colour scheme
    ``scheme``; fails the test on any script error, refused call or off-site request."""
    context = browser.new_context(viewport=viewport, color_scheme=scheme)  # type: ignore[arg-type]
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    u = UI(page, served.base, shots)
    u.watch()
    try:
        yield u
    finally:
        context.close()
    assert u.problems == []


@pytest.fixture
def ui(browser: Browser, served: Served, shots: Path) -> Iterator[UI]:
    with open_ui(browser, served, shots, DESKTOP, "light") as u:
        yield u


def attrs(elements: Locator, name: str) -> list[str]:
    return [e.get_attribute(name) or "" for e in elements.all()]


def _query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).fragment.partition("?")[2])


# -- tests -----------------------------------------------------------------------------------


def test_the_tree_draws_every_branch_and_highlights_the_active_one(ui: UI, served: Served):
    s = served.seeded
    ui.sign_in(s.alice)
    titles = ui.page.get_by_test_id("conversation").locator("a")
    expect(titles).to_have_text(["Weekend plans", "Tea"])  # newest first
    titles.filter(has_text="Tea").click()
    tree = ui.page.get_by_test_id("tree")
    tree.wait_for()

    messages = served.api("GET", f"/v1/conversations/{s.cid}/messages")["items"]
    leaves = served.api("GET", f"/v1/conversations/{s.cid}/leaves")["items"]
    history = served.api("GET", f"/v1/conversations/{s.cid}/history", params={"max_tokens": 10**6})
    assert [m["id"] for m in history["messages"]] == s.active_path
    nodes = tree.get_by_test_id("tree-node")
    assert nodes.count() == len(messages) == 7
    assert sorted(attrs(tree.get_by_test_id("tree-node"), "data-id")) == sorted(
        m["id"] for m in messages
    )
    drawn_leaves = tree.locator("[data-testid=tree-node][data-leaf=true]")
    assert drawn_leaves.count() == len(leaves) == 3
    assert sorted(attrs(drawn_leaves, "data-id")) == sorted(m["id"] for m in leaves)
    assert tree.get_by_test_id("fork").count() == 2  # under the second question, and the edit
    summary = ui.page.get_by_test_id("conversation-summary").inner_text()
    assert summary.startswith("7 messages · 3 branches")

    # The highlighted nodes are exactly the active branch, and that is the one viewed.
    highlighted = tree.locator("[data-testid=tree-node].active")
    assert attrs(highlighted, "data-id") == s.active_path
    viewed = tree.locator("[data-testid=tree-node][data-viewed=true]")
    assert attrs(viewed, "data-id") == s.active_path
    # Only the viewed branch is open: the others wait folded behind their forks.
    visible = [n.get_attribute("data-id") for n in nodes.all() if n.is_visible()]
    assert visible == s.active_path
    ui.shot("tree-active")

    # Opening another branch and clicking its leaf views it; the active one stays highlighted.
    tree.locator(f"[data-testid=branch-fold][data-first='{s.ids['edit']}'] > summary").click()
    tree.locator(f"[data-id='{s.ids['e1']}']").click()
    edited = [s.ids[n] for n in ("q", "a1", "edit", "e1")]
    assert attrs(viewed, "data-id") == edited
    assert attrs(highlighted, "data-id") == s.active_path
    expect(ui.page.get_by_test_id("viewed-leaf")).to_have_attribute("data-id", s.ids["e1"])
    assert _query(ui.page)["leaf"] == [s.ids["e1"]]
    # Message text is shown as text, never as markup.
    edit_node = tree.locator(f"[data-id='{s.ids['edit']}']")
    assert "And for <b>pu-erh</b>?" in edit_node.inner_text()
    assert edit_node.locator("b").count() == 0
    ui.shot("tree-edit-branch")

    # A reload keeps the session (this tab's storage) and the viewed branch (the address).
    ui.page.reload()
    expect(viewed).to_have_count(len(edited))
    assert attrs(viewed, "data-id") == edited


def test_the_context_bar_shows_the_api_report(ui: UI, served: Served):
    s = served.seeded
    leaf = s.ids["regen"]
    budget = 90  # small enough that tiers lose items: the report has something dropped
    ui.sign_in(s.alice)
    ui.go(f"/c/{s.cid}?leaf={leaf}")
    ui.page.get_by_test_id("budget").fill(str(budget))
    ui.page.get_by_test_id("assemble").click()
    ui.page.get_by_test_id("tier-bar").wait_for()
    ui.page.get_by_test_id("context-result").scroll_into_view_if_needed()
    ui.shot("context")
    expected = served.api(
        "POST", f"/v1/conversations/{s.cid}/context", json={"budget": budget, "leaf_id": leaf}
    )
    report = expected["report"]
    assert report["dropped"], "the seed should make this budget drop something"
    assert ui.page.get_by_test_id("context-result").get_attribute("data-leaf") == leaf

    rows = {
        r.get_attribute("data-tier"): int(r.get_by_test_id("tier-granted").inner_text())
        for r in ui.page.get_by_test_id("tier-row").all()
    }
    assert rows == {name: t["granted"] for name, t in report["tiers"].items()}
    segments = [
        (seg.get_attribute("data-tier"), seg.inner_text().strip())
        for seg in ui.page.get_by_test_id("tier-segment").all()
    ]
    assert segments == [
        (name, f"{name} {t['granted']}") for name, t in report["tiers"].items() if t["granted"] > 0
    ]
    total = ui.page.get_by_test_id("context-total")
    assert total.inner_text() == f"{report['total']} of {budget} tokens"
    assert sum(t["granted"] for t in report["tiers"].values()) == report["total"]

    shown = ui.page.get_by_test_id("context-message").all()
    assert [m.locator(".turn-text").inner_text() for m in shown] == [
        m["content"] for m in expected["messages"]
    ]
    assert ui.attrs("dropped-item", "data-tier") == [d["tier"] for d in report["dropped"]]


def test_facts_show_provenance_and_the_superseded_chain(ui: UI, served: Served):
    s = served.seeded
    facts = served.api("GET", "/v1/facts", params={"status": "all"})["items"]
    [old] = [f for f in facts if f["status"] == "superseded"]
    [new] = [f for f in facts if f["status"] == "active"]
    assert old["superseded_by"] == new["id"]
    ui.sign_in(s.alice)
    ui.go("/facts")
    cards = ui.page.get_by_test_id("fact")
    cards.first.wait_for()
    assert ui.attrs("fact", "data-id") == [f["id"] for f in facts]
    old_card = ui.page.locator(f"[data-testid=fact][data-id='{old['id']}']")
    assert old_card.get_attribute("data-status") == "superseded"
    assert new["content"] in old_card.get_by_test_id("superseded-by").inner_text()

    # The history of the newer fact shows the chain, oldest first, the old one superseded.
    new_card = ui.page.locator(f"[data-testid=fact][data-id='{new['id']}']")
    new_card.locator("summary").click()
    chain = new_card.get_by_test_id("chain-fact")
    chain.nth(1).wait_for()
    assert [c.locator(".chain-text").inner_text() for c in chain.all()] == [
        old["content"],
        new["content"],
    ]
    assert attrs(new_card.get_by_test_id("chain-fact"), "data-id") == [old["id"], new["id"]]
    assert attrs(new_card.get_by_test_id("chain-fact"), "data-superseded") == ["true", "false"]
    events = served.api("GET", f"/v1/facts/{new['id']}/history")["items"]
    assert attrs(new_card.get_by_test_id("fact-event"), "data-event") == [
        e["event"] for e in events
    ]
    assert [e["event"] for e in events] == ["created", "created", "superseded"]
    ui.shot("facts")

    # Provenance: the source link opens that conversation's tree at the source message.
    [source] = old["sources"]
    link = old_card.get_by_test_id("fact-source")
    assert link.get_attribute("data-conversation") == source["conversation_id"] == s.cid
    link.click()
    focused = ui.page.locator("[data-testid=tree-node].focus")
    focused.wait_for()
    assert focused.get_attribute("data-id") == source["message_id"] == s.ids["q"]

    ui.go("/profile")
    work = ui.page.locator("[data-testid=profile-section][data-section=workContext]")
    assert work.inner_text().startswith("Works as a nurse.")
    ui.shot("profile")


def test_an_assistant_message_shows_its_prompt_provenance(ui: UI, served: Served):
    s = served.seeded
    ui.sign_in(s.alice)
    ui.go(f"/c/{s.cid}")
    ui.page.get_by_test_id("tree").wait_for()
    panels = ui.page.get_by_test_id("provenance")
    expect(panels).to_have_count(1)  # a1 has no record; a2 has one
    assert panels.get_attribute("data-context-id") == s.ids["context"]
    owner = ui.page.locator(f"[data-testid=tree-node][data-id='{s.ids['a2']}']")
    expect(owner.get_by_test_id("provenance")).to_have_count(1)
    panels.locator("summary").click()
    items = panels.get_by_test_id("provenance-item")
    api = served.api("GET", f"/v1/conversations/{s.cid}/messages/{s.ids['a2']}/provenance")
    assert attrs(items, "data-id") == [i["id"] for i in api["record"]["items"]]
    assert attrs(items, "data-id") == [s.ids[n] for n in ("q", "a1", "q2")]
    assert set(attrs(items, "data-state")) == {"present"}
    ui.shot("provenance")


def test_facts_show_their_clocks_and_list_as_of_a_day(ui: UI, served: Served):
    s = served.seeded
    facts = served.api("GET", "/v1/facts", params={"status": "all"})["items"]
    [old] = [f for f in facts if f["status"] == "superseded"]
    [new] = [f for f in facts if f["status"] == "active"]
    ui.sign_in(s.alice)
    ui.go("/facts")
    ui.page.get_by_test_id("fact").first.wait_for()
    old_card = ui.page.locator(f"[data-testid=fact][data-id='{old['id']}']")
    clocks = old_card.get_by_test_id("fact-clocks")
    assert clocks.get_attribute("data-valid-from") == old["valid_from"]
    assert clocks.get_attribute("data-valid-to") == old["valid_to"]
    assert "superseded" in clocks.inner_text()
    # As of a day before anything was said: nothing; as of today: what is true now.
    ui.page.get_by_test_id("fact-as-of").fill("2000-01-01")
    ui.page.get_by_test_id("facts").get_by_text("No facts").wait_for()
    assert ui.attrs("fact", "data-id") == []
    today = served.api("GET", f"/v1/facts/{new['id']}")["recorded_at"][:10]
    ui.go(f"/facts?as_of={today}")
    ui.page.get_by_test_id("fact").first.wait_for()
    assert ui.attrs("fact", "data-id") == [new["id"]]
    ui.shot("facts-as-of")


def test_jobs_list_dead_letters_and_retry_them(ui: UI, served: Served):
    s = served.seeded
    ui.sign_in(s.alice)
    ui.go("/jobs")
    ui.page.get_by_test_id("jobs").wait_for()
    dead = ui.page.locator(f"[data-testid=job][data-id='{s.dead_job}']")
    assert dead.get_attribute("data-status") == "dead"
    assert "export failed: disk quota exceeded" in dead.get_by_test_id("last-error").inner_text()
    waiting = ui.page.locator(f"[data-testid=job][data-id='{s.blocked_job}']")
    assert waiting.get_attribute("data-status") == "queued"
    blocked = served.api("GET", f"/v1/jobs/{s.blocked_job}")["blocked"]
    assert blocked
    assert waiting.get_by_test_id("blocked").inner_text() == f"blocked: {blocked}"
    assert waiting.get_by_test_id("retry").count() == 0  # only dead jobs can be retried
    ui.shot("jobs")

    ui.page.get_by_test_id("job-filter").select_option("dead")
    ui.page.wait_for_url(re.compile(r"status=dead"))
    rows = ui.page.get_by_test_id("job")
    expect(rows).to_have_count(1)  # the list of every job had two
    assert ui.attrs("job", "data-id") == [s.dead_job]
    ui.shot("jobs-dead")
    rows.first.get_by_test_id("retry").click()
    ui.page.get_by_text("No dead jobs.").wait_for()
    assert served.api("GET", f"/v1/jobs/{s.dead_job}")["status"] == "queued"


def test_node_memory_is_read_by_its_address(ui: UI, served: Served):
    s = served.seeded
    ui.sign_in(s.alice)
    ui.go("/nodes")
    ui.page.get_by_test_id("node-app").fill("support-bot")
    ui.page.get_by_test_id("node-cid").fill(s.cid)
    ui.page.get_by_test_id("node-id").fill("classifier")
    ui.page.get_by_test_id("node-read").click()
    shown = ui.page.get_by_test_id("node-message")
    shown.nth(1).wait_for()
    expected = served.api(
        "GET", f"/v1/apps/support-bot/conversations/{s.cid}/nodes/classifier/history"
    )["messages"]
    assert [m.locator(".turn-text").inner_text() for m in shown.all()] == [
        m["content"] for m in expected
    ]
    assert expected[-1]["content"] == "intent: brewing-advice"
    ui.shot("nodes")


def test_usage_shows_the_api_report_and_an_admin_the_budgets(ui: UI, served: Served):
    s = served.seeded
    ui.sign_in(s.alice)
    ui.go("/usage")
    ui.page.get_by_test_id("usage").wait_for()
    report = served.api("GET", "/v1/usage")
    assert [i["key"] for i in report["items"]] == ["extraction"]  # the seed's two extractions
    assert ui.attrs("usage-row", "data-key") == ["extraction"]
    total = ui.page.get_by_test_id("usage-total").locator("td")
    assert total.nth(1).inner_text() == str(report["total"]["calls"]) == "2"
    assert total.nth(3).inner_text() == str(report["total"]["input_tokens"])
    assert ui.page.get_by_test_id("budgets").count() == 0  # budgets are the admin's
    ui.shot("usage")

    ui.page.get_by_test_id("signout").click()
    ui.sign_in(s.admin)
    ui.page.locator("[data-testid=user][data-user=alice]").get_by_test_id("pick-user").click()
    ui.go("/usage?scope=tenant")
    ui.page.get_by_test_id("budgets").wait_for()
    assert ui.attrs("usage-row", "data-key") == ["alice"]
    assert ui.attrs("budget", "data-purpose") == ["compaction"]
    assert "used up" in ui.page.get_by_test_id("budget").inner_text()
    ui.shot("usage-tenant")


def test_an_admin_key_picks_the_user_to_inspect(ui: UI, served: Served):
    ui.sign_in(served.seeded.admin)
    users = ui.page.get_by_test_id("user")
    users.first.wait_for()
    assert sorted(ui.attrs("user", "data-user")) == ["alice", "bob", "carol"]
    ui.shot("users")
    ui.page.locator("[data-testid=user][data-user=bob]").get_by_test_id("pick-user").click()
    expect(ui.page.get_by_test_id("conversation").locator("a")).to_have_text(["Bob's notes"])
    assert "acting as bob" in ui.page.get_by_test_id("who").inner_text()
    ui.page.get_by_test_id("signout").click()
    ui.page.get_by_test_id("key-input").wait_for()
    assert ui.page.evaluate("sessionStorage.length") == 0


def test_a_deletion_receipt_is_read_by_its_id(ui: UI, served: Served):
    fact = served.api("POST", "/v1/facts", json={"content": "User keeps bees"})
    headers = {"Authorization": f"Bearer {served.seeded.alice}"}
    with httpx.Client(base_url=served.base, trust_env=False, timeout=60) as c:
        rid = c.delete(f"/v1/facts/{fact['id']}", headers=headers).headers["X-Memstrata-Receipt"]
    ui.sign_in(served.seeded.alice)
    ui.go("/receipts")
    ui.page.get_by_test_id("receipt-id").fill(rid)
    ui.page.get_by_test_id("receipt-read").click()
    ui.page.get_by_test_id("receipt").wait_for()
    assert ui.page.get_by_test_id("receipt-kind").inner_text() == "fact of acme/alice"
    assert "verified: nothing left" in ui.page.get_by_test_id("receipt-verified").inner_text()
    assert "facts" in ui.attrs("receipt-count", "data-where")
    assert "bees" not in ui.page.get_by_test_id("receipt-result").inner_text()
    assert _query(ui.page)["rid"] == [rid]
    ui.shot("receipt")


def test_only_the_page_and_its_files_are_the_ui(served: Served):
    with httpx.Client(base_url=served.base, trust_env=False, timeout=30) as c:
        page = c.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        script = c.get("/ui/app.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        for path in ("/ui/missing.js", "/ui/", "/nope", "/index.html"):
            r = c.get(path)
            assert r.status_code == 404, path
            assert r.headers["content-type"].startswith("application/problem+json"), path
        r = c.post("/")
        assert r.status_code == 405
        assert r.headers["content-type"].startswith("application/problem+json")
        doc = c.get("/openapi.json").json()
        assert not [p for p in doc["paths"] if p == "/" or p.startswith("/ui")]


def test_memory_health_plans_applies_and_undoes_a_consolidation(ui: UI, served: Served):
    """The health view counts a planted near duplicate; planning changes nothing,
    applying supersedes it, undoing restores it (the planted facts are erased after)."""
    planted = [
        served.api("POST", "/v1/facts", json={"content": text})["id"]
        for text in ("User hikes on Sundays", "user hikes on sundays!")
    ]
    try:
        ui.sign_in(served.seeded.alice)
        ui.go("/health")
        dup = ui.page.locator("[data-testid=health-check][data-check=duplicates]")
        expect(dup).to_have_attribute("data-count", "1")
        report = served.api("GET", "/v1/memory/health")
        assert [f["id"] for f in report["duplicates"]["examples"][0]["facts"]] == planted
        unused = ui.page.locator("[data-testid=health-check][data-check=unused]")
        # Prompt provenance counts uses: no recorded context holds these facts yet.
        assert unused.get_attribute("data-count") == str(report["unused"]["count"])
        assert report["unused"]["known"] is True
        ui.page.get_by_test_id("consolidation-plan").click()
        expect(ui.page.get_by_test_id("consolidation-change")).to_have_count(1)
        assert served.api("GET", f"/v1/facts/{planted[1]}")["status"] == "active"
        ui.shot("health")
        ui.page.get_by_test_id("consolidation-apply").click()
        ui.page.get_by_test_id("applied").wait_for()
        assert served.api("GET", f"/v1/facts/{planted[1]}")["status"] == "superseded"
        ui.page.get_by_test_id("consolidation-revert").click()
        ui.page.get_by_test_id("reverted").wait_for()
        assert served.api("GET", f"/v1/facts/{planted[1]}")["status"] == "active"
    finally:
        for fid in planted:
            with httpx.Client(base_url=served.base, trust_env=False, timeout=60) as c:
                c.delete(
                    f"/v1/facts/{fid}", headers={"Authorization": f"Bearer {served.seeded.alice}"}
                )


# -- search, actions, long conversations, phone width, dark mode (issue 30) -------------------


def _rank(hit: dict[str, Any]) -> tuple[str, float]:
    """What the search view ranks a hit by: relevance when the server sends it."""
    return ("relevance", hit["relevance"]) if "relevance" in hit else ("score", hit["score"])


def test_search_shows_each_hits_rank_and_opens_its_conversation_there(ui: UI, served: Served):
    s = served.seeded
    ui.sign_in(s.alice)
    ui.page.get_by_test_id("nav").filter(has_text="Search").click()
    ui.page.get_by_test_id("search-input").fill("oolong")
    ui.page.get_by_test_id("search-go").click()
    ui.page.wait_for_url(re.compile(r"#/search\?q=oolong"))
    hits = ui.page.get_by_test_id("hit")
    hits.first.wait_for()
    expected = served.api("POST", "/v1/recall/search", json={"query": "oolong", "k": 10})["hits"]
    assert expected, "the seed says oolong"
    assert attrs(hits, "data-message") == [h["message"]["id"] for h in expected]
    assert attrs(hits, "data-rank") == [_rank(h)[0] for h in expected]
    assert [float(v) for v in attrs(hits, "data-value")] == [_rank(h)[1] for h in expected]
    for hit, want in zip(hits.all(), expected, strict=True):
        name, value = _rank(want)
        shown = hit.get_by_test_id("hit-rank").inner_text()
        assert shown.startswith(f"{name} {value:.{2 if name == 'relevance' else 4}f}"), shown
    ui.shot("search")

    # A hit opens its conversation with that message on the branch drawn and marked.
    first = expected[0]["message"]
    hits.first.get_by_test_id("hit-link").click()
    focused = ui.page.locator("[data-testid=tree-node].focus")
    expect(focused).to_have_attribute("data-id", first["id"])
    expect(focused).to_be_visible()
    assert focused.get_attribute("data-viewed") == "true"
    assert _query(ui.page)["focus"] == [first["id"]]

    # Search keeps to each conversation's active branch: the edited-away question is
    # not found, until "all branches" is ticked; then its hit opens that branch.
    ui.go("/search?q=pu-erh")
    expect(ui.page.get_by_test_id("search-results")).to_contain_text("Nothing")
    ui.page.get_by_test_id("search-branches").check()
    ui.page.get_by_test_id("search-go").click()
    ui.page.wait_for_url(re.compile(r"branches=all"))
    hits.first.wait_for()
    found = served.api(
        "POST",
        "/v1/recall/search",
        json={"query": "pu-erh", "k": 10, "include_other_branches": True},
    )["hits"]
    assert found[0]["message"]["id"] == s.ids["edit"]
    hits.first.get_by_test_id("hit-link").click()
    expect(ui.page.locator("[data-testid=tree-node].focus")).to_be_visible()
    expect(ui.page.get_by_test_id("viewed-leaf")).to_have_attribute("data-id", s.ids["e1"])
    ui.shot("search-opened-on-another-branch")


def test_a_long_conversation_draws_each_message_once_beside_its_context(
    browser: Browser, served: Served, shots: Path
):
    s = served.seeded
    messages = served.api(
        "GET", f"/v1/conversations/{s.long_cid}/messages", key=s.carol, params={"limit": 500}
    )["items"]
    summary = served.api("GET", f"/v1/conversations/{s.long_cid}/summary", key=s.carol)["summary"]
    assert len(messages) == LONG + 1
    assert summary is not None
    with open_ui(browser, served, shots, DESKTOP, "light") as ui:
        ui.sign_in(s.carol)
        ui.go(f"/c/{s.long_cid}")
        tree = ui.page.get_by_test_id("tree")
        nodes = tree.get_by_test_id("tree-node")
        expect(nodes).to_have_count(len(messages))
        # Each message once, and its text once (the summary quotes some: it is apart).
        assert sorted(attrs(nodes, "data-id")) == sorted(m["id"] for m in messages)
        drawn = ui.page.get_by_test_id("messages-panel").inner_text()
        assert [m["id"] for m in messages if drawn.count(m["content"]) > 1] == []
        # The branch off message 30 is folded; the 60 of the active branch are drawn.
        fork = ui.page.locator(f"[data-testid=tree-node][data-id='{s.long_fork}']")
        expect(fork).to_be_hidden()
        assert sum(n.is_visible() for n in nodes.all()) == LONG

        # The context panel sits beside the messages, at the top, not under 60 messages.
        messages_box = ui.page.get_by_test_id("messages-panel").bounding_box()
        side_box = ui.page.get_by_test_id("context").bounding_box()
        assert messages_box
        assert side_box
        assert side_box["x"] >= messages_box["x"] + messages_box["width"]
        assert side_box["y"] < DESKTOP["height"]
        height = ui.page.evaluate("document.documentElement.scrollHeight")
        print(f"\n60-message conversation: page {height} px tall at {DESKTOP['height']} px")
        assert height <= 1.25 * DESKTOP["height"]

        # The compaction summary of the viewed branch, and the messages it stands in for.
        shown = ui.page.get_by_test_id("compaction-summary")
        expect(shown).to_have_attribute("data-id", summary["id"])
        assert shown.get_by_test_id("summary-text").inner_text() == summary["content"]
        covered = tree.locator("[data-testid=tree-node][data-covered=true]")
        expect(covered).to_have_count(summary["up_to_depth"] + 1)
        assert attrs(covered, "data-id")[-1] == summary["up_to_message_id"]
        ui.shot("long-conversation")

        # The tree folds to one line a message, and every branch opens on demand.
        scroller = ui.page.get_by_test_id("tree-scroll")
        full = scroller.evaluate("e => e.scrollHeight")
        ui.page.get_by_test_id("tree-compact").click()
        folded = scroller.evaluate("e => e.scrollHeight")
        print(f"tree: {full} px of messages, {folded} px one line each")
        assert folded < full
        ui.page.get_by_test_id("tree-expand").click()
        expect(fork).to_be_visible()
        ui.shot("long-conversation-outline")
        assert ui.page.get_by_test_id("tree-node").count() == len(messages)

    for viewport, scheme in ((PHONE, "light"), (DESKTOP, "dark"), (PHONE, "dark")):
        with open_ui(browser, served, shots, viewport, scheme) as ui:
            ui.sign_in(s.carol)
            ui.go(f"/c/{s.long_cid}")
            ui.page.get_by_test_id("compaction-summary").wait_for()
            assert ui.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            # Stacked or not, the context is reached without scrolling past 60 messages.
            side = ui.page.get_by_test_id("context").bounding_box()
            assert side is not None
            assert side["y"] < 2 * viewport["height"], side
            ui.shot(f"long-conversation-{viewport['width']}-{scheme}")


def test_a_branch_is_made_active_from_the_tree(ui: UI, served: Served):
    s = served.seeded
    url = f"/v1/conversations/{s.cid}"
    try:
        ui.sign_in(s.alice)
        ui.go(f"/c/{s.cid}?leaf={s.ids['regen']}")
        expect(ui.page.get_by_test_id("viewed-leaf")).to_have_attribute("data-id", s.ids["regen"])
        ui.page.get_by_test_id("make-active").click()
        regen = ui.page.locator(f"[data-testid=tree-node][data-id='{s.ids['regen']}']")
        expect(regen).to_have_attribute("data-active", "true")
        active = ui.page.locator("[data-testid=tree-node].active")
        regen_path = [s.ids[n] for n in ("q", "a1", "q2", "regen")]
        assert attrs(active, "data-id") == regen_path
        assert served.api("GET", url)["active_leaf_id"] == s.ids["regen"]
        expect(ui.page.get_by_test_id("make-active")).to_have_count(0)  # it is active now
        ui.shot("branch-made-active")
    finally:
        served.api("PATCH", url, json={"active_leaf_id": s.ids["a2"]})


def _receipt_shown(ui: UI, served: Served, kind: str, subject: str) -> dict[str, Any]:
    """The receipts page opened by a deletion: its id in the address, the receipt read."""
    ui.page.get_by_test_id("receipt").wait_for()
    [rid] = _query(ui.page)["rid"]
    receipt = served.api("GET", f"/v1/receipts/{rid}", key=served.seeded.admin)
    assert receipt["kind"] == kind
    assert subject in receipt["subject_ids"]
    assert ui.page.get_by_test_id("receipt-kind").inner_text().startswith(f"{kind} of acme/")
    assert "verified: nothing left" in ui.page.get_by_test_id("receipt-verified").inner_text()
    return receipt


def test_a_conversation_is_deleted_with_its_receipt(ui: UI, served: Served):
    made = served.api("POST", "/v1/conversations", json={"title": "Scratch"})
    served.api(
        "POST", f"/v1/conversations/{made['id']}/messages", json={"role": "user", "content": "hi"}
    )
    ui.sign_in(served.seeded.alice)
    ui.go(f"/c/{made['id']}")
    ui.page.get_by_test_id("delete-conversation").click()
    ui.shot("delete-conversation-confirm")
    ui.page.get_by_test_id("delete-conversation-confirm").click()
    receipt = _receipt_shown(ui, served, "conversation", made["id"])
    assert receipt["tables"]["messages"] == 1
    ui.shot("delete-conversation-receipt")
    ids = [c["id"] for c in served.api("GET", "/v1/conversations")["items"]]
    assert made["id"] not in ids


def test_a_fact_is_edited_its_history_reads_old_to_new_and_it_is_deleted(ui: UI, served: Served):
    fact = served.api("POST", "/v1/facts", json={"content": "User drinks black coffee"})
    ui.sign_in(served.seeded.alice)
    ui.go("/facts")
    card = ui.page.locator(f"[data-testid=fact][data-id='{fact['id']}']")
    card.get_by_test_id("fact-edit").click()
    card.get_by_test_id("edit-content").fill("User drinks decaf coffee")
    card.get_by_test_id("edit-save").click()
    expect(card.get_by_test_id("fact-content")).to_have_text("User drinks decaf coffee")
    assert served.api("GET", f"/v1/facts/{fact['id']}")["content"] == "User drinks decaf coffee"

    card.locator("summary").click()
    edited = card.locator("[data-testid=fact-event][data-event=edited]")
    edited.wait_for()
    assert edited.get_by_test_id("event-old").inner_text() == "User drinks black coffee"
    assert edited.get_by_test_id("event-new").inner_text() == "User drinks decaf coffee"
    created = card.locator("[data-testid=fact-event][data-event=created]")
    assert created.get_by_test_id("event-new").inner_text() == "User drinks black coffee"
    ui.shot("fact-edited-history")

    # The superseded seed fact reads "old → new" too: its text, then its successor's.
    facts = served.api("GET", "/v1/facts", params={"status": "all"})["items"]
    [old] = [f for f in facts if f["status"] == "superseded"]
    old_card = ui.page.locator(f"[data-testid=fact][data-id='{old['id']}']")
    old_card.locator("summary").click()
    superseded = old_card.locator("[data-testid=fact-event][data-event=superseded]")
    assert superseded.get_by_test_id("event-old").inner_text() == old["content"]
    successor = served.api("GET", f"/v1/facts/{old['superseded_by']}")["content"]
    assert superseded.get_by_test_id("event-new").inner_text() == successor

    card.get_by_test_id("fact-delete").click()
    card.get_by_test_id("fact-delete-confirm").click()
    _receipt_shown(ui, served, "fact", fact["id"])
    ui.shot("fact-deleted-receipt")
    remaining = served.api("GET", "/v1/facts", params={"status": "all"})["items"]
    assert fact["id"] not in [f["id"] for f in remaining]


def test_an_admin_exports_a_users_memory_and_deletes_the_user(
    ui: UI, served: Served, tmp_path: Path
):
    s = served.seeded
    dave = {"X-Memstrata-User": "dave"}
    served.api("POST", "/v1/facts", key=s.admin, headers=dave, json={"content": "Dave keeps bees"})
    want = served.api("GET", "/v1/memory/export", key=s.admin, headers=dave)
    ui.sign_in(s.admin)
    row = ui.page.locator("[data-testid=user][data-user=dave]")
    with ui.page.expect_download() as download:
        row.get_by_test_id("export-user").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == "memory-dave.json"
    document = json.loads(saved.read_text(encoding="utf-8"))
    assert document == want
    assert [f["content"] for f in document["facts"]] == ["Dave keeps bees"]

    row.get_by_test_id("delete-user").click()
    row.get_by_test_id("delete-user-confirm").click()
    _receipt_shown(ui, served, "user", "dave")
    ui.shot("user-deleted-receipt")
    users = served.api("GET", "/v1/users", key=s.admin)["items"]
    assert "dave" not in [u["id"] for u in users]


def test_empty_facts_and_profile_say_extraction_needs_a_model(
    ui: UI, served: Served, tmp_path: Path
):
    ui.sign_in(served.seeded.admin)
    ui.page.locator("[data-testid=user][data-user=bob]").get_by_test_id("pick-user").click()
    ui.go("/facts")
    help_box = ui.page.get_by_test_id("needs-model")
    expect(help_box).to_contain_text("MEMSTRATA_LLM_BASE_URL")
    assert "MEMSTRATA_LLM_MODEL" in help_box.inner_text()
    ui.shot("facts-empty")
    ui.go("/profile")
    expect(ui.page.get_by_test_id("needs-model")).to_contain_text("fake://")
    ui.shot("profile-empty")

    # A user with a profile gets no such note, and exports their own memory from it.
    ui.page.get_by_test_id("signout").click()
    ui.sign_in(served.seeded.alice)
    ui.go("/profile")
    ui.page.get_by_test_id("profile").wait_for()
    assert ui.page.get_by_test_id("needs-model").count() == 0
    with ui.page.expect_download() as download:
        ui.page.get_by_test_id("export-memory").click()
    saved = tmp_path / "alice.json"
    download.value.save_as(saved)
    assert json.loads(saved.read_text(encoding="utf-8")) == served.api("GET", "/v1/memory/export")


PAGES = ["/conversations", "/search?q=tea", "/facts", "/profile", "/jobs", "/receipts"]


def test_at_phone_width_nothing_runs_off_screen(browser: Browser, served: Served, shots: Path):
    s = served.seeded
    with open_ui(browser, served, shots, PHONE, "light") as ui:
        ui.sign_in(s.alice)
        for route in [*PAGES, f"/c/{s.cid}"]:
            ui.go(route)
            ui.page.locator("main[data-view]").wait_for()
            ui.page.get_by_test_id("loading").wait_for(state="detached")
            links = ui.page.get_by_test_id("nav")
            assert links.count() == 9
            for link in links.all():
                box = link.bounding_box()
                assert box is not None
                assert 0 <= box["x"] <= box["x"] + box["width"] <= PHONE["width"], (route, box)
            width = ui.page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (route, width)
            ui.shot(
                "phone-" + ("conversation" if route.startswith("/c/") else route[1:].split("?")[0])
            )


def _luminance(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", css)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_dark_mode_follows_the_system_setting(browser: Browser, served: Served, shots: Path):
    s = served.seeded
    seen = {}
    for scheme in ("light", "dark"):
        with open_ui(browser, served, shots, DESKTOP, scheme) as ui:
            ui.sign_in(s.alice)
            ui.go("/facts")
            ui.page.get_by_test_id("fact").first.wait_for()
            colours = ui.page.evaluate(
                """() => {
                    const of = (el) => getComputedStyle(el);
                    const card = document.querySelector("[data-testid=fact]");
                    return {
                        page: of(document.body).backgroundColor,
                        text: of(document.body).color,
                        card: of(card).backgroundColor,
                        input: of(document.querySelector("select")).backgroundColor,
                    };
                }"""
            )
            seen[scheme] = {k: _luminance(v) for k, v in colours.items()}
            ui.shot(f"facts-{scheme}")
            ui.go(f"/c/{s.cid}")
            ui.page.get_by_test_id("tree").wait_for()
            ui.shot(f"conversation-{scheme}")
            for route in ("/search?q=tea", "/jobs", "/health", "/usage"):
                ui.go(route)
                ui.page.locator("main[data-view]").wait_for()
                ui.page.get_by_test_id("loading").wait_for(state="detached")
                ui.shot(f"{route[1:].split('?')[0]}-{scheme}")
    light, dark = seen["light"], seen["dark"]
    assert light["page"] > 0.9
    assert light["text"] < 0.3
    assert dark["page"] < 0.15
    assert dark["text"] > 0.8
    assert dark["card"] < 0.2
    assert dark["input"] < 0.2
