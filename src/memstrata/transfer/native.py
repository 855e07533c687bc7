"""memstrata's own export format: versioned JSON Lines, full fidelity, deterministic.

Line 1 is a header: ``{"format": "memstrata", "version": 1, "tables": {name: [columns]}}``.
Then one line per row, ``{"t": table, "r": [values]}``, tables in dependency order and
rows in a total order (serial ``seq`` order, else primary key), then one line per blob
of node memory, ``{"blob": key, "b64": data}``, sorted by key. Keys are sorted and
separators fixed, so the same store always gives the same bytes, and
export -> import into an empty store -> export gives them again.

Import is idempotent: ids are kept and a row that is already there is left alone.
Rows go in batches of :data:`BATCH` per transaction; the keyword index is rebuilt for
the imported messages afterwards (embeddings follow through recall as usual).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.errors import InvalidInput
from memstrata.storage.plan import Exec, Op, Query
from memstrata.transfer.tables import TABLES, TableSpec, with_clocks

__all__ = [
    "BATCH",
    "FORMAT",
    "VERSION",
    "ExportScope",
    "Header",
    "blob_prefixes",
    "dump_line",
    "export_rows",
    "header",
    "insert_rows",
    "parse_lines",
]

FORMAT = "memstrata"
VERSION = 1
BATCH = 500
_BY_NAME = {t.name: t for t in TABLES}


@dataclass(frozen=True, slots=True)
class ExportScope:
    """Everything (``tenant`` None), or one user's data (``tenant`` and ``user``)."""

    tenant: str | None = None
    user: str | None = None

    def __post_init__(self) -> None:
        if (self.tenant is None) != (self.user is None):
            raise InvalidInput("export one user with both tenant and user, or everything")

    def tables(self) -> list[TableSpec]:
        return [t for t in TABLES if self.tenant is None or t.user_filter is not None]


def dump_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _db_value(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    return value


def header(scope: ExportScope) -> dict[str, Any]:
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "tables": {t.name: list(t.columns) for t in scope.tables()},
    }
    if scope.tenant is not None:
        out["tenant"], out["user"] = scope.tenant, scope.user
    return out


def export_rows(scope: ExportScope, sink: Callable[[str], None], batch: int = BATCH) -> Op[int]:
    """Write every row of ``scope`` to ``sink`` as lines; returns how many.

    Runs in one read transaction, so the export is one consistent snapshot.
    """
    n = 0
    for spec in scope.tables():
        where, params = "", tuple[str, ...]()
        if scope.tenant is not None and scope.user is not None:
            where = f" WHERE {spec.user_filter}"
            params = spec.user_params(scope.tenant, scope.user)
        sql = f"SELECT {', '.join(spec.columns)} FROM {spec.name}{where} ORDER BY {spec.order}"
        offset = 0
        while True:
            rows = yield Query(f"{sql} LIMIT ? OFFSET ?", (*params, batch, offset))
            for row in rows:
                sink(dump_line({"t": spec.name, "r": [_json_value(v) for v in row]}))
            n += len(rows)
            offset += len(rows)
            if len(rows) < batch:
                break
    return n


def blob_prefixes(scope: ExportScope) -> Op[list[str]]:
    """The blob prefixes of the node memories in ``scope`` (every generation's objects)."""
    sql = "SELECT tenant_id, app_id, conversation_id, node_id FROM node_memories"
    params: tuple[str, ...] = ()
    if scope.tenant is not None and scope.user is not None:
        sql += " WHERE " + _BY_NAME["node_memories"].user_filter  # type: ignore[operator]
        params = (scope.tenant, scope.user)
    rows = yield Query(sql + " ORDER BY tenant_id, app_id, conversation_id, node_id", params)
    from memstrata.nodes.layout import ROOT

    return [f"{ROOT}/{t}/{a}/{c}/{n}/" for t, a, c, n in rows]


@dataclass(frozen=True, slots=True)
class Header:
    tables: dict[str, list[str]]
    tenant: str | None
    user: str | None


def _check_header(doc: Any) -> Header:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInput("not a memstrata export (its first line is no memstrata header)")
    if doc.get("version") != VERSION:
        raise InvalidInput(
            f"export version {doc.get('version')!r} is not supported (want {VERSION})"
        )
    tables = doc.get("tables")
    if not isinstance(tables, dict):
        raise InvalidInput("the export header lists no tables")
    for name, cols in tables.items():
        spec = _BY_NAME.get(name)
        if spec is None:
            raise InvalidInput(f"the export has an unknown table {name!r}")
        if not isinstance(cols, list) or not set(cols) <= set(spec.columns):
            raise InvalidInput(f"the export's columns of {name!r} are not this version's")
    return Header(tables, doc.get("tenant"), doc.get("user"))


Row = tuple[str, list[Any]]
Blob = tuple[str, bytes]


def parse_lines(lines: Iterable[str]) -> tuple[Header, Iterator[Row | Blob]]:
    """Check the header and return it with an iterator of rows and blobs (validated as
    they are read; a bad line raises InvalidInput naming its line number)."""
    it = _text(lines)
    try:
        first = next(it)
    except StopIteration:
        raise InvalidInput("the export is empty") from None
    head = _check_header(_loads(first, 1))

    def items() -> Iterator[Row | Blob]:
        for number, line in enumerate(it, 2):
            if not line.strip():
                continue
            doc = _loads(line, number)
            if isinstance(doc, dict) and "blob" in doc:
                key, data = doc.get("blob"), doc.get("b64")
                if not isinstance(key, str) or not isinstance(data, str):
                    raise InvalidInput(f"line {number}: a blob needs a key and b64 data")
                yield key, base64.b64decode(data)
                continue
            if not isinstance(doc, dict) or not isinstance(doc.get("r"), list):
                raise InvalidInput(f"line {number}: not a row")
            table = doc.get("t")
            cols = head.tables.get(table) if isinstance(table, str) else None
            if cols is None or len(doc["r"]) != len(cols):
                raise InvalidInput(f"line {number}: row of an unknown table or of the wrong width")
            yield str(table), [_db_value(v) for v in doc["r"]]

    return head, items()


def _text(lines: Iterable[str]) -> Iterator[str]:
    """The lines, with a file that is not UTF-8 reported as bad input."""
    source = iter(lines)
    while True:
        try:
            line = next(source)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"the export is not UTF-8 text: {exc.reason}") from None
        yield line


def _loads(line: str, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise InvalidInput(f"line {number}: not JSON ({exc})") from None


def insert_rows(dialect: str, head: Header, rows: Sequence[Row]) -> Op[int]:
    """Insert a batch of rows, leaving rows that exist alone; returns how many were new."""
    same = "IS" if dialect == "sqlite" else "IS NOT DISTINCT FROM"
    added = 0
    for table, given in rows:
        cols, values = with_clocks(table, head.tables[table], given)
        names = ", ".join(cols)
        if _BY_NAME[table].keyed:
            marks = ", ".join("?" * len(cols))
            sql = f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
            added += yield Exec(sql, values)
            continue
        match = " AND ".join(f"{c} {same} ?" for c in cols)
        rows_there = yield Query(f"SELECT 1 FROM {table} WHERE {match} LIMIT 1", values)
        if not rows_there:
            marks = ", ".join("?" * len(cols))
            added += yield Exec(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)
    return added
