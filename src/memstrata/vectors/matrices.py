"""Users' vector matrices kept in memory for exact search, valid by owner version.

Exact search scores every vector of a user; reading them from the database is most of
its cost (100k vectors of 384 dimensions: about 150 MB of rows per search), scoring
them a small part. So an :class:`OwnerMatrix` keeps one user's vectors of one space as
a float32 matrix, stamped with the owner row's ``(epoch, version)`` (see
:func:`memstrata.vectors.port.bump_owner`). A search reads that row first: the same
stamp means the matrix is current; a higher version with no deletion since means rows
were only added, and those rows (``version`` above the matrix's) are appended; anything
else (a deletion, a replacement, another epoch) means a full read.

No I/O here: :mod:`memstrata.vectors.exact` reads the rows and hands them over. Entries
are immutable for readers: an append writes past every published entry's row count into
shared spare capacity (or a new, larger buffer) and publishes a new entry, so a search
holding an older entry keeps a consistent view without a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.errors import Corruption

__all__ = ["MatrixCache", "OwnerMatrix", "Stamp"]

_OVERSIZED_REMEMBERED = 10_000  # owners too large to keep, remembered by stamp
_PER_ROW = 200  # two id strings (~60 bytes each), their list slots and an index entry

#: (epoch, version, deleted_version) of an owner row; epoch None: no row yet.
Stamp = tuple[str | None, int, int]


@dataclass(slots=True)
class _Shared:
    """Storage shared by the entries of one owner: grown by appends, never rewritten."""

    buf: npt.NDArray[np.float32]
    ids: list[str]
    message_ids: list[str]
    conversations: npt.NDArray[np.int32]
    agents: npt.NDArray[np.int32]
    conversation_codes: dict[str, int] = field(default_factory=dict)
    conversation_names: list[str] = field(default_factory=list)  # code -> id
    agent_codes: dict[str, int] = field(default_factory=dict)
    rows_of: dict[str, list[int]] = field(default_factory=dict)  # message id -> rows


@dataclass(frozen=True, slots=True)
class OwnerMatrix:
    """One user's vectors of one space as of ``stamp``: rows ``[0, n)`` of the shared
    storage."""

    stamp: Stamp
    n: int
    shared: _Shared

    @property
    def nbytes(self) -> int:
        """Memory held, estimated from capacity (fixed for the storage's life): the
        matrix, two int32 codes and ~200 bytes of ids and index per row."""
        rows, dim = self.shared.buf.shape
        return int(rows * (dim * 4 + 8 + _PER_ROW))

    def current(self, stamp: Stamp) -> bool:
        return stamp == self.stamp

    def extendable(self, stamp: Stamp) -> bool:
        """Only additions happened between this matrix and ``stamp``."""
        epoch, version, deleted = stamp
        return epoch == self.stamp[0] and version > self.stamp[1] and deleted <= self.stamp[1]

    def scores(
        self,
        query: npt.NDArray[np.float32],
        *,
        agent: str | None,
        conversation_id: str | None,
        excluded: Iterable[str],
    ) -> npt.NDArray[np.float32]:
        """Cosine scores of rows ``[0, n)``; rows outside the filters score ``-inf``."""
        shared = self.shared
        # einsum, not matmul: a matrix-vector product gains nothing from BLAS threads.
        out: npt.NDArray[np.float32] = np.einsum("ij,j->i", shared.buf[: self.n], query)
        for value, codes, column in (
            (agent, shared.agent_codes, shared.agents),
            (conversation_id, shared.conversation_codes, shared.conversations),
        ):
            if value is not None:
                out[column[: self.n] != codes.get(value, -1)] = -np.inf
        for mid in excluded:
            for row in shared.rows_of.get(mid, ()):
                if row < self.n:
                    out[row] = -np.inf
        return out

    def row(self, i: int) -> tuple[str, str, str]:
        """(vector id, message id, conversation id) of row ``i``."""
        shared = self.shared
        conv = shared.conversation_names[int(shared.conversations[i])]
        return shared.ids[i], shared.message_ids[i], conv

    def rows(self, picked: Sequence[int]) -> list[tuple[str, str, str]]:
        """:meth:`row` of each of ``picked`` (a search's hits: one numpy read for all their
        conversations, not one per row)."""
        shared = self.shared
        ids, mids, names = shared.ids, shared.message_ids, shared.conversation_names
        codes: list[int] = shared.conversations[list(picked)].tolist()
        return [(ids[i], mids[i], names[c]) for i, c in zip(picked, codes, strict=True)]


Row = Sequence[Any]  # (id, message_id, conversation_id, agent_id, vector bytes)


def _code(codes: dict[str, int], conversation_id: str, shared: _Shared) -> int:
    code = codes.get(conversation_id)
    if code is None:
        code = codes[conversation_id] = len(shared.conversation_names)
        shared.conversation_names.append(conversation_id)
    return code


def _append(shared: _Shared, n: int, rows: Sequence[Row], dim: int) -> int:
    """Write ``rows`` at ``[n, n + len(rows))`` of ``shared`` (which has the room)."""
    data = b"".join(r[4] for r in rows)
    if len(data) != len(rows) * dim * 4:
        raise Corruption(f"a stored vector does not have {dim} float32 values")
    end = n + len(rows)
    shared.buf[n:end] = np.frombuffer(data, dtype="<f4").reshape(len(rows), dim)
    for i, (vid, mid, conv, agent, _) in enumerate(rows, n):
        shared.ids.append(str(vid))
        shared.message_ids.append(str(mid))
        shared.conversations[i] = _code(shared.conversation_codes, str(conv), shared)
        shared.agents[i] = shared.agent_codes.setdefault(str(agent), len(shared.agent_codes))
        shared.rows_of.setdefault(str(mid), []).append(i)
    return end


class MatrixCache:
    """Owner matrices of one space, least recently used first out, within ``max_bytes``.

    A matrix larger than the whole budget is not kept (its searches read the database as
    without a cache). Thread-safe: concurrent searches may publish entries; the last
    one for an owner wins, and every published entry is valid for its own stamp.
    """

    def __init__(self, dim: int, max_bytes: int) -> None:
        self.dim = dim
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], OwnerMatrix] = OrderedDict()
        self._bytes = 0
        #: Owners whose matrix did not fit, with the stamp it was built at: until that
        #: changes, their searches read the rows directly rather than build it again.
        self._oversized: dict[tuple[str, str], Stamp] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def oversized(self, owner: tuple[str, str], stamp: Stamp) -> bool:
        """Whether ``owner``'s matrix, as of ``stamp``, is known not to fit."""
        with self._lock:
            return self._oversized.get(owner) == stamp

    def get(self, owner: tuple[str, str]) -> OwnerMatrix | None:
        with self._lock:
            entry = self._entries.get(owner)
            if entry is not None:
                self._entries.move_to_end(owner)
            return entry

    def load(self, owner: tuple[str, str], stamp: Stamp, rows: Sequence[Row]) -> OwnerMatrix:
        """A matrix of exactly ``rows`` (the owner's, read at ``stamp``), kept if it fits."""
        shared = self._new_shared(_capacity(len(rows)))
        n = _append(shared, 0, rows, self.dim)
        return self._publish(owner, OwnerMatrix(stamp, n, shared))

    def extend(
        self, owner: tuple[str, str], base: OwnerMatrix, stamp: Stamp, rows: Sequence[Row]
    ) -> OwnerMatrix:
        """``base`` with ``rows`` (added since its stamp) appended, as of ``stamp``."""
        with self._lock:
            shared, n = base.shared, base.n
            if len(shared.ids) != n or n + len(rows) > len(shared.buf):
                # Another entry grew this storage already, or it is full: copy rows [0, n).
                grown = self._new_shared(_capacity(n + len(rows)))
                grown.buf[:n] = shared.buf[:n]
                grown.ids[:] = shared.ids[:n]
                grown.message_ids[:] = shared.message_ids[:n]
                grown.conversations[:n] = shared.conversations[:n]
                grown.agents[:n] = shared.agents[:n]
                grown.conversation_codes.update(shared.conversation_codes)
                grown.conversation_names[:] = shared.conversation_names
                grown.agent_codes.update(shared.agent_codes)
                for mid, found in shared.rows_of.items():
                    kept = [r for r in found if r < n]
                    if kept:
                        grown.rows_of[mid] = kept
                shared = grown
            end = _append(shared, n, rows, self.dim)
        return self._publish(owner, OwnerMatrix(stamp, end, shared))

    def drop(self, owner: tuple[str, str]) -> None:
        with self._lock:
            self._oversized.pop(owner, None)
            entry = self._entries.pop(owner, None)
            if entry is not None:
                self._bytes -= entry.nbytes

    def _new_shared(self, capacity: int) -> _Shared:
        return _Shared(
            np.empty((capacity, self.dim), dtype=np.float32),
            [],
            [],
            np.empty(capacity, dtype=np.int32),
            np.empty(capacity, dtype=np.int32),
        )

    def _publish(self, owner: tuple[str, str], entry: OwnerMatrix) -> OwnerMatrix:
        with self._lock:
            old = self._entries.pop(owner, None)
            if old is not None:
                self._bytes -= old.nbytes
            if entry.nbytes > self.max_bytes:
                if len(self._oversized) >= _OVERSIZED_REMEMBERED:
                    self._oversized.clear()
                self._oversized[owner] = entry.stamp
                return entry  # used for this search only
            self._oversized.pop(owner, None)
            self._entries[owner] = entry
            self._bytes += entry.nbytes
            while self._bytes > self.max_bytes and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes
        return entry

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"owners": len(self._entries), "bytes": self._bytes}


def _capacity(rows: int) -> int:
    """Room for ``rows`` and about an eighth more, so appends rarely copy."""
    return max(16, rows + rows // 8)
