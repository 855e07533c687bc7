"""Blob operations of a receipt (sans-IO, :mod:`memstrata.blobs` requests): purge the
prefixes a deletion made unreachable, and look for objects left under a deleted
conversation."""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.blobs import BlobMeta, BlobOp, Delete, List
from memstrata.nodes.layout import ROOT

__all__ = ["leftovers", "purge"]


def purge(prefixes: Sequence[str]) -> BlobOp[dict[str, int]]:
    """Delete every object under each prefix now (the purge job queued by the deletion would
    do it later); the objects removed per prefix."""
    counts: dict[str, int] = {}
    for prefix in prefixes:
        metas: list[BlobMeta] = yield List(prefix)
        if metas:
            yield Delete(tuple(m.key for m in metas))
        counts[prefix] = len(metas)
    return counts


def leftovers(
    tenant: str, prefixes: Sequence[str], conversation_ids: Sequence[str]
) -> BlobOp[list[str]]:
    """Objects still under a purged prefix, or under any node memory of a deleted
    conversation (``<root>/<tenant>/<app>/<conversation>/...``): prefixes and counts only."""
    found: list[str] = []
    for prefix in prefixes:
        metas: list[BlobMeta] = yield List(prefix)
        if metas:
            found.append(f"blobs {prefix}: {len(metas)} objects left")
    if conversation_ids:
        wanted = set(conversation_ids)
        metas = yield List(f"{ROOT}/{tenant}/")
        left: dict[str, int] = {}
        for meta in metas:
            parts = meta.key.split("/")
            if len(parts) > 3 and parts[3] in wanted:
                folder = "/".join(parts[:4]) + "/"
                left[folder] = left.get(folder, 0) + 1
        found += [f"blobs {folder}: {n} objects left" for folder, n in sorted(left.items())]
    return found
