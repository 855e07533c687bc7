"""Two clocks for edits (sans-IO): what an edit of a fact or a rewrite of a profile section
replaced stays readable in system time (tables of :mod:`memstrata.storage.version_tables`).

A fact's edit copies its row, as it was, into ``fact_versions`` with ``superseded_at`` =
the edit's time, and the edited row is recorded anew (``recorded_at`` = the edit's time);
bitemporal reads (:data:`KNOWN_FACTS`) look at both, so ``known_at`` before the edit finds
the old content and after it the new (:mod:`memstrata.longterm.clocks` decides which row
holds). An edit corrects what memstrata believed; it does not say the world changed, so
event time is kept. A profile section's rewrite keeps the old text with ``valid_to`` =
when the new text holds from (never before the old began) and ``superseded_at``.
"""

from __future__ import annotations

from collections.abc import Iterable

from memstrata.longterm.rows import COLUMNS, OWNER, owner, section_text
from memstrata.storage.plan import Exec, Op, Query
from memstrata.types import Scope

__all__ = [
    "KNOWN_FACTS",
    "ProfileRow",
    "keep_fact_version",
    "keep_profile_version",
    "profile_rows",
    "section_at",
]

# Every column of ``facts``: a version row is the fact's row as it was.
_FACT_ROW = (
    "seq, id, tenant_id, user_id, agent_id, content, content_key, category, confidence, "
    "status, origin, superseded_by, source_error, reason, changed_in, created_at, updated_at, "
    "valid_from, valid_to, recorded_at"
)
#: The facts a bitemporal read looks at: current rows and the versions edits replaced.
KNOWN_FACTS = (
    f"(SELECT {COLUMNS}, tenant_id, user_id FROM facts UNION ALL "
    f"SELECT {COLUMNS}, tenant_id, user_id FROM fact_versions) known"
)


def keep_fact_version(scope: Scope, fact_id: str, now: int) -> Op[None]:
    """Before an edit: keep the fact's row as a version superseded ``now``, and record the
    row anew from ``now`` (the caller then writes the new content)."""
    yield Exec(
        f"INSERT INTO fact_versions ({_FACT_ROW}, superseded_at) "
        f"SELECT {_FACT_ROW}, ? FROM facts WHERE id = ? AND {OWNER} "
        "ON CONFLICT DO NOTHING",
        (now, fact_id, *owner(scope)),
    )
    yield Exec(
        f"UPDATE facts SET recorded_at = ? WHERE id = ? AND {OWNER}",
        (now, fact_id, *owner(scope)),
    )


_SECTION_ROW = "tenant_id, user_id, agent_id, section, summary, updated_at, valid_from, recorded_at"


def keep_profile_version(scope: Scope, section: str, since: int, now: int) -> Op[None]:
    """Before a rewrite of ``section`` whose text holds from ``since``: keep the text it
    replaces, valid until ``since`` (never before it began), superseded ``now``."""
    yield Exec(
        f"INSERT INTO profile_section_versions ({_SECTION_ROW}, valid_to, superseded_at) "
        f"SELECT {_SECTION_ROW}, CASE WHEN valid_from > ? THEN valid_from ELSE ? END, ? "
        f"FROM profile_sections WHERE {OWNER} AND section = ? ON CONFLICT DO NOTHING",
        (since, since, now, *owner(scope), section),
    )


#: (section, summary, updated_at, valid_from, valid_to, recorded_at, superseded_at)
ProfileRow = tuple[str, str, int, int | None, int | None, int | None, int | None]


def profile_rows(scope: Scope) -> Op[list[ProfileRow]]:
    """The owner's sections, current and earlier versions."""
    rows = yield Query(
        "SELECT section, summary, updated_at, valid_from, NULL, recorded_at, NULL "
        f"FROM profile_sections WHERE {OWNER} UNION ALL "
        "SELECT section, summary, updated_at, valid_from, valid_to, recorded_at, superseded_at "
        f"FROM profile_section_versions WHERE {OWNER}",
        (*owner(scope), *owner(scope)),
    )
    return [(r[0], section_text(scope, r[0], r[1]), *r[2:]) for r in rows]


def _held(row: ProfileRow, valid_at: int, known_at: int) -> bool:
    """The rule of :mod:`memstrata.longterm.clocks` for one section row."""
    _, _, _, since, until, recorded, superseded = row
    if recorded is not None and recorded > known_at:
        return False
    if since is not None and since > valid_at:
        return False
    if superseded is not None and superseded > known_at:
        return True  # current at K: an end learned after K was not known then
    return until is None or until > valid_at


def section_at(rows: Iterable[ProfileRow], valid_at: int, known_at: int) -> dict[str, ProfileRow]:
    """Per section, the row that held at ``valid_at`` as known at ``known_at``."""
    out: dict[str, ProfileRow] = {}
    for row in sorted(rows, key=lambda r: r[5] or 0):  # the latest recorded wins a tie
        if _held(row, valid_at, known_at):
            out[row[0]] = row
    return out
