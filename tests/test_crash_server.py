"""Crash safety of the REST server: ``memstrata serve`` SIGKILLed during a stream of
appends from several clients.

Every append the server acknowledged (201) survives with its exact content, in its
place in the tree, and the store is consistent (SQLite: ``PRAGMA integrity_check``;
both: no orphan rows, counters and the keyword index in step with the messages).
Clients then retry the request they had in flight and replay acknowledged ones with the
same ids: each answers success, nothing is stored twice, and the same id with other
content is refused (409). The recall embedding jobs the appends queued (the first server
runs no worker) were committed with them and finish once a server with a worker runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.ids import new_id
from memstrata.jobs.ops import Job, JobStatus
from memstrata.recall.service import EMBED_JOB
from support import (
    memstrata_serve,
    postgres_schema,
    postgres_url_for,
    scalar,
    server_env,
    store_file,
)

pytestmark = [pytest.mark.slow, pytest.mark.server]

THREADS = 4
KILL_AFTER = 200  # acknowledged appends, over all clients, before the kill
MAX_PER_CLIENT = 5_000  # a bound in case the kill never comes
WAIT_SECONDS = 60  # upper bound for start-up and jobs on a loaded machine, not an expectation
ALICE = Scope("acme", "alice")


@dataclass(frozen=True)
class Store:
    url: str
    home: Path
    sqlite_path: Path | None  # None: PostgreSQL


@pytest.fixture(
    params=[
        pytest.param("sqlite-file", marks=pytest.mark.xdist_group("sqlite-file")),
        pytest.param("postgres", marks=pytest.mark.xdist_group("postgres")),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store a server subprocess can open (PostgreSQL: a schema of its own)."""
    home = tmp_path / "home"
    if request.param == "sqlite-file":
        path = tmp_path / "memstrata.db"
        yield Store(f"sqlite:///{path.as_posix()}", home, path)
    else:
        with postgres_schema() as schema:
            yield Store(postgres_url_for(schema), home, None)


# -- the server ------------------------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    base: str


@contextmanager
def serve(store: Store, log: Path, *, worker: str) -> Iterator[Server]:
    """``memstrata serve`` on ``store``, ready; stopped (or found dead) afterwards."""
    env = server_env(
        home=str(store.home),
        worker=worker,
        # Appends queue a debounced recall.embed job per conversation (the offline
        # default embedder), in the append's own transaction.
        recall_embed="background",
        embedder="default",
        embed_threads="1",
        worker_poll_seconds="0.2",
        log_level="WARNING",
    )
    with memstrata_serve(store.url, env, log, WAIT_SECONDS) as (proc, base):
        yield Server(proc, base)


# -- the clients -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One append request: where it went and its exact body (with the client's id)."""

    cid: str
    body: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.body["id"])


@dataclass
class Client:
    """One client thread: appends linearly to its own conversation, and builds a branch
    of its own in the shared conversation with explicit parent ids."""

    n: int
    own_cid: str
    shared_cid: str
    shared_parent: str
    acked: list[Sent] = field(default_factory=list)
    unknown: Sent | None = None  # in flight when the server died: stored or not
    unexpected: list[str] = field(default_factory=list)

    def request(self, i: int) -> Sent:
        body: dict[str, Any] = {
            "id": new_id(),
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"client {self.n} message {i}: {word(self.n, i)} ünïcode ✓",
        }
        if i % 3 == 2:
            body["parent_id"] = self.shared_parent
            return Sent(self.shared_cid, body)
        return Sent(self.own_cid, body)

    def run(self, base: str, key: str, stop: threading.Event) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, trust_env=False, timeout=30) as http:
            for i in range(MAX_PER_CLIENT):
                if stop.is_set():
                    return
                sent = self.request(i)
                try:
                    r = http.post(f"/v1/conversations/{sent.cid}/messages", json=sent.body)
                except httpx.TransportError:
                    self.unknown = sent
                    return
                if r.status_code != 201:
                    self.unexpected.append(f"{r.status_code} {r.text}")
                    return
                self.acked.append(sent)  # only now is it acknowledged
                if sent.cid == self.shared_cid:
                    self.shared_parent = sent.id


def word(client: int, i: int) -> str:
    """A word no other message holds, so a keyword search singles one message out."""
    return "zq" + "".join("bcdfghjklm"[int(d)] for d in f"{client}{i:05d}")


# -- reading the store -----------------------------------------------------------------------


