"""Sealing a store written before encryption at rest was on (``memstrata encrypt --all``).

Each batch is one transaction: it seals the texts of the next messages in clear (content,
files, tool calls, metadata) for their conversation's owner, and rewrites their
keyword-index rows as hashed terms; then the same for facts (text and ``content_key``,
with their earlier versions and history events); then every other sealed column
(:data:`COLUMNS`: titles, profile sections, summaries, agent state, graph checkpoints and
store items, context records, iteration and extraction logs), each bound to its row as
the feature that writes it binds it. Sealed values are skipped, so an interrupted run is
resumed by running it again. Run with the sealer active (a store opened with encryption on).

What a store held in clear may survive in free database pages and old row versions until
they are reused: run ``VACUUM`` (SQLite) or ``VACUUM FULL`` (PostgreSQL) afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.errors import ConfigurationError
from memstrata.graph.checkpoints import graph_row
from memstrata.graph.items import TENANT_OWNER, item_row
from memstrata.longterm.branchfacts import BRANCH_ABANDONED
from memstrata.longterm.consolidate import marker
from memstrata.longterm.rows import seal_fact, section_row, stored_key
from memstrata.recall.text import document_text
from memstrata.sealing import (
    BYTES_PREFIX,
    PREFIX,
    active,
    index_terms,
    is_sealed,
    seal,
    seal_bytes,
)
from memstrata.state.checkpoints import checkpoint_row, snapshot_row
from memstrata.state.iterations import iteration_row
from memstrata.state.working import working_row
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import MESSAGE_COLUMNS, seal_message_texts, to_message
from memstrata.types import Scope

__all__ = [
    "COLUMNS",
    "SealedColumn",
    "clear_values",
    "merge_keyword_index",
    "seal_column",
    "seal_facts",
    "seal_messages",
]

_COLS = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))


def seal_messages(dialect: str, after_seq: int, limit: int) -> Op[tuple[int, int, int]]:
    """Seal the clear messages among the next ``limit`` after ``after_seq``; returns (the
    last seq read, messages read, messages sealed). Read 0: the store is done."""
    if active() is None:
        raise ConfigurationError("memstrata encrypt needs MEMSTRATA_ENCRYPT_AT_REST=true")
    rows = yield Query(
        f"SELECT m.seq, c.tenant_id, c.user_id, {_COLS} FROM messages m "
        "JOIN conversations c ON c.id = m.conversation_id WHERE m.seq > ? "
        "ORDER BY m.seq LIMIT ?",
        (after_seq, limit),
    )
    sealed = 0
    for r in rows:
        seq, tenant, user, row = int(r[0]), str(r[1]), str(r[2]), r[3:]
        texts = (*row[4:7], row[9])  # content, files, tool calls, metadata
        if not any(v and not is_sealed(v) for v in texts):
            continue
        # A value sealed already is kept as it is (seal would wrap it again).
        sealed_texts = seal_message_texts(tenant, user, row[1], row[0], *texts)
        kept = [v if is_sealed(v) else s for v, s in zip(texts, sealed_texts, strict=True)]
        yield Exec(
            "UPDATE messages SET content = ?, files = ?, tool_calls = ?, metadata = ? "
            "WHERE seq = ?",
            (*kept, seq),
        )
        if is_sealed(row[4]):
            sealed += 1  # only its metadata was in clear: the index holds hashes already
            continue
        text = document_text(to_message(row))
        body = index_terms(tenant, user, text, owner_tokens=dialect == "sqlite")
        if dialect == "sqlite":
            # Only a row the full-text index already holds is rewritten (one still waiting
            # is flushed later, hashed, by the index itself).
            gone = yield Exec("DELETE FROM recall_terms WHERE rowid = ?", (seq,))
            if gone:
                yield Exec("INSERT INTO recall_terms (rowid, body) VALUES (?, ?)", (seq, body))
        else:
            yield Exec(
                "UPDATE recall_docs SET tsv = to_tsvector('english', ?) "
                "WHERE seq = ? AND tsv IS NOT NULL",
                (body, seq),
            )
        sealed += 1
    last = int(rows[-1][0]) if rows else after_seq
    return last, len(rows), sealed


def seal_facts(after_seq: int, limit: int) -> Op[tuple[int, int, int]]:
    """Seal the clear facts among the next ``limit`` after ``after_seq`` (text and
    ``content_key``), with their version rows and history events; returns (the last seq
    read, facts read, facts sealed). Read 0: the store is done."""
    if active() is None:
        raise ConfigurationError("memstrata encrypt needs MEMSTRATA_ENCRYPT_AT_REST=true")
    rows = yield Query(
        "SELECT seq, id, tenant_id, user_id, content FROM facts WHERE seq > ? ORDER BY seq LIMIT ?",
        (after_seq, limit),
    )
    sealed = 0
    for seq, fact_id, tenant, user, content in rows:
        owner = Scope(tenant, user)
        if not is_sealed(content):
            yield Exec(
                "UPDATE facts SET content = ?, content_key = ? WHERE seq = ?",
                (seal_fact(owner, fact_id, content), stored_key(owner, content), seq),
            )
            sealed += 1
        versions = yield Query(
            "SELECT superseded_at, content FROM fact_versions WHERE id = ?", (fact_id,)
        )
        for at, text in versions:
            if not is_sealed(text):
                yield Exec(
                    "UPDATE fact_versions SET content = ?, content_key = ? "
                    "WHERE id = ? AND superseded_at = ?",
                    (seal_fact(owner, fact_id, text), stored_key(owner, text), fact_id, at),
                )
        events = yield Query(
            "SELECT seq, event, at, content FROM fact_events WHERE fact_id = ?", (fact_id,)
        )
        for event_seq, event, at, text in events:
            if text and not is_sealed(text):
                row = f"{fact_id}/{event}/{at}"
                yield Exec(
                    "UPDATE fact_events SET content = ? WHERE seq = ?",
                    (seal("fact_events.content", row, tenant, user, text), event_seq),
                )
    last = int(rows[-1][0]) if rows else after_seq
    return last, len(rows), sealed


def merge_keyword_index(dialect: str) -> Op[None]:
    """Merge SQLite's full-text segments into one, so the plain terms of rewritten rows
    leave the index (a deleted FTS5 row's terms stay in its segment until a merge)."""
    if dialect == "sqlite":
        yield Exec("INSERT INTO recall_terms (recall_terms) VALUES ('optimize')")


Bind = Callable[[dict[str, Any]], str]


@dataclass(frozen=True, slots=True)
class SealedColumn:
    """One column a feature seals, and how: ``key`` is the table's primary key (the batches
    walk it in order), ``owner`` where the owner's names come from (``row``: the table's
    ``tenant_id`` and ``user_id``; ``conversation``: the conversation the row is under;
    ``tenant``: the tenant's own key), ``bind`` the row id the feature binds the value to,
    from the named columns (``key`` and ``extra``, and ``tenant``/``user``), and ``ad`` the
    table and column it is bound to when not this one (version rows keep their section's)."""

    table: str
    column: str
    key: tuple[str, ...]
    owner: str
    bind: Bind
    extra: tuple[str, ...] = ()
    ad: str | None = None
    binary: bool = False
    #: (the part left in clear, the part to seal) of a value; None: all of it is sealed.
    split: Callable[[str], tuple[str, str]] | None = None

    @property
    def name(self) -> str:
        return f"{self.table}.{self.column}"


def _scope(r: dict[str, Any]) -> Scope:
    return Scope(r["tenant"], r["user"], r["agent_id"] or None)


_OWNED = ("tenant_id", "user_id", "agent_id")
_PROFILE = (*_OWNED, "section")
_GRAPH = (*_OWNED, "thread_id", "checkpoint_ns", "checkpoint_id")


def _section(r: dict[str, Any]) -> str:
    return section_row(_scope(r), r["section"])


def _graph(r: dict[str, Any]) -> str:
    return graph_row(_scope(r), r["checkpoint_ns"], r["checkpoint_id"])


def _by_id(r: dict[str, Any]) -> str:
    return str(r["id"])


def _iteration(r: dict[str, Any]) -> str:
    return iteration_row(r["conversation_id"], r["task"], r["attempt"], r["created_at"])


_ITERATION = ("conversation_id", "task", "attempt", "created_at")

# A consolidation's marker (its id between these two), which revert matches in SQL.
_MARK = marker("\x00").split("\x00")
_MARKED = re.compile(re.escape(_MARK[0]) + "[^:]*" + re.escape(_MARK[1]) + " ")


def _reason_split(reason: str) -> tuple[str, str]:
    """A fact's reason as (what stays in clear, what is sealed), as the writers split it:
    a withdrawn branch's marker whole, a consolidation's marker before the model's words."""
    if reason == BRANCH_ABANDONED:
        return reason, ""
    marked = _MARKED.match(reason)
    if marked:
        return marked.group(0), reason[marked.end() :]
    return "", reason


def _event(r: dict[str, Any]) -> str:
    return f"{r['fact_id']}/{r['event']}/{r['at']}"


_FACT_VERSION = ("id", "superseded_at")

#: Every column sealed under encryption at rest besides messages and facts (which have
#: passes of their own: the keyword index and the duplicate key go with them).
COLUMNS: tuple[SealedColumn, ...] = (
    SealedColumn("conversations", "title", ("id",), "row", _by_id),
    SealedColumn("conversations", "metadata", ("id",), "row", _by_id),
    SealedColumn("profile_sections", "summary", _PROFILE, "row", _section),
    SealedColumn(
        "profile_section_versions",
        "summary",
        (*_PROFILE, "superseded_at"),
        "row",
        _section,
        ad="profile_sections.summary",
    ),
    SealedColumn("summaries", "content", ("id",), "conversation", _by_id),
    SealedColumn(
        "working_memory",
        "content",
        (*_OWNED, "conversation_id"),
        "row",
        lambda r: working_row(_scope(r), r["conversation_id"]),
    ),
    SealedColumn(
        "plans", "document", ("conversation_id",), "conversation", lambda r: r["conversation_id"]
    ),
    SealedColumn(
        "run_snapshots",
        "data",
        ("conversation_id", "run_id"),
        "conversation",
        lambda r: snapshot_row(r["conversation_id"], r["run_id"]),
    ),
    SealedColumn(
        "checkpoints",
        "state",
        (*_OWNED, "name", "run_id"),
        "row",
        lambda r: checkpoint_row(_scope(r), r["name"], r["run_id"]),
    ),
    SealedColumn("iteration_logs", "error", ("seq",), "conversation", _iteration, _ITERATION),
    SealedColumn("iteration_logs", "detail", ("seq",), "conversation", _iteration, _ITERATION),
    SealedColumn("context_records", "report", ("seq",), "row", _by_id, ("id",)),
    SealedColumn("longterm_updates", "notes", ("seq",), "row", _by_id, ("id",)),
    SealedColumn("longterm_updates", "raw_output", ("seq",), "row", _by_id, ("id",)),
    SealedColumn("longterm_updates", "error", ("seq",), "row", _by_id, ("id",)),
    SealedColumn("facts", "reason", ("seq",), "row", _by_id, ("id",), split=_reason_split),
    SealedColumn("facts", "source_error", ("seq",), "row", _by_id, ("id",)),
    SealedColumn(
        "fact_versions",
        "reason",
        _FACT_VERSION,
        "row",
        _by_id,
        ad="facts.reason",
        split=_reason_split,
    ),
    SealedColumn(
        "fact_versions", "source_error", _FACT_VERSION, "row", _by_id, ad="facts.source_error"
    ),
    SealedColumn("fact_events", "reason", ("seq",), "row", _event, ("fact_id", "event", "at")),
    SealedColumn("graph_checkpoints", "checkpoint", _GRAPH, "row", _graph, binary=True),
    SealedColumn("graph_checkpoints", "metadata", _GRAPH, "row", _graph, binary=True),
    SealedColumn(
        "graph_writes",
        "value",
        (*_GRAPH, "task_id", "idx"),
        "row",
        lambda r: graph_row(
            _scope(r), r["checkpoint_ns"], r["checkpoint_id"], r["task_id"], r["idx"]
        ),
        binary=True,
    ),
    SealedColumn(
        "graph_items",
        "value",
        ("tenant_id", "agent_id", "namespace", "item_key"),
        "tenant",
        lambda r: item_row(r["agent_id"], r["namespace"], r["item_key"]),
    ),
)

_OWNERS = {
    "row": ("t.tenant_id", "t.user_id", ""),
    "tenant": ("t.tenant_id", "t.tenant_id", ""),  # the user is TENANT_OWNER
    "conversation": (
        "c.tenant_id",
        "c.user_id",
        " JOIN conversations c ON c.id = t.conversation_id",
    ),
}


def _clear(value: object) -> bool:
    """A value stored in clear (something to seal): nothing of it sealed yet (a marker
    may precede the sealed part)."""
    if isinstance(value, str):
        return bool(value) and PREFIX not in value
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return bool(data) and not data.startswith(BYTES_PREFIX)
    return False


def seal_column(
    spec: SealedColumn, after: Sequence[Any] | None, limit: int
) -> Op[tuple[tuple[Any, ...] | None, int, int]]:
    """Seal the clear values of ``spec`` among the next ``limit`` rows after the key
    ``after`` (None: from the start); returns (the last key read, rows read, values
    sealed). Read 0: the column is done."""
    if active() is None:
        raise ConfigurationError("memstrata encrypt needs MEMSTRATA_ENCRYPT_AT_REST=true")
    tenant, user, join = _OWNERS[spec.owner]
    names = list(dict.fromkeys((*spec.key, *spec.extra)))
    cols = ", ".join(f"t.{n}" for n in names)
    keys = ", ".join(f"t.{k}" for k in spec.key)
    where = ""
    params: list[Any] = []
    if after is not None:
        marks = ", ".join("?" * len(spec.key))
        where = f" WHERE ({keys}) > ({marks})" if len(spec.key) > 1 else f" WHERE {keys} > ?"
        params.extend(after)
    rows = yield Query(
        f"SELECT {cols}, {tenant}, {user}, t.{spec.column} FROM {spec.table} t{join}{where} "
        f"ORDER BY {keys} LIMIT ?",
        (*params, limit),
    )
    sealed = 0
    ad = spec.ad or spec.name
    match = " AND ".join(f"{k} = ?" for k in spec.key)
    for row in rows:
        value = row[-1]
        if not _clear(value):
            continue
        r = dict(zip(names, row, strict=False))
        r["tenant"], r["user"] = str(row[len(names)]), str(row[len(names) + 1])
        if spec.owner == "tenant":
            r["user"] = TENANT_OWNER
        bound = spec.bind(r)
        if spec.binary:
            stored: Any = seal_bytes(ad, bound, r["tenant"], r["user"], bytes(value))
        else:
            keep, words = spec.split(value) if spec.split else ("", value)
            if not words:
                continue  # a marker alone: nothing of the user's
            stored = keep + str(seal(ad, bound, r["tenant"], r["user"], words))
        yield Exec(
            f"UPDATE {spec.table} SET {spec.column} = ? WHERE {match}",
            (stored, *(r[k] for k in spec.key)),
        )
        sealed += 1
    last = tuple(rows[-1][: len(spec.key)]) if rows else None
    return last, len(rows), sealed


def clear_values() -> Op[dict[str, int]]:
    """How many values of each column of :data:`COLUMNS` are stored in clear (what
    ``seal_column`` would seal), for ``memstrata doctor``; columns with none are left out.
    Counted in SQL, a marker memstrata keeps in clear (a withdrawn branch's reason) aside."""
    out: dict[str, int] = {}
    for spec in COLUMNS:
        col = spec.column
        params: tuple[Any, ...]
        if spec.binary:
            where, params = f"substr({col}, 1, {len(PREFIX)}) <> ?", (BYTES_PREFIX,)
        elif spec.split is not None:
            where, params = f"{col} NOT LIKE ? AND {col} <> ?", (f"%{PREFIX}%", BRANCH_ABANDONED)
        else:
            where, params = f"substr({col}, 1, {len(PREFIX)}) <> ?", (PREFIX,)
        rows = yield Query(
            f"SELECT count(*) FROM {spec.table} WHERE length({col}) > 0 AND {where}", params
        )
        if int(rows[0][0]):
            out[spec.name] = int(rows[0][0])
    return out
