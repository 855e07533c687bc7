"""Generated from ``_async_receipts.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import contextlib
import time
from functools import partial

from memstrata.api._sync_base import SubAPI
from memstrata.api.core import Core
from memstrata.errors import MemstrataError, NotFound
from memstrata.nodes.ops import ERASE_JOB
from memstrata.nodes.service import blobs_for
from memstrata.receipts import Receipt, verify
from memstrata.receipts import blobs as receipt_blobs
from memstrata.receipts import ops as receipt_ops
from memstrata.receipts.job import VERIFY_JOB, job_key
from memstrata.receipts.ops import Deletion
from memstrata.storage.plan import read, write
from memstrata.types import Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["INLINE_SCAN_MAX_MESSAGES", "LOCAL_ACTOR", "VERIFY_JOB", "Receipts", "settle"]

#: The actor a receipt names when the deletion came through the Python API directly.
LOCAL_ACTOR = "python"
#: The default of ``Settings.receipts_inline_scan_max_messages``: up to this many messages
#: stored (the newest message's server order, read from an index), the scan runs inside
#: the deleting call; past it, as a job.
INLINE_SCAN_MAX_MESSAGES = 10_000


def settle(core: Core, deletion: Deletion) -> Receipt:
    """After a deletion committed: purge its blob prefixes, then scan the store for anything
    of it left, and store both on its receipt."""
    _, receipt, prefixes = deletion
    counts: dict[str, int] = {}
    found: list[str] = []
    more: dict[str, int] = {}
    if prefixes:
        try:
            counts = blobs_for(core).run(receipt_blobs.purge(prefixes))
        except MemstrataError as exc:  # the deletion's purge job still runs later
            found.append(f"blobs: not purged now ({exc.code}); the queued purge job will")
        else:
            more["jobs"] = core.engine.run(
                write(lambda: receipt_ops.drop_purge_jobs(prefixes))
            )
    if receipt.kind == "message":  # its node memories' turns go now (or by the queued job)
        try:
            more["node_turn_ids"] = core.nodes.erase(receipt.subject_ids[0])
        except MemstrataError as exc:
            found.append(
                f"node memory: turns not erased now ({exc.code}); the queued {ERASE_JOB} job will"
            )
    inline_max = core.settings.receipts_inline_scan_max_messages
    if receipt.kind == "user":  # the scan reads the whole store
        size = core.engine.run(read(receipt_ops.store_size))
    else:  # the scan reads the owner's rows
        size = core.engine.run(
            read(lambda: receipt_ops.owner_size(receipt.tenant, receipt.user, inline_max))
        )
    if size > inline_max:
        return Receipts(core)._verify_later(receipt, counts, more, found)
    return _verify(core, receipt, counts, more, found, prefixes)


def _verify(
    core: Core,
    receipt: Receipt,
    counts: dict[str, int],
    more: dict[str, int],
    found: list[str],
    prefixes: list[str],
) -> Receipt:
    subject = verify.Subject(receipt.kind, receipt.tenant, receipt.user, receipt.subject_ids)
    keeps = frozenset(core.rt.cascade.keeps_ids)
    found += core.engine.run(read(lambda: verify.scan(core.engine.dialect, subject, keeps)))
    if subject.conversation_ids and receipt.kind != "message":
        try:
            found += blobs_for(core).run(
                receipt_blobs.leftovers(receipt.tenant, prefixes, subject.conversation_ids)
            )
        except MemstrataError as exc:
            found.append(f"blobs: not scanned ({exc.code})")
    now = core.rt.clock()
    return core.engine.run(
        write(lambda: receipt_ops.set_verification(receipt, counts, more, not found, found, now))
    )


def _clear_together(core: Core, receipts: list[Receipt]) -> set[str]:
    """Fact deletions of one owner share one scan, their ids searched together: when it
    finds nothing, each is verified without a scan of its own (the ids of those it
    verified); when it finds something, each gets its own scan, which says whose it is."""
    groups: dict[tuple[str, str], list[Receipt]] = {}
    for r in receipts:
        if r.kind == "fact":
            groups.setdefault((r.tenant, r.user), []).append(r)
    keeps = frozenset(core.rt.cascade.keeps_ids)
    done: set[str] = set()
    for (tenant, user), group in groups.items():
        if len(group) < 2:
            continue
        ids = [i for r in group for i in r.subject_ids]
        subject = verify.Subject("fact", tenant, user, ids)
        scan = partial(verify.scan, core.engine.dialect, subject, keeps)
        if core.engine.run(read(scan)):
            continue
        now = core.rt.clock()
        for r in group:
            verified = partial(receipt_ops.set_verification, r, dict(r.blobs), {}, True, [], now)
            with contextlib.suppress(NotFound):  # retention removed it meanwhile
                core.engine.run(write(verified))
            done.add(r.id)
    return done


class Receipts(SubAPI):
    """Read deletion receipts, and run a receipt's verification scan again."""

    def get(self, owner: Scope | str, receipt_id: str, *, admin: bool = False) -> Receipt:
        """A receipt: ``owner`` a scope reads the receipts of that user's own deletions
        (not the user's deletion itself, which only the tenant's admins read: ``admin=True``
        reads every receipt of the user); a tenant name reads any receipt of the tenant.
        NotFound for another tenant's or user's. A scope with an agent reads that agent's
        deletions only, and one without reads none of its agents' (unless ``admin``)."""
        tenant, user = self._owner(owner)
        agent = owner.agent if isinstance(owner, Scope) else None
        return self._read(receipt_ops.get, tenant, user, receipt_id, admin=admin, agent=agent)

    def verify(self, owner: Scope | str, receipt_id: str) -> Receipt:
        """Run the receipt's verification scan again (e.g. after a restore from a backup)
        and store its result."""
        tenant, user = self._owner(owner)
        agent = owner.agent if isinstance(owner, Scope) else None
        receipt = self._read(receipt_ops.get, tenant, user, receipt_id, agent=agent)
        return _verify(self._core, receipt, dict(receipt.blobs), {}, [], [])

    def verify_pending(
        self, tenant: str, *, limit: int = 50, budget_s: float | None = None
    ) -> int:
        """Verify up to ``limit`` of the tenant's receipts still unverified, oldest first
        (what the ``receipts.verify`` job runs), stopping once ``budget_s`` seconds have
        gone (after one at least); queues the tenant's job again when any are left, so
        other work gets the worker in between. Returns how many were verified."""
        tenant = _scope(Scope(tenant, "admin")).tenant
        todo = self._read(receipt_ops.pending, tenant, limit + 1)
        start = time.monotonic()
        cleared = _clear_together(self._core, todo[:limit])
        done = len(cleared)
        for receipt in todo[:limit]:
            if receipt.id in cleared:
                continue
            if done and budget_s is not None and time.monotonic() - start >= budget_s:
                break
            done += 1
            try:
                _verify(self._core, receipt, dict(receipt.blobs), {}, [], [])
            except NotFound:  # retention removed it meanwhile
                continue
        if len(todo) > done:
            self._queue(tenant)
        return done

    def _queue(self, tenant: str) -> None:
        """Queue the tenant's verification job, or merge into the queued one (a tenant
        never has more than one waiting, however many deletions it makes)."""
        self._enqueue(
            VERIFY_JOB,
            tenant=tenant,
            user=None,
            agent=None,
            key=job_key(tenant),
            max_wait_s=0.0,
        )

    def _verify_later(
        self, receipt: Receipt, blobs: dict[str, int], more: dict[str, int], found: list[str]
    ) -> Receipt:
        """Store what is known now (blob counts, rows removed after the deletion) with the
        verdict pending, and queue the scan (a job outside every cascade: it outlives the
        user and conversation it is about)."""
        now = self._core.rt.clock()
        pending = self._write(
            receipt_ops.set_verification, receipt, blobs, more, None, found, now
        )
        self._queue(receipt.tenant)
        return pending

    @staticmethod
    def _owner(owner: Scope | str) -> tuple[str, str | None]:
        if isinstance(owner, str):
            return _scope(Scope(owner, "admin")).tenant, None
        s = _scope(owner)
        return s.tenant, s.user
