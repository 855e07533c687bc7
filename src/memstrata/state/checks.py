"""Checks and encoding shared by the agent-state documents (pure)."""

from __future__ import annotations

from typing import Any

from memstrata import strictjson
from memstrata.domain.state import Format
from memstrata.errors import InvalidInput, PreconditionFailed
from memstrata.sealing import seal, unseal
from memstrata.storage.records import check_text
from memstrata.types import Scope

__all__ = [
    "MAX_DOC_BYTES",
    "MAX_VERSION",
    "Format",
    "check_expected",
    "check_name",
    "dump",
    "open_doc",
    "seal_doc",
    "sized",
]

MAX_DOC_BYTES = 256_000
#: Versions are stored in 64-bit columns: none reaches this.
MAX_VERSION = 2**63


def dump(value: Any) -> str:
    # Strict: NaN, Infinity or a lone surrogate is refused (InvalidInput), never stored.
    return strictjson.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def sized(text: str, what: str) -> str:
    """``text`` when it is valid text within :data:`MAX_DOC_BYTES`."""
    check_text(text, what)
    if len(text.encode()) > MAX_DOC_BYTES:
        raise InvalidInput(f"{what} is over {MAX_DOC_BYTES} bytes", field=what)
    return text


def check_name(value: str, what: str) -> str:
    """``value`` when it is a valid 1-255 character name (task, outcome, run id, ...)."""
    if not isinstance(value, str) or not 1 <= len(value) <= 255:
        raise InvalidInput(f"{what} must be 1-255 characters", field=what)
    check_text(value, what)
    return value


def check_expected(expected: int | None) -> None:
    if expected is not None and expected < 0:
        raise InvalidInput("expected_version must be >= 0", field="expected_version")
    if expected is not None and expected >= MAX_VERSION:
        # A well-formed version no document can reach (versions are 64-bit counters): the
        # precondition fails like any stale one, before a driver is asked to bind it.
        raise PreconditionFailed(f"version {expected} names no version of this document")


def seal_doc(column: str, row: str, scope: Scope, text: str) -> str:
    """A document's text as stored: sealed for its owner under encryption at rest, bound
    to ``column`` (``table.column``) and the row's key ``row`` (as is when off)."""
    return seal(column, row, scope.tenant, scope.user, text) or text


def open_doc(column: str, row: str, value: str | None) -> str | None:
    """A stored document's text; None when its owner's key was destroyed (the reader
    treats the document as deleted)."""
    return unseal(column, row, value)