def listed(http: httpx.Client, cid: str) -> list[dict[str, Any]]:
    """Every message of a conversation, through the REST API, page by page."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 500}
    while True:
        r = http.get(f"/v1/conversations/{cid}/messages", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        items += page["items"]
        if not page["next_cursor"]:
            return items
        params["cursor"] = page["next_cursor"]


def check_consistent(mem: Memory) -> None:
    """What must hold of any committed state, whichever transactions made it."""
    for name, sql in CONSISTENCY.items():
        if name == "message not indexed" and mem.core.engine.dialect == "sqlite":
            # The rows of messages above the flush mark are written later, in a batch
            # (recall/keywords.py): the messages themselves say what waits.
            sql += " AND m.seq <= (SELECT seq FROM recall_marks)"
        assert scalar(mem, sql) == 0, name


CONSISTENCY = {
    "message of no conversation": "SELECT count(*) FROM messages WHERE conversation_id "
    "NOT IN (SELECT id FROM conversations)",
    "message whose parent is missing": "SELECT count(*) FROM messages m WHERE m.parent_id IS "
    "NOT NULL AND NOT EXISTS (SELECT 1 FROM messages p WHERE p.id = m.parent_id "
    "AND p.conversation_id = m.conversation_id)",
    # The counter and the active leaf move in the append's transaction.
    "message_count out of step": "SELECT count(*) FROM conversations c WHERE c.message_count "
    "<> (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)",
    "active leaf missing": "SELECT count(*) FROM conversations c WHERE c.active_leaf_id IS NOT "
    "NULL AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.active_leaf_id "
    "AND m.conversation_id = c.id)",
    # So does the keyword index row (on SQLite, of a message at or below the flush mark):
    # one per indexed message, none for a message not stored.
    "message not indexed": "SELECT count(*) FROM messages m WHERE m.role <> 'system' AND "
    "NOT EXISTS (SELECT 1 FROM recall_docs d WHERE d.seq = m.seq)",
    "index row of no message": "SELECT count(*) FROM recall_docs d WHERE NOT EXISTS "
    "(SELECT 1 FROM messages m WHERE m.seq = d.seq AND m.id = d.message_id)",
}


def check_sqlite_file(path: Path) -> None:
    with store_file(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # Raises if the full-text index disagrees with itself.
        conn.execute("INSERT INTO recall_terms(recall_terms) VALUES ('integrity-check')")
        # Recall rows are written in batches (recall/keywords.py): at or below the mark the
        # full-text index holds exactly the docs; above it, none.
        mark = conn.execute("SELECT seq FROM recall_marks").get
        docs = conn.execute("SELECT count(*) FROM recall_docs WHERE seq <= ?", (mark,)).get
        assert conn.execute("SELECT count(*) FROM recall_terms").get == docs
        orphans = (
            "SELECT count(*) FROM recall_terms WHERE rowid NOT IN (SELECT seq FROM recall_docs)"
        )
        assert conn.execute(orphans).get == 0
        above = "SELECT count(*) FROM recall_terms WHERE rowid > ?"
        assert conn.execute(above, (mark,)).get == 0


# -- the test --------------------------------------------------------------------------------


@dataclass
class Run:
    """What the test set up and what the clients were told."""

    key: str
    clients: list[Client]
    roots: dict[str, str]  # conversation id -> its seeded first message
    acked: list[Sent] = field(default_factory=list)
    fresh: list[Sent] = field(default_factory=list)  # appended after the restart

    @property
    def cids(self) -> list[str]:
        return list(self.roots)

    @property
    def unknown(self) -> list[Sent]:
        return [c.unknown for c in self.clients if c.unknown is not None]

    def own_chain(self, c: Client) -> list[str]:
        """The client's own conversation as it acknowledged it: root, then its appends."""
        return [self.roots[c.own_cid], *(s.id for s in c.acked if s.cid == c.own_cid)]


