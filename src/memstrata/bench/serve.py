"""``memstrata bench serve``: what a request costs the server, against the same call in process.

It seeds a temporary store (several users, conversations of a few hundred messages, their
embeddings already made), starts ``memstrata serve`` on loopback and drives it with ``wrk``,
a load generator written in C, so the client costs the server's interpreter nothing. For
each operation (history, context, append) it reports requests/s, latency p50/p99, the
server's CPU per request (read from ``/proc`` for the server and its worker processes), and
the CPU the same call costs made through the Python API in this process, with their ratio.

The two are measured in turns (:data:`ROUNDS` rounds of calls in process, then load on the
server), so a spell of a slower machine weighs on both sides alike. Calls in process run
back to back, with warm caches; a server's CPU idles between requests (it waits on the
network), and on the machines measured the same work then costs more. So each row also
reports the calls in process with a short pause between them (``in_process_paused_cpu_ms``)
and the server's CPU against that (``ratio_paused``): how much of the ratio the request
path adds, and how much is the work running cold.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstrata.bench.report import envelope, machine_line, print_table
from memstrata.bench.serverproc import ServerProcess, cpu_seconds
from memstrata.errors import InvalidInput, MissingDependency

__all__ = ["OPERATIONS", "print_result", "run"]

USERS = 4
CONVERSATIONS = 2  # per user
MESSAGES = 300  # per conversation
SECONDS = 10.0  # of load per operation
CONNECTIONS = 32
THREADS = 2
IN_PROCESS_CALLS = 300  # in all, over the rounds
ROUNDS = 3
PAUSE_S = 0.0002  # between the paused calls in process: a server's idle moment
IN_PROCESS_MIN_S = 0.3  # of CPU per round, each way
HISTORY_TOKENS = 2000
CONTEXT_BUDGET = 4000
OPERATIONS = ("history", "context", "append")

# The server as `memstrata serve` runs by default, but with no background worker, so the CPU
# it spends while an operation is driven is that operation's.
_SERVER_ENV = {"MEMSTRATA_WORKER": "off"}

_WORDS = [
    "garden",
    "hiking",
    "recipe",
    "budget",
    "travel",
    "music",
    "deadline",
    "meeting",
    "library",
    "window",
    "coffee",
    "harbour",
    "physics",
    "novel",
    "bicycle",
    "winter",
    "market",
    "camera",
    "ticket",
    "museum",
]

_LUA = """
local entries = %(entries)s
local method = %(method)s
local i = 0
init = function(args) i = math.random(#entries) end
request = function()
  i = i %% #entries + 1
  local e = entries[i]
  return wrk.format(method, e[1], {["Authorization"] = "Bearer " .. e[2],
    ["Content-Type"] = "application/json"}, e[3])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "MEMSTRATA_WRK {\\"requests\\":%%d,\\"duration_us\\":%%d,\\"status_errors\\":%%d," ..
    "\\"socket_errors\\":%%d,\\"p50_us\\":%%d,\\"p99_us\\":%%d,\\"max_us\\":%%d}\\n",
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


@dataclass(frozen=True, slots=True)
class Owner:
    """One seeded user: its scope's user name, its API key and its conversation ids."""

    user: str
    key: str
    conversations: tuple[str, ...]


def _text(i: int, c: int) -> str:
    words = " ".join(_WORDS[(i * 7 + k * 3 + c) % len(_WORDS)] for k in range(40))
    return f"message {i} of conversation {c}: {words}"


def _seed(mem: Any, users: int, conversations: int, messages: int) -> list[Owner]:
    from memstrata import Scope

    owners = []
    for u in range(users):
        scope = Scope("serve", f"user{u}")
        _, key = mem.keys.create("serve", user=scope.user, label="bench serve")
        cids = []
        for c in range(conversations):
            conv = mem.conversations.create(scope, title=f"serve {u}/{c}")
            for i in range(messages):
                role = "user" if i % 2 == 0 else "assistant"
                mem.messages.append(scope, conv.id, role=role, content=_text(i, c))
            cids.append(conv.id)
        # Embeddings made before anything is measured (the steady state of a live server).
        mem.recall.flush(scope)
        owners.append(Owner(scope.user, key, tuple(cids)))
    return owners


def _requests(op: str, owners: list[Owner]) -> tuple[str, list[tuple[str, str, str]]]:
    """(method, [(path, key, body)]) of one operation, round-robin over every conversation."""
    out = []
    for o in owners:
        for cid in o.conversations:
            base = f"/v1/conversations/{cid}"
            if op == "history":
                out.append((f"{base}/history?max_tokens={HISTORY_TOKENS}", o.key, ""))
            elif op == "context":
                out.append((f"{base}/context", o.key, json.dumps({"budget": CONTEXT_BUDGET})))
            else:
                body = {"role": "user", "content": _text(7, 1)}
                out.append((f"{base}/messages", o.key, json.dumps(body)))
    return ("GET" if op == "history" else "POST"), out


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string for this alphabet


def _script(method: str, entries: list[tuple[str, str, str]]) -> str:
    rows = ",\n".join("{" + ", ".join(_lua_string(x) for x in e) + "}" for e in entries)
    return _LUA % {"entries": "{\n" + rows + "\n}", "method": _lua_string(method)}


def _wrk() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise MissingDependency(
            "bench serve drives the server with wrk, a C load generator: "
            "apt-get install wrk (or make bench-serve, which installs it)"
        )
    return path


def _drive(wrk: str, base: str, script: Path, seconds: float, connections: int) -> dict[str, Any]:
    cmd = [
        wrk,
        f"-t{THREADS}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "30s",
        "-s",
        str(script),
        base + "/",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("MEMSTRATA_WRK "):
            result: dict[str, Any] = json.loads(line.removeprefix("MEMSTRATA_WRK "))
            return result
    raise RuntimeError(f"wrk gave no result: {done.stdout[-1000:]} {done.stderr[-1000:]}")


def _load(
    wrk: str, server: ServerProcess, script: Path, seconds: float, connections: int
) -> tuple[dict[str, Any], float]:
    """wrk's result for ``script``, and the server's CPU seconds meanwhile."""
    before = cpu_seconds(server.pid)
    w = _drive(wrk, server.base, script, seconds, connections)
    after = cpu_seconds(server.pid)
    return w, sum(after.get(p, 0.0) - before.get(p, 0.0) for p in after)


def _per_request_ms(w: dict[str, Any], spent_s: float) -> float:
    requests: int = w["requests"]
    return spent_s * 1000 / max(1, requests)


def _combined(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """wrk's results of several rounds as one: counts summed, the median p50, the top p99."""
    p50s = sorted(w["p50_us"] for w in rounds)
    out = {
        k: sum(w[k] for w in rounds)
        for k in ("requests", "duration_us", "status_errors", "socket_errors")
    }
    out["p50_us"] = p50s[len(p50s) // 2]
    out["p99_us"] = max(w["p99_us"] for w in rounds)
    return out


def _warm(base: str, method: str, entries: list[tuple[str, str, str]]) -> None:
    """One request per entry before measuring: the server loads its models and fills its
    caches on first use, as a server that has been up for a while already has."""
    import httpx

    with httpx.Client(base_url=base, timeout=120) as http:
        for path, key, body in entries:
            r = http.request(
                method,
                path,
                content=body or None,
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            if r.status_code >= 400:
                raise RuntimeError(f"{method} {path}: HTTP {r.status_code}: {r.text[:300]}")


def _in_process_cpu_ms(
    mem: Any,
    op: str,
    owners: list[Owner],
    calls: int,
    pause_s: float = 0.0,
    min_s: float = 0.0,
) -> float:
    """CPU ms per call of the operation made through the Python API in this process:
    ``calls`` calls at least, and more until they took ``min_s`` of CPU (a short window is
    at the mercy of a moment's noise); ``pause_s``: the CPU idles that long between calls,
    as a server's does."""
    from memstrata import Scope

    targets = [(Scope("serve", o.user), cid) for o in owners for cid in o.conversations]

    def call(n: int) -> None:
        scope, cid = targets[n % len(targets)]
        if op == "history":
            mem.history(scope, cid, max_tokens=HISTORY_TOKENS)
        elif op == "context":
            mem.context(scope, cid, budget=CONTEXT_BUDGET)
        else:
            mem.messages.append(scope, cid, role="user", content=_text(7, 1))

    for n in range(min(20, calls)):  # warm caches and lazy loads, as a running server has
        call(n)
    t0 = time.process_time()
    n = 0
    while n < calls or time.process_time() - t0 < min_s:
        call(n)
        n += 1
        if pause_s:
            time.sleep(pause_s)
    return (time.process_time() - t0) * 1000 / n


@contextmanager
def _store(url: str, home: Path) -> Iterator[Any]:
    from memstrata import Memory
    from memstrata.config import Settings

    mem = Memory.open(url, settings=Settings(home=home, worker="off"))
    try:
        yield mem
    finally:
        mem.close()


def run(
    *,
    db: str | None = None,
    users: int = USERS,
    conversations: int = CONVERSATIONS,
    messages: int = MESSAGES,
    seconds: float = SECONDS,
    connections: int = CONNECTIONS,
    calls: int = IN_PROCESS_CALLS,
    processes: int = 1,
    operations: tuple[str, ...] = OPERATIONS,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Seed, serve, drive each operation with wrk and return the JSON envelope."""
    for name, value in (
        ("users", users),
        ("conversations", conversations),
        ("messages", messages),
        ("connections", connections),
        ("calls", calls),
        ("processes", processes),
    ):
        if value < 1:
            raise InvalidInput(f"{name} must be >= 1", field=name)
    unknown = set(operations) - set(OPERATIONS)
    if unknown:
        raise InvalidInput(f"unknown operations {sorted(unknown)}; known: {OPERATIONS}")
    wrk = _wrk()
    min_s = IN_PROCESS_MIN_S if seconds >= 2 else 0.0  # a short run stays short
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memstrata-serve-") as tmp:
        home = Path(tmp)
        url = db or f"sqlite:///{(home / 'serve.db').as_posix()}"
        with _store(url, home) as mem:
            progress(f"serve: seeding {users} users x {conversations} x {messages} messages")
            owners = _seed(mem, users, conversations, messages)
            with ServerProcess(url, home, processes, _SERVER_ENV) as server:
                per_round = max(1, calls // ROUNDS)
                for op in operations:
                    method, entries = _requests(op, owners)
                    script = home / f"{op}.lua"
                    script.write_text(_script(method, entries), encoding="utf-8")
                    _warm(server.base, method, entries)
                    local = paused = spent = 0.0
                    loads = []
                    for r in range(ROUNDS):
                        progress(f"serve: {op}, round {r + 1} of {ROUNDS}: in process, then REST")
                        local += _in_process_cpu_ms(mem, op, owners, per_round, min_s=min_s)
                        paused += _in_process_cpu_ms(
                            mem, op, owners, per_round, PAUSE_S, min_s=min_s
                        )
                        load, cpu_s = _load(wrk, server, script, seconds / ROUNDS, connections)
                        loads.append(load)
                        spent += cpu_s
                    w = _combined(loads)
                    server_ms = _per_request_ms(w, spent)
                    local_ms, paused_ms = local / ROUNDS, paused / ROUNDS
                    rows.append(
                        {
                            "operation": op,
                            "requests": w["requests"],
                            "errors": w["status_errors"] + w["socket_errors"],
                            "requests_per_s": round(w["requests"] / (w["duration_us"] / 1e6), 1),
                            "p50_ms": round(w["p50_us"] / 1000, 3),
                            "p99_ms": round(w["p99_us"] / 1000, 3),
                            "server_cpu_ms": round(server_ms, 3),
                            "in_process_cpu_ms": round(local_ms, 3),
                            "ratio": round(server_ms / local_ms, 2) if local_ms > 0 else None,
                            "in_process_paused_cpu_ms": round(paused_ms, 3),
                            "ratio_paused": (
                                round(server_ms / paused_ms, 2) if paused_ms > 0 else None
                            ),
                        }
                    )
                # What any request costs this server before an operation's own work: the
                # floor under each row's server CPU (HTTP, the middleware, routing, the answer).
                progress(f"serve: GET /healthz over REST ({seconds:g} s)")
                script = home / "healthz.lua"
                script.write_text(_script("GET", [("/healthz", "", "")]), encoding="utf-8")
                floor, floor_s = _load(wrk, server, script, seconds, connections)
                floor_ms = _per_request_ms(floor, floor_s)
    headline = {
        f"{r['operation']}_{k}": r[k]
        for r in rows
        for k in (
            "server_cpu_ms",
            "in_process_cpu_ms",
            "ratio",
            "requests_per_s",
            "in_process_paused_cpu_ms",
            "ratio_paused",
        )
    }
    headline["healthz_server_cpu_ms"] = round(floor_ms, 3)
    headline["healthz_requests_per_s"] = round(floor["requests"] / (floor["duration_us"] / 1e6), 1)
    floor_errors = floor["status_errors"] + floor["socket_errors"]
    headline["errors"] = sum(r["errors"] for r in rows) + floor_errors
    params = {
        "users": users,
        "conversations_per_user": conversations,
        "messages_per_conversation": messages,
        "seconds_per_operation": seconds,
        "connections": connections,
        "wrk_threads": THREADS,
        "in_process_calls": calls,
        "rounds": ROUNDS,
        "in_process_pause_s": PAUSE_S,
        "in_process_min_cpu_s_per_round": min_s,
        "server_processes": processes,
        "db": "sqlite (a temporary file)" if db is None else db.split(":", 1)[0],
        "history": f"GET history max_tokens={HISTORY_TOKENS}",
        "context": f"POST context budget={CONTEXT_BUDGET} (query: the newest user message)",
        "append": "POST a user message after the active leaf",
        "server": "memstrata serve on loopback, its own process(es), background worker off",
        "cpu": "user+system CPU of the server and its child processes from /proc, per request",
        "healthz": "GET /healthz driven alike: what any request costs this server",
        "order": "per operation, rounds of: calls in process (back to back, then paused), "
        "then load on the server; latency: the rounds' median p50 and highest p99",
    }
    return envelope("serve", params=params, headline=headline, rows=rows)


def print_result(result: dict[str, Any], console: Any = None) -> None:
    p, h = result["params"], result["headline"]
    notes = [
        machine_line(result["machine"]),
        f"wrk {p['wrk_threads']} threads, {p['connections']} connections, "
        f"{p['seconds_per_operation']:g} s per operation; {p['server_processes']} server "
        f"process(es); {result['headline']['errors']} errors",
        "cpu ms: server CPU per request (from /proc) and the same call through the Python API "
        f"(back to back; paused: {p.get('in_process_pause_s', PAUSE_S) * 1000:g} ms between calls)",
        f"GET /healthz (any request's floor): {h.get('healthz_server_cpu_ms')} ms server CPU, "
        f"{h.get('healthz_requests_per_s')} req/s",
    ]
    columns = (
        ("operation", "operation"),
        ("requests_per_s", "req/s"),
        ("p50_ms", "p50 ms"),
        ("p99_ms", "p99 ms"),
        ("server_cpu_ms", "server cpu ms"),
        ("in_process_cpu_ms", "in-process ms"),
        ("ratio", "ratio"),
        ("in_process_paused_cpu_ms", "paused ms"),
        ("ratio_paused", "ratio paused"),
    )
    print_table("memstrata bench serve", columns, result["rows"], notes=notes, console=console)
