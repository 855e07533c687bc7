"""Native export and import (``mem.transfer``); ``_sync_transfer.py`` is generated from this
file by ``scripts/unasync.py``. The format is described in :mod:`memstrata.transfer.native`."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable

from memstrata.api._async_base import AsyncSubAPI
from memstrata.api._async_recall import AsyncRecall
from memstrata.conversation.branches import fill_forks
from memstrata.nodes.service import blobs_for
from memstrata.storage.parent_hops import fill_parent_seqs
from memstrata.storage.positions import fill_positions
from memstrata.transfer.native import (
    BATCH,
    ExportScope,
    Row,
    blob_prefixes,
    dump_line,
    export_rows,
    header,
    insert_rows,
    parse_lines,
)

__all__ = ["AsyncTransfer"]


class AsyncTransfer(AsyncSubAPI):
    """Move a whole store, or one user's data, in memstrata's own format."""

    async def export(
        self,
        write_line: Callable[[str], object],
        *,
        tenant: str | None = None,
        user: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, int]:
        """Write the export line by line (each without its newline) to ``write_line``;
        with ``tenant`` and ``user``, only that user's data (a data-subject export)."""
        scope = ExportScope(tenant, user)
        tick = progress or (lambda n: None)

        def sink(line: str) -> None:
            write_line(line)
            tick(1)

        write_line(dump_line(header(scope)))
        rows = await self._read(export_rows, scope, sink)
        prefixes = await self._read(blob_prefixes, scope)
        store = blobs_for(self._core).store
        keys: list[str] = []
        for prefix in prefixes:
            keys += [m.key for m in await store.alist_prefix(prefix)]
        for key in sorted(keys):
            blob = await store.aget(key)
            write_line(dump_line({"blob": key, "b64": base64.b64encode(blob.data).decode("ascii")}))
            tick(1)
        return {"rows": rows, "blobs": len(keys)}

    async def import_(
        self, lines: Iterable[str], *, progress: Callable[[int], None] | None = None
    ) -> dict[str, int]:
        """Import an export (idempotent: ids are kept, rows already there are left alone);
        then index the imported messages for recall."""
        head, items = parse_lines(lines)
        dialect = self._core.engine.dialect
        store = blobs_for(self._core).store
        tick = progress or (lambda n: None)
        added = read_rows = blobs = 0
        batch: list[Row] = []
        conversations: set[str] = set()  # those whose messages came, for their fork rows
        message_cols = head.tables.get("messages", [])
        cid_at = (
            message_cols.index("conversation_id") if "conversation_id" in message_cols else None
        )
        for item in items:
            if isinstance(item[1], bytes):
                await store.aput(item[0], item[1])
                blobs += 1
                tick(1)
                continue
            batch.append(item)
            if item[0] == "messages" and cid_at is not None:
                conversations.add(str(item[1][cid_at]))
            if len(batch) == BATCH:
                added += await self._write(insert_rows, dialect, head, batch)
                read_rows += len(batch)
                tick(len(batch))
                batch = []
        if batch:
            added += await self._write(insert_rows, dialect, head, batch)
            read_rows += len(batch)
            tick(len(batch))
        await self._write(fill_forks, sorted(conversations))
        await self._write(fill_positions, sorted(conversations))
        await self._write(fill_parent_seqs, sorted(conversations))
        indexed = await AsyncRecall(self._core).backfill()
        return {"rows": read_rows, "added": added, "blobs": blobs, "indexed": indexed}