def test_server_killed_during_appends_keeps_every_acknowledged_message(
    store: Store, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    mem = Memory.open(
        store.url, settings=Settings(home=store.home, worker="off", recall_embed="off")
    )
    try:
        run = seed(mem)
        with serve(store, log, worker="off") as server:
            append_until_killed(run, server)
        if store.sqlite_path is not None:
            check_sqlite_file(store.sqlite_path)
        check_consistent(mem)
        jobs = queued_jobs(run, mem)
        with (
            serve(store, log, worker="thread") as server,
            httpx.Client(
                base_url=server.base,
                headers={"Authorization": f"Bearer {run.key}"},
                trust_env=False,
                timeout=30,
            ) as http,
        ):
            stored = check_acknowledged(run, http)
            # Before any new request: the restarted server runs what the killed one left
            # queued by itself (see test_restarted_server_runs_the_jobs_left_queued).
            jobs_resume(run, mem, http, jobs)
            retry(run, http, stored)
            check_each_once(run, http)
        check_consistent(mem)
    finally:
        mem.close()
    if store.sqlite_path is not None:
        check_sqlite_file(store.sqlite_path)


def seed(mem: Memory) -> Run:
    """A key, a conversation per client and a shared one, each with a first message."""
    roots: dict[str, str] = {}

    def conversation(title: str) -> str:
        cid = mem.conversations.create(ALICE, title=title).id
        roots[cid] = mem.messages.append(ALICE, cid, role="system", content=f"{title} starts").id
        return cid

    shared = conversation("shared")
    clients = [
        Client(n, conversation(f"client {n}"), shared, roots[shared]) for n in range(THREADS)
    ]
    return Run(mem.keys.create("acme", user="alice")[1], clients, roots)


def append_until_killed(run: Run, server: Server) -> None:
    """The clients append; once enough are acknowledged, and while they still send, SIGKILL."""
    stop = threading.Event()
    clients = run.clients
    threads = [
        threading.Thread(target=c.run, args=(server.base, run.key, stop), daemon=True)
        for c in clients
    ]
    killed = False
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + WAIT_SECONDS
        while sum(len(c.acked) for c in clients) < KILL_AFTER:
            assert time.monotonic() < deadline, "the clients never got far enough"
            assert all(t.is_alive() for t in threads), [c.unexpected for c in clients]
            time.sleep(0.01)
        os.kill(server.proc.pid, signal.SIGKILL)
        killed = True
        server.proc.wait(10)
    finally:
        if not killed:  # the test failed first: the clients stop instead
            stop.set()
        for t in threads:
            t.join(WAIT_SECONDS)
    assert not any(t.is_alive() for t in threads)
    assert [c.unexpected for c in clients] == [[]] * THREADS
    # Every client was still sending: each one's last request failed in transport.
    assert all(c.unknown is not None for c in clients)
    run.acked = [s for c in clients for s in c.acked]
    assert len(run.acked) >= KILL_AFTER
    assert len({s.id for s in run.acked}) == len(run.acked)


def _waiting(run: Run) -> str:
    """Messages of the test's conversations not embedded yet (with no recall row yet, too:
    on SQLite those rows are written in batches)."""
    marks = ", ".join("?" * len(run.cids))
    return (
        f"SELECT count(*) FROM messages m WHERE m.conversation_id IN ({marks}) "
        "AND m.role <> 'system' AND NOT EXISTS (SELECT 1 FROM recall_docs d "
        "WHERE d.seq = m.seq AND d.embedder IS NOT NULL)"
    )


def queued_jobs(run: Run, mem: Memory) -> list[Job]:
    """One debounced embedding job per conversation that got messages, committed with them;
    the killed server ran no worker, so each is still queued."""
    jobs = [j for j in mem.jobs.list(tenant="acme", limit=500).items if j.kind == EMBED_JOB]
    assert {s.cid for s in run.acked} <= {j.conversation_id for j in jobs} <= set(run.cids)
    assert len(jobs) == len({j.conversation_id for j in jobs})
    assert {j.status for j in jobs} == {JobStatus.QUEUED}
    assert scalar(mem, _waiting(run), *run.cids) > 0  # only those jobs embed them
    return jobs


def check_acknowledged(run: Run, http: httpx.Client) -> dict[str, dict[str, Any]]:
    """Every acknowledged message is there, exactly as sent, where it was sent."""
    stored = {m["id"]: m for cid in run.cids for m in listed(http, cid)}
    missing = [s.id for s in run.acked if s.id not in stored]
    assert missing == [], f"{len(missing)} acknowledged appends lost"
    for s in run.acked:
        m = stored[s.id]
        got = (m["conversation_id"], m["role"], m["content"])
        assert got == (s.cid, s.body["role"], s.body["content"])
        if "parent_id" in s.body:
            assert m["parent_id"] == s.body["parent_id"]
    # Each client's own conversation is one chain, in the order it was acknowledged.
    for c in run.clients:
        chain = run.own_chain(c)
        assert [stored[mid]["parent_id"] for mid in chain[1:]] == chain[:-1]
    # Nothing stored that no client sent (of the in-flight requests, some may have landed).
    sent = {*run.roots.values(), *(s.id for s in [*run.acked, *run.unknown])}
    assert set(stored) <= sent
    return stored


def jobs_resume(run: Run, mem: Memory, http: httpx.Client, jobs: list[Job]) -> None:
    """The jobs queued before the kill run on the restarted server, once each, and embed
    their messages."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        now = [mem.jobs.get(j.id) for j in jobs]
        assert JobStatus.DEAD not in {j.status for j in now}, now
        # Later appends may have queued more of them (a job already running is not merged into).
        later = [j for j in mem.jobs.list(tenant="acme", limit=500).items if j.kind == EMBED_JOB]
        if all(j.status is JobStatus.DONE for j in [*now, *later]):
            break
        assert time.monotonic() < deadline, f"the queued jobs never finished: {now + later}"
        time.sleep(0.2)
    assert [j.attempts for j in now] == [1] * len(jobs)
    assert scalar(mem, _waiting(run), *run.cids) == 0
    # Recall finds a message appended before the kill by a word only it holds (on any
    # branch: each client built one of its own in the shared conversation).
    target = run.acked[len(run.acked) // 2]
    r = http.post(
        "/v1/recall/search",
        json={"query": target.body["content"].split()[4], "include_other_branches": True},
    )
    assert r.status_code == 200, r.text
    assert [h["message"]["id"] for h in r.json()["hits"]][:1] == [target.id]


def retry(run: Run, http: httpx.Client, stored: dict[str, dict[str, Any]]) -> None:
    """Each client's in-flight request, twice at once, and replays of acknowledged appends
    all succeed; only a message not stored yet is created. Other content is refused."""
    unknown = run.unknown
    replays = [*run.acked[::7], *(c.acked[-1] for c in run.clients if c.acked)]

    def post(s: Sent) -> httpx.Response:
        return http.post(f"/v1/conversations/{s.cid}/messages", json=s.body)

    with ThreadPoolExecutor(THREADS) as pool:
        retried = list(pool.map(post, [*unknown, *unknown]))
        replayed = list(pool.map(post, replays))
    for i, s in enumerate(unknown):
        answers = [retried[i], retried[i + len(unknown)]]
        codes = sorted(a.status_code for a in answers)
        assert codes in ([200, 200], [200, 201]), [a.text for a in answers]
        assert (codes == [200, 200]) == (s.id in stored)  # created only if it was not there
        for a in answers:
            assert (a.json()["id"], a.json()["content"]) == (s.id, s.body["content"])
    for s, a in zip(replays, replayed, strict=True):
        assert a.status_code == 200, a.text
        assert (a.json()["id"], a.json()["content"]) == (s.id, s.body["content"])
    for s in [run.acked[0], run.acked[-1], *unknown]:
        other = {**s.body, "content": s.body["content"] + " (edited)"}
        r = http.post(f"/v1/conversations/{s.cid}/messages", json=other)
        assert r.status_code == 409, r.text
    # New work is taken as before (a new root of the shared conversation).
    shared = run.clients[0].shared_cid
    body = {"id": new_id(), "role": "user", "content": "after the restart", "parent_id": None}
    fresh = Sent(shared, body)
    r = post(fresh)
    assert r.status_code == 201, r.text
    run.fresh.append(fresh)


def check_each_once(run: Run, http: httpx.Client) -> None:
    """Each id once, nothing else, contents as first sent."""
    everything = [m for cid in run.cids for m in listed(http, cid)]
    ids = [m["id"] for m in everything]
    assert len(ids) == len(set(ids)), "a message was stored twice"
    sent = [*run.acked, *run.unknown, *run.fresh]
    assert set(ids) == {*run.roots.values(), *(s.id for s in sent)}
    by_id = {m["id"]: m for m in everything}
    for s in sent:
        assert by_id[s.id]["content"] == s.body["content"]
    # A retried linear append follows its client's chain.
    for c in run.clients:
        if c.unknown is not None and c.unknown.cid == c.own_cid:
            assert by_id[c.unknown.id]["parent_id"] == run.own_chain(c)[-1]


def test_restarted_server_runs_the_jobs_left_queued(store: Store, tmp_path: Path) -> None:
    """What a killed server leaves behind, a committed queued job, runs once a server with a
    worker starts again, with no new work to wake it."""
    mem = Memory.open(store.url, settings=Settings(home=store.home, worker="off"))
    try:
        cid = mem.conversations.create(ALICE).id
        mem.messages.append(ALICE, cid, role="user", content="queued before the restart")
        job = mem.jobs.enqueue(ALICE, EMBED_JOB, key=f"{EMBED_JOB}:{cid}", conversation_id=cid)
        with serve(store, tmp_path / "server.log", worker="thread"):
            deadline = time.monotonic() + 15  # the worker polls every 0.2 s
            while (now := mem.jobs.get(job.id)).status is not JobStatus.DONE:
                assert now.status is not JobStatus.DEAD, now.last_error
                assert time.monotonic() < deadline, f"the queued job never ran: {now}"
                time.sleep(0.2)
    finally:
        mem.close()
