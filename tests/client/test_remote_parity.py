"""The remote client offers what REST serves: ``Memory`` and ``RemoteMemory`` (and their
async twins) have the same methods, sub-APIs included, except those listed in
``LOCAL_ONLY`` with the reason. A method added to ``Memory`` fails this test until the
remote client has it too or it is listed here."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from memstrata import AsyncMemory, Memory, Scope
from memstrata.api.scoped import Scoped
from memstrata.client import AsyncRemoteMemory, RemoteMemory
from memstrata.config import Settings

#: Methods of the embedded facade that the remote client does not have, and why.
#: One entry per method ("sub_api.method" or a top-level name); keep the reasons short.
LOCAL_ONLY: dict[str, str] = {
    "open": "constructor (Memory.open with an http(s) URL returns the remote client)",
    "admin.check": "/readyz asks the server's backends",
    "admin.migrate": "`memstrata migrate` (operator task)",
    "admin.read": "a transaction on the local store",
    "admin.schema_version": "`memstrata doctor` (operator task)",
    "admin.seal_node_objects": "`memstrata encrypt --all` (operator task)",
    "admin.write": "a transaction on the local store",
    "compaction.assemble": "internal step of context(); REST serves POST .../context",
    "compaction.log": "process-local compaction log",
    "compaction.run": "REST serves it as compact(), which the client has",
    "compaction.schedule": "REST serves it as POST .../compact without wait (202 and the job)",
    "compaction.summary": "no REST route for the stored summary",
    "graphs.copy_thread": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.delete_item": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.delete_runs": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.delete_thread": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.embed": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.get_checkpoint": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.get_items": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.list_checkpoints": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.list_namespaces": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.prune": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.put_checkpoint": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.put_item": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.put_writes": "LangGraph storage for the in-process savers and store (no REST route)",
    "graphs.search_items": "LangGraph storage for the in-process savers and store (no REST route)",
    "jobs.blocked": "a property of the process that runs jobs",
    "jobs.blocked_reasons": "the server sends each job's `blocked` (jobs.list, jobs.get)",
    "jobs.enqueue": "job kinds are registered in the server's process",
    "jobs.kinds": "job kinds are registered in the server's process",
    "jobs.presence": "operators read it from /readyz (jobs.list carries worker_warning)",
    "jobs.register": "handlers run in the server's process",
    "jobs.run_pending": "runs jobs in the calling process",
    "jobs.start_local_worker": "starts the calling process's worker",
    "jobs.stats": "served by /metrics, not the API",
    "jobs.worker": "the calling process's worker (`memstrata worker`)",
    "keys.authenticate": "the server authenticates; keys are made with the CLI",
    "keys.create": "API keys are managed with `memstrata keys` (no REST route)",
    "keys.list": "API keys are managed with `memstrata keys` (no REST route)",
    "keys.revoke": "API keys are managed with `memstrata keys` (no REST route)",
    "keys.rotate": "API keys are managed with `memstrata keys` (no REST route)",
    "longterm.export": "`memstrata export` (no REST route)",
    "longterm.flush": "runs extraction in the calling process",
    "longterm.import_memory": "`memstrata import` (no REST route)",
    "longterm.status": "served by `memstrata doctor`",
    "longterm.updates": "no REST route",
    "messages.path": "no REST route (history covers a branch)",
    "nodes.gc": "`memstrata gc --node-memory` (operator task)",
    "nodes.open": "a local handle on the blob store",
    "recall.backfill": "`memstrata reindex` (operator task)",
    "receipts.verify": "re-runs a receipt's scan in the calling process (no REST route)",
    "receipts.verify_pending": "the tenant's verification job runs it in a worker (no REST route)",
    "recall.flush": "embeds in the calling process",
    "recall.pending": "`memstrata reindex` (operator task)",
    "retention.apply": "`memstrata retention` (operator task, no REST route)",
    "retention.delete": "`memstrata retention` (operator task, no REST route)",
    "retention.policies": "`memstrata retention` (operator task, no REST route)",
    "retention.schedule": "`memstrata retention` (operator task, no REST route)",
    "retention.set": "`memstrata retention` (operator task, no REST route)",
    "transfer.export": "`memstrata export` (no REST route)",
    "transfer.import_": "`memstrata import` (no REST route)",
    "working.delete": "no REST route",
    "provenance.record": "internal step of context(record=True); REST serves record: true",
    "provenance.record_of": "no REST route (a reply's provenance carries its record)",
    "provenance.fact_use_counts": "memory health's counter (no REST route)",
    "usage.flush": "writes the calling process's buffered usage rows",
    "usage.held_back": "`memstrata doctor` (operator task)",
    "usage.snapshot": "served by /metrics (this process's calls)",
}

#: Methods only the remote client has.
REMOTE_ONLY = {"identity": "who the API key speaks for (GET /v1/me)"}


def surface(mem: Any) -> set[str]:
    """Public methods, and ``sub_api.method`` for each sub-API object."""
    out: set[str] = set()
    for name in dir(mem):
        if name.startswith("_") or name == "core":
            continue
        value = getattr(mem, name)
        if callable(value):
            out.add(name)
        elif type(value).__module__.startswith("memstrata."):
            out |= {
                f"{name}.{m}"
                for m in dir(value)
                if not m.startswith("_") and callable(getattr(value, m))
            }
    return out


@pytest.fixture
def local(tmp_path):
    mem = Memory.open("sqlite://", settings=Settings(home=tmp_path, worker="off", embedder="none"))
    yield mem
    mem.close()


def test_remote_client_has_every_method_rest_serves(local):
    remote = RemoteMemory("http://127.0.0.1:9", api_key="msk_unused")  # connects lazily
    mine, theirs = surface(local), surface(remote)
    assert sorted(mine - theirs) == sorted(LOCAL_ONLY)
    assert sorted(theirs - mine) == sorted(REMOTE_ONLY)


def test_async_twins_have_the_same_surface(local):
    async def go() -> None:
        amem = await AsyncMemory.open("sqlite://", settings=Settings(worker="off", embedder="none"))
        try:
            assert surface(amem) == surface(local)
        finally:
            await amem.close()
        aremote = await AsyncMemory.open("http://127.0.0.1:9", api_key="msk_unused")
        assert isinstance(aremote, AsyncRemoteMemory)
        sync_remote = surface(RemoteMemory("http://127.0.0.1:9", api_key="k"))
        assert surface(aremote) - {"aclose"} == sync_remote  # aclose: an alias of close
        await aremote.close()

    anyio.run(go)


def test_a_bound_scope_takes_no_scope_argument(local):
    alice = local.scoped(Scope("acme", "alice"))
    assert isinstance(alice, Scoped)
    conv = alice.conversations.create(title="Trip")
    first = alice.messages.append(conv.id, role="user", content="I like trains.")
    alice.messages.append(conv.id, role="assistant", content="Noted.")
    assert alice.messages.list(conv.id).items[0].id == first.id
    assert len(alice.history(conv.id).messages) == 2
    assert alice.context(conv.id, budget=500).messages
    assert alice.recall.search("trains")[0].message.id == first.id
    # The same data through the unbound memory, and nothing under another scope.
    assert local.conversations.get(Scope("acme", "alice"), conv.id).id == conv.id
    assert local.conversations.list(Scope("acme", "bob")).items == []
    # Calls that take no scope pass through.
    assert alice.jobs.register is not None
    assert alice.memory is local


def test_async_bound_scope(tmp_path):
    async def go() -> None:
        async with await AsyncMemory.open(
            "sqlite://", settings=Settings(home=tmp_path, worker="off", embedder="none")
        ) as amem:
            bob = amem.scoped(Scope("acme", "bob"))
            conv = await bob.conversations.create()
            await bob.messages.append(conv.id, role="user", content="hello")
            history = await bob.history(conv.id)
            assert [m.content for m in history.messages] == ["hello"]

    anyio.run(go)
