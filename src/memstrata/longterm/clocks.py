"""The two clocks of long-term memory: event time (``valid_from``, ``valid_to``: when a
fact held in the world) and system time (``recorded_at``, ``superseded_at``: when
memstrata held it as current).

Reads ask one of two questions:

* *true now* (the default of lists, search and context): an active fact whose event
  time holds now;
* *as of T, as known at K* (bitemporal; ``K`` defaults to ``T``): a fact recorded at or
  before ``K`` whose event time, as known at ``K``, holds at ``T``. A fact current at
  ``K`` holds from its ``valid_from`` on (an end learned after ``K`` was not known
  then); a fact superseded by ``K`` holds over ``[valid_from, valid_to)`` (what replaced
  it taught when it ended); one removed or evicted by ``K`` is no longer held. Passing
  ``K`` = now asks what memstrata now knows about ``T``.

Times cross the API as ISO 8601 (a naive time is UTC) or ``datetime``; they are stored
as integer microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from memstrata.instants import parse_instant

__all__ = [
    "TRUE_AT",
    "AsOf",
    "as_of",
    "clamp_end",
    "parse_instant",
    "parse_loose_date",
]

#: Active and valid at a time (params: the time twice).
TRUE_AT = (
    "status = 'active' AND (valid_from IS NULL OR valid_from <= ?) "
    "AND (valid_to IS NULL OR valid_to > ?)"
)
# Recorded by K and begun by T (params: K, T, K, T, T), and then one of: still current
# and not ended by T; current at K (its end, if any, was learned after K); or superseded
# by K, which taught when it ended: true at T if that was after T. A fact removed or
# evicted by K is no longer held at all.
_AS_OF = (
    "recorded_at <= ? AND (valid_from IS NULL OR valid_from <= ?) AND ("
    "superseded_at > ? "
    "OR (superseded_at IS NULL AND (valid_to IS NULL OR valid_to > ?)) "
    "OR (status = 'superseded' AND valid_to > ?))"
)


@dataclass(frozen=True, slots=True)
class AsOf:
    """A bitemporal question: valid at ``valid_at``, as known at ``known_at``."""

    valid_at: int
    known_at: int

    def where(self) -> tuple[str, tuple[int, ...]]:
        """The SQL condition on ``facts`` and its parameters."""
        k, t = self.known_at, self.valid_at
        return _AS_OF, (k, t, k, t, t)


def as_of(at: object, known_at: object = None) -> AsOf | None:
    """The question ``as_of``/``known_at`` ask (None: "true now"). ``known_at``
    defaults to ``as_of``; given alone, it stands for both ("then, as known then")."""
    t = parse_instant(at, "as_of")
    k = parse_instant(known_at, "known_at")
    if t is None and k is None:
        return None
    t = k if t is None else t
    assert t is not None
    return AsOf(t, t if k is None else k)


def clamp_end(start: int | None, end: int) -> int:
    """An end of event time never before its start."""
    return end if start is None else max(start, end)


_YEAR_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_YEAR = re.compile(r"^(\d{4})$")


def parse_loose_date(value: object) -> datetime | None:
    """A date or time a model wrote (``2024``, ``2024-03``, ``2024-03-05``, a full ISO
    time); None when it is none of them or implausible (before 1900, after 2200)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    found: datetime | None = None
    try:
        if m := _YEAR_MONTH.match(text):
            found = datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=UTC)
        elif m := _YEAR.match(text):
            found = datetime(int(m.group(1)), 1, 1, tzinfo=UTC)
        elif len(text) == 10:
            d = date.fromisoformat(text)
            found = datetime(d.year, d.month, d.day, tzinfo=UTC)
        elif text:
            iso = text[:-1] + "+00:00" if text.endswith(("z", "Z")) else text
            found = datetime.fromisoformat(iso)
            if found.tzinfo is None:
                found = found.replace(tzinfo=UTC)
    except ValueError:
        return None
    if found is None or not 1900 <= found.year <= 2200:
        return None
    return found
