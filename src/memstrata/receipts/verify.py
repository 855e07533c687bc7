"""The verification scan (sans-IO): after a deletion, look in every table for what it deleted.

The tables are read from the database's catalogue when the scan runs, so tables other
features add later are scanned without code here. Two kinds of checks:

- exact: rows still naming the deleted things through their key columns (``conversation_id``,
  ``message_id`` with its conversation, ``fact_id``, ``user_id`` with its tenant, and the
  deleted things' own tables by ``id``);
- anywhere: every column of every table, as text, for the deleted ids distinctive enough to
  search as substrings (server ids: UUIDv7), so an id inside a JSON payload or a composite
  key is found too.

The anywhere-search reads the whole store only for a user deletion (the user's name and
conversations may be anywhere). Any other deletion concerns one owner, so it reads the
owner's rows only: by ``tenant_id`` and ``user_id`` where a table has both, by the owner's
(and the deleted) conversations where it has ``conversation_id``, by the tenant where it
has only ``tenant_id``; a table naming no owner (full-text shadow tables, workers, vector
spaces) is left to the exact checks. Its cost follows the owner's data, not the store's:
another tenant's 20,000 messages cost it nothing.

The receipts table itself and the migrations table are not scanned, nor tables a feature
declares as keeping ids on purpose (``Cascade.keeps_ids``: tombstones hold ids, never
content). A finding names the table, the column and the number of rows, never a value.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import BATCH, placeholders

__all__ = ["SKIPPED", "Subject", "scan", "table_columns"]

#: Never scanned: receipts hold the ids they describe; migrations hold none.
SKIPPED = frozenset({"deletion_receipts", "schema_migrations"})

# Ids shorter than this are too likely to occur inside unrelated values to search as
# substrings (a user named "u1" would match "u10"); they get the exact checks only.
_DISTINCT = 16
_CHUNK = 20  # needles per substring query


@dataclass(frozen=True, slots=True)
class Subject:
    """What to look for, from a receipt."""

    kind: str
    tenant: str
    user: str
    subject_ids: Sequence[str]

    @property
    def conversation_ids(self) -> list[str]:
        if self.kind == "user":
            return list(self.subject_ids[1:])
        if self.kind in ("conversation", "message"):
            return list(self.subject_ids[:1])
        return []

    @property
    def searched_ids(self) -> list[str]:
        """The ids searched for anywhere: a deleted user's conversations (its name is checked
        by tenant and key only: another tenant may use it), a message deletion's messages
        (its conversation stays), otherwise the subject ids."""
        if self.kind in ("user", "message"):
            return list(self.subject_ids[1:])
        return list(self.subject_ids)


def table_columns(dialect: str) -> Op[dict[str, list[str]]]:
    """Every table of the store (the current schema on PostgreSQL) with its columns."""
    out: dict[str, list[str]] = {}
    if dialect == "postgres":
        rows = yield Query(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name "
            "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
            "ORDER BY c.table_name, c.ordinal_position"
        )
        for table, column in rows:
            out.setdefault(str(table), []).append(str(column))
        return out
    tables = yield Query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    )
    for (table,) in tables:
        cols = yield Query("SELECT name FROM pragma_table_info(?)", (table,))
        out[str(table)] = [str(c[0]) for c in cols]
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _count(table: str, where: str, params: Sequence[object]) -> Op[int]:
    rows = yield Query(f'SELECT count(*) FROM "{table}" WHERE {where}', params)
    return int(rows[0][0])


def _ids_in(
    column: str, ids: Sequence[str], prefix: str = "", first: Sequence[object] = ()
) -> list[tuple[str, str, list[object]]]:
    """``column IN (...)`` checks, one per batch of ids."""
    return [
        (column, f"{prefix}{column} IN ({placeholders(len(batch))})", [*first, *batch])
        for batch in (ids[i : i + BATCH] for i in range(0, len(ids), BATCH))
    ]


def _checks(
    subject: Subject, table: str, columns: Collection[str]
) -> list[tuple[str, str, list[object]]]:
    """(column, condition, parameters) of the exact checks that apply to ``table``."""
    checks: list[tuple[str, str, list[object]]] = []
    cids = subject.conversation_ids
    if subject.kind in ("user", "conversation"):
        if "conversation_id" in columns:
            checks += _ids_in("conversation_id", cids)
        if table == "conversations":
            checks += _ids_in("id", cids)
    if subject.kind == "user" and "tenant_id" in columns:
        if "user_id" in columns:
            checks.append(("user_id", "user_id = ?", [subject.user]))
        if table == "users":
            checks.append(("id", "id = ?", [subject.user]))
    if subject.kind == "message" and "conversation_id" in columns:
        column = "message_id" if "message_id" in columns else "id" if table == "messages" else ""
        if column:
            mids = list(subject.subject_ids[1:])
            checks += _ids_in(column, mids, "conversation_id = ? AND ", cids)
    if subject.kind == "fact":
        if "fact_id" in columns:
            checks += _ids_in("fact_id", list(subject.subject_ids))
        if table == "facts":
            checks += _ids_in("id", list(subject.subject_ids))
    if "tenant_id" in columns:
        checks = [(c, f"{w} AND tenant_id = ?", [*p, subject.tenant]) for c, w, p in checks]
    return checks


def _exact(subject: Subject, table: str, columns: Collection[str]) -> Op[list[str]]:
    """Rows of ``table`` still naming the subject through a key column."""
    counts: dict[str, int] = {}
    for column, where, params in _checks(subject, table, columns):
        counts[column] = counts.get(column, 0) + (yield from _count(table, where, params))
    return [f"{table}.{c}: {n} rows name a deleted id" for c, n in counts.items() if n]


def _within(
    subject: Subject, table: str, columns: Collection[str]
) -> tuple[str, list[object]] | None:
    """The rows of ``table`` the anywhere-search reads (None: none): all of them for a
    user deletion; the owner's for the others (see the module's docstring). Message ids
    are unique per conversation only (another conversation may hold a message of the same
    id), so a message deletion's search keeps to the deleted messages' conversation, in
    the tables that name one."""
    if subject.kind == "user":
        return "", []
    if subject.kind == "message":
        cid = subject.subject_ids[0]
        if "conversation_id" in columns:
            return "conversation_id = ? AND ", [cid]
        if table == "conversations":
            return "id = ? AND ", [cid]
        return None
    if "tenant_id" in columns and "user_id" in columns:
        return "tenant_id = ? AND user_id = ? AND ", [subject.tenant, subject.user]
    if "conversation_id" in columns:
        cids = subject.conversation_ids
        deleted = f" OR conversation_id IN ({placeholders(len(cids))})" if cids else ""
        return (
            "(conversation_id IN (SELECT id FROM conversations WHERE tenant_id = ? AND "
            f"user_id = ?){deleted}) AND ",
            [subject.tenant, subject.user, *cids],
        )
    if "tenant_id" in columns:
        return "tenant_id = ? AND ", [subject.tenant]
    return None


def _anywhere(
    table: str, columns: Sequence[str], needles: Sequence[str], within: tuple[str, list[object]]
) -> Op[list[str]]:
    """Rows of ``table`` holding a deleted id anywhere (a column read as text). One read
    of the rows looks in every column at once; most tables hold nothing, and only one
    that does is read again column by column, to name where."""
    found: list[str] = []
    prefix, first = within
    patterns = [f"%{_escape(x)}%" for x in needles]
    for start in range(0, len(patterns), _CHUNK):
        batch = patterns[start : start + _CHUNK]
        where = " OR ".join(
            f"CAST(\"{column}\" AS TEXT) LIKE ? ESCAPE '\\'" for column in columns for _ in batch
        )
        params = [*first, *(p for _ in columns for p in batch)]
        if (yield from _count(table, f"{prefix}({where})", params)):
            break
    else:
        return found
    for column in columns:
        for start in range(0, len(needles), _CHUNK):
            chunk = needles[start : start + _CHUNK]
            where = " OR ".join(f"CAST(\"{column}\" AS TEXT) LIKE ? ESCAPE '\\'" for _ in chunk)
            params = [*first, *(f"%{_escape(x)}%" for x in chunk)]
            n = yield from _count(table, f"{prefix}({where})", params)
            if n:
                found.append(f"{table}.{column}: {n} rows contain a deleted id")
                break
    return found


def scan(dialect: str, subject: Subject, keeps_ids: Collection[str] = ()) -> Op[list[str]]:
    """Where anything of ``subject`` is left (empty: nothing)."""
    tables = yield from table_columns(dialect)
    needles = sorted({x for x in subject.searched_ids if len(x) >= _DISTINCT})
    found: list[str] = []
    for table, columns in sorted(tables.items()):
        if table in SKIPPED or table in keeps_ids:
            continue
        found += yield from _exact(subject, table, columns)
        within = _within(subject, table, columns)
        if needles and within is not None:
            found += yield from _anywhere(table, columns, needles, within)
    return found
