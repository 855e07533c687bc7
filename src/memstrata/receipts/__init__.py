"""Deletion receipts: what a deletion removed (ids and counts per table and blob prefix, never
content), who asked and when, and what a verification scan of the whole store found afterwards.

A receipt is written in the deletion's own transaction (:mod:`memstrata.receipts.ops`); the
scan (:mod:`memstrata.receipts.verify`) runs right after it commits. Receipts follow retention
(kind ``receipts``) and are never removed by the deletion they describe.
"""

from __future__ import annotations

from memstrata.domain.receipts import KINDS, Receipt, UserDeleted

__all__ = ["KINDS", "Receipt", "UserDeleted"]
