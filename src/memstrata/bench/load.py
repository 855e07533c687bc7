"""``memstrata bench load``: a bounded load run against a real server on loopback.

It starts ``memstrata serve``'s application under uvicorn on 127.0.0.1 (an ephemeral
port, a temporary SQLite store unless ``--db``), seeds ``conversations`` conversations
of ``messages`` messages for ``users`` users, then ``clients`` concurrent clients send a
fixed number of requests in all — history reads and context assemblies, alternately,
each client on its own user's conversations with its own key. It reports every error
(any status but 200) and latency percentiles per kind. Nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstrata.bench.report import envelope, machine_line, percentile, print_table
from memstrata.bench.serverproc import ServerProcess
from memstrata.errors import InvalidInput

__all__ = ["print_result", "run"]

CLIENTS = 64
REQUESTS = 4_000
USERS = 8
CONVERSATIONS = 4  # per user
MESSAGES = 200  # per conversation

# The load run measures history and context alone: no background work, no recall index.
_QUIET = {
    "MEMSTRATA_WORKER": "off",
    "MEMSTRATA_RECALL_INDEX": "false",
    "MEMSTRATA_LOG_LEVEL": "WARNING",
}


def _seed(
    url: str, home: Path, users: int, conversations: int, messages: int
) -> list[tuple[str, list[str]]]:
    """(api key, conversation ids) per user."""
    from memstrata import Memory, Scope
    from memstrata.config import Settings

    mem = Memory.open(url, settings=Settings(home=home, worker="off", recall_index=False))
    out: list[tuple[str, list[str]]] = []
    try:
        for u in range(users):
            scope = Scope("load", f"user{u}")
            _, key = mem.keys.create("load", user=scope.user, label="bench load")
            cids = []
            for c in range(conversations):
                conv = mem.conversations.create(scope, title=f"load {u}/{c}")
                for i in range(messages):
                    role = "user" if i % 2 == 0 else "assistant"
                    text = f"message {i} of conversation {c}: " + "words to count " * 12
                    mem.messages.append(scope, conv.id, role=role, content=text)
                cids.append(conv.id)
            out.append((key, cids))
    finally:
        mem.close()
    return out


async def _drive(
    base: str, owners: list[tuple[str, list[str]]], clients: int, requests: int
) -> tuple[dict[str, list[float]], list[str]]:
    import httpx

    times: dict[str, list[float]] = {"history": [], "context": []}
    errors: list[str] = []
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60.0) as http:

        async def client(n: int) -> None:
            key, cids = owners[n % len(owners)]
            headers = {"Authorization": f"Bearer {key}"}
            for i in counter:  # shared: the total is fixed, whoever is free takes the next
                cid = cids[i % len(cids)]
                kind = "history" if i % 2 == 0 else "context"
                t0 = time.perf_counter()
                try:
                    if kind == "history":
                        r = await http.get(
                            f"/v1/conversations/{cid}/history",
                            params={"max_tokens": 2000},
                            headers=headers,
                        )
                    else:
                        r = await http.post(
                            f"/v1/conversations/{cid}/context",
                            json={"budget": 4000},
                            headers=headers,
                        )
                except httpx.HTTPError as exc:
                    errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                    continue
                times[kind].append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    errors.append(f"{kind}: HTTP {r.status_code}: {r.text[:200]}")

        await asyncio.gather(*(client(n) for n in range(clients)))
    return times, errors


def run(
    *,
    db: str | None = None,
    clients: int = CLIENTS,
    requests: int = REQUESTS,
    users: int = USERS,
    conversations: int = CONVERSATIONS,
    messages: int = MESSAGES,
    processes: int = 1,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the load and return its JSON envelope (``headline.errors`` must be 0)."""
    limits = (("clients", clients), ("requests", requests), ("users", users))
    for name, value in (*limits, ("processes", processes)):
        if value < 1:
            raise InvalidInput(f"{name} must be >= 1", field=name)
    with tempfile.TemporaryDirectory(prefix="memstrata-load-") as tmp:
        home = Path(tmp)
        url = db or f"sqlite:///{(home / 'load.db').as_posix()}"
        progress(f"load: seeding {users} users x {conversations} conversations x {messages}")
        owners = _seed(url, home, users, conversations, messages)
        with ServerProcess(url, home, processes, _QUIET) as server:
            base = server.base
            progress(f"load: {requests} requests from {clients} clients on {base}")
            t0 = time.perf_counter()
            times, errors = asyncio.run(_drive(base, owners, clients, requests))
            wall = time.perf_counter() - t0
    rows = [
        {
            "kind": kind,
            "requests": len(values),
            "p50_ms": round(percentile(values, 50), 3) if values else None,
            "p95_ms": round(percentile(values, 95), 3) if values else None,
            "p99_ms": round(percentile(values, 99), 3) if values else None,
            "max_ms": round(max(values), 3) if values else None,
        }
        for kind, values in times.items()
    ]
    everything = [v for values in times.values() for v in values]
    headline = {
        "requests": requests,
        "errors": len(errors),
        "requests_per_s": round(requests / wall, 1),
        "p50_ms": round(percentile(everything, 50), 3) if everything else None,
        "p99_ms": round(percentile(everything, 99), 3) if everything else None,
    }
    params = {
        "clients": clients,
        "requests": requests,
        "users": users,
        "conversations_per_user": conversations,
        "messages_per_conversation": messages,
        "db": "sqlite (a temporary file)" if db is None else db.split(":", 1)[0],
        "server": "memstrata serve (uvicorn) on loopback, in processes of its own",
        "server_processes": processes,
        "mix": "history (max_tokens 2000) and context (budget 4000), alternately",
        "first_errors": errors[:10],
    }
    return envelope("load", params=params, headline=headline, rows=rows)


def print_result(result: dict[str, Any], console: Any = None) -> None:
    h, p = result["headline"], result["params"]
    notes = [
        machine_line(result["machine"]),
        f"{p['requests']} requests from {p['clients']} clients: {h['errors']} errors, "
        f"{h['requests_per_s']} requests/s, p50 {h['p50_ms']} ms, p99 {h['p99_ms']} ms",
    ]
    notes += [f"error: {e}" for e in p["first_errors"]]
    columns = (
        ("kind", "kind"),
        ("requests", "requests"),
        ("p50_ms", "p50 ms"),
        ("p95_ms", "p95 ms"),
        ("p99_ms", "p99 ms"),
        ("max_ms", "max ms"),
    )
    print_table("memstrata bench load", columns, result["rows"], notes=notes, console=console)
