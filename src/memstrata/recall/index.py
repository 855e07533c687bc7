"""Recall's storage operations (sans-IO): the keyword index, embedding bookkeeping, cascade.

The keyword index is the one place where the two SQL dialects differ (SQLite FTS5
with bm25, PostgreSQL full text with ``ts_rank_cd``); :data:`_SQL` holds those few
statements per dialect and every operation takes the engine's ``dialect``.
Everything else is the shared SQL subset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from memstrata.errors import ConfigurationError
from memstrata.recall.scoring import (
    COVERAGE_CORPUS,
    DocMatch,
    Matches,
    TermWindows,
    idf,
    score_docs,
    session_ranks,
)
from memstrata.recall.text import INDEXED_ROLES, document_text
from memstrata.sealing import index_terms, query_terms
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import MESSAGE_COLUMNS, to_message
from memstrata.types import Message, Scope

__all__ = [
    "DOC_COLUMNS",
    "KeywordHit",
    "KeywordHits",
    "count_waiting",
    "delete_for_conversations",
    "delete_for_user",
    "doc_row",
    "docs_by_message_id",
    "index_message",
    "indexable",
    "keyword_search",
    "mark_embedded",
    "pending",
    "stored_vector",
    "term_postings",
    "unindexed",
]

_BATCH = 500

_SQL: dict[str, dict[str, str]] = {
    "sqlite": {
        # A token is one word of one owner (see memstrata.sealing), so a term's rows are
        # its owner's messages holding it, and nothing else.
        "insert_keywords": "INSERT INTO recall_terms (rowid, body) VALUES (?, ?)",
        # Which of the scope's messages hold a term, newest first: no bm25(), whose
        # statistics span the whole store (see recall/scoring.py).
        "postings": (
            "SELECT d.seq, d.message_id, d.conversation_id, d.token_count, d.occurred_at "
            "FROM recall_terms JOIN recall_docs d ON d.seq = recall_terms.rowid "
            "WHERE recall_terms MATCH ? AND {scope} ORDER BY recall_terms.rowid DESC LIMIT ?"
        ),
        # How many of the owner's messages hold a term, up to a cap: the full-text index
        # alone, no row of another table read.
        "probe": (
            "SELECT count(*) FROM (SELECT 1 FROM recall_terms WHERE recall_terms MATCH ? LIMIT ?)"
        ),
        "delete_conversations": (
            "DELETE FROM recall_terms WHERE rowid IN "
            "(SELECT seq FROM recall_docs WHERE conversation_id IN ({ids}))"
        ),
        "delete_user": (
            "DELETE FROM recall_terms WHERE rowid IN "
            "(SELECT seq FROM recall_docs WHERE tenant_id = ? AND user_id = ?)"
        ),
        "delete_messages": (
            "DELETE FROM recall_terms WHERE rowid IN "
            "(SELECT seq FROM recall_docs WHERE conversation_id = ? AND message_id IN ({ids}))"
        ),
    },
    "postgres": {
        "insert_keywords": "UPDATE recall_docs SET tsv = to_tsvector('english', ?) WHERE seq = ?",
        "postings": (
            "SELECT d.seq, d.message_id, d.conversation_id, d.token_count, d.occurred_at "
            "FROM recall_docs d, to_tsquery('english', ?) q "
            "WHERE d.tsv @@ q AND {scope} ORDER BY d.seq DESC LIMIT ?"
        ),
        "probe": (
            "SELECT count(*) FROM (SELECT 1 FROM recall_docs d, to_tsquery('english', ?) q "
            "WHERE d.tsv @@ q AND {scope} LIMIT ?) t"
        ),
    },
}


def _sql(dialect: str, name: str) -> str | None:
    try:
        return _SQL[dialect].get(name)
    except KeyError:
        raise ConfigurationError(f"recall has no keyword index for {dialect!r}") from None


def _scope_sql(scope: Scope) -> tuple[str, list[Any]]:
    sql = "d.tenant_id = ? AND d.user_id = ?"
    params: list[Any] = [scope.tenant, scope.user]
    if scope.agent is not None:
        sql += " AND d.agent_id = ?"
        params.append(scope.agent)
    return sql, params


def _ph(n: int) -> str:
    return ", ".join("?" * n)


# -- writing -------------------------------------------------------------------------------


#: The columns of a ``recall_docs`` row as :func:`doc_row` gives them.
DOC_COLUMNS = (
    "seq, message_id, conversation_id, tenant_id, user_id, agent_id, occurred_at, token_count"
)


def indexable(message: Message) -> bool:
    """Whether :func:`doc_row` has a row for ``message`` (without building its text: an
    append that defers its row asks only this)."""
    if message.role not in INDEXED_ROLES:
        return False
    return any(p.strip() for p in (message.content, *(c.function.name for c in message.tool_calls)))


def doc_row(owner: Scope, message: Message) -> tuple[tuple[Any, ...], str] | None:
    """The ``recall_docs`` row of ``message`` (:data:`DOC_COLUMNS`) and the text its
    keywords come from; None when it has nothing to index. ``owner`` is the
    conversation's scope (with its agent)."""
    if message.role not in INDEXED_ROLES:
        return None
    text = document_text(message)
    if not text.strip():
        return None
    row = (
        message.seq,
        message.id,
        message.conversation_id,
        owner.tenant,
        owner.user,
        owner.agent_key,
        int(message.occurred_at.timestamp() * 1_000_000),
        message.token_count,
    )
    return row, text


def index_message(dialect: str, owner: Scope, message: Message) -> Op[bool]:
    """Add ``message`` to the keyword index (once): its ``recall_docs`` row and its
    keywords; False when it has nothing to index or was indexed already.

    ``owner`` is the conversation's scope (with its agent), taken from the writer.
    """
    doc = doc_row(owner, message)
    if doc is None:
        return False
    row, text = doc
    n = yield Exec(
        f"INSERT INTO recall_docs ({DOC_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        row,
    )
    if not n:
        return False
    insert = _sql(dialect, "insert_keywords")
    assert insert is not None
    sqlite = dialect == "sqlite"
    body = index_terms(owner.tenant, owner.user, text, owner_tokens=sqlite)
    yield Exec(insert, (message.seq, body) if sqlite else (body, message.seq))
    return True


def unindexed(after_seq: int, limit: int) -> Op[list[tuple[Message, Scope]]]:
    """Complete messages with no recall row (stored before recall indexed them), with
    their conversation's owner, oldest first."""
    cols = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
    rows = yield Query(
        f"SELECT {cols}, c.tenant_id, c.user_id, c.agent_id FROM messages m "
        "JOIN conversations c ON c.id = m.conversation_id WHERE m.seq > ? "
        "AND m.status = 'complete' "
        "AND NOT EXISTS (SELECT 1 FROM recall_docs d WHERE d.seq = m.seq) ORDER BY m.seq LIMIT ?",
        (after_seq, limit),
    )
    return [(to_message(r[:-3]), Scope(r[-3], r[-2], r[-1] or None)) for r in rows]


def index_many(dialect: str, batch: Sequence[tuple[Message, Scope]]) -> Op[int]:
    n = 0
    for message, owner in batch:
        n += bool((yield from index_message(dialect, owner, message)))
    return n


@dataclass(frozen=True, slots=True)
class PendingDoc:
    """A message waiting for (re-)embedding, with the scope that owns it."""

    message: Message
    owner: Scope


def pending(
    *,
    scope: Scope | None = None,
    conversation_id: str | None = None,
    embedder: str | None = None,
    after_seq: int = 0,
    before_seq: int | None = None,
    limit: int = 256,
    newest_first: bool = False,
) -> Op[list[PendingDoc]]:
    """Messages not yet embedded (``embedder=None``) or embedded in another space than
    ``embedder`` (a reindex), oldest first (or ``newest_first``, below ``before_seq``),
    of one scope and/or one conversation."""
    where = ["d.seq > ?"]
    params: list[Any] = [after_seq]
    if before_seq is not None:
        where.append("d.seq < ?")
        params.append(before_seq)
    if embedder is None:
        where.append("d.embedder IS NULL")
    else:
        where.append("(d.embedder IS NULL OR d.embedder <> ?)")
        params.append(embedder)
    if scope is not None:
        sql, extra = _scope_sql(scope)
        where.append(sql)
        params += extra
    if conversation_id is not None:
        where.append("d.conversation_id = ?")
        params.append(conversation_id)
    cols = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
    order = "DESC" if newest_first else ""
    rows = yield Query(
        f"SELECT {cols}, d.tenant_id, d.user_id, d.agent_id FROM recall_docs d "
        f"JOIN messages m ON m.seq = d.seq WHERE {' AND '.join(where)} "
        f"ORDER BY d.seq {order} LIMIT ?",
        (*params, limit),
    )
    return [PendingDoc(to_message(r[:-3]), Scope(r[-3], r[-2], r[-1] or None)) for r in rows]


def count_waiting(scope: Scope) -> Op[int]:
    """How many of ``scope``'s messages have no vector yet (the partial index of
    migration 25 holds only those, so this reads nothing else)."""
    where, params = _scope_sql(scope)
    rows = yield Query(
        f"SELECT count(*) FROM recall_docs d WHERE {where} AND d.embedder IS NULL", params
    )
    return int(rows[0][0])


def count_pending(scope: Scope | None, embedder: str) -> Op[int]:
    sql = "SELECT count(*) FROM recall_docs d WHERE (d.embedder IS NULL OR d.embedder <> ?)"
    params: list[Any] = [embedder]
    if scope is not None:
        where, extra = _scope_sql(scope)
        sql += f" AND {where}"
        params += extra
    rows = yield Query(sql, params)
    return int(rows[0][0])


def docs_by_message_id(scope: Scope, ids: Sequence[str]) -> Op[dict[str, list[tuple[str, bool]]]]:
    """For each of ``ids`` that ``scope`` owns: its conversations (ids are unique per
    conversation only) and whether each has a vector."""
    out: dict[str, list[tuple[str, bool]]] = {}
    where, params = _scope_sql(scope)
    for start in range(0, len(ids), _BATCH):
        batch = list(ids[start : start + _BATCH])
        rows = yield Query(
            f"SELECT d.message_id, d.conversation_id, d.embedder IS NOT NULL FROM recall_docs d "
            f"WHERE d.message_id IN ({_ph(len(batch))}) AND {where}",
            (*batch, *params),
        )
        for mid, conv, embedded in rows:
            out.setdefault(mid, []).append((conv, bool(embedded)))
    return out


def mark_embedded(seqs: Sequence[int], embedder: str) -> Op[None]:
    for start in range(0, len(seqs), _BATCH):
        batch = list(seqs[start : start + _BATCH])
        yield Exec(
            f"UPDATE recall_docs SET embedder = ? WHERE seq IN ({_ph(len(batch))})",
            (embedder, *batch),
        )


# -- reading -------------------------------------------------------------------------------


class KeywordHit(NamedTuple):
    """One keyword match (a tuple, like :class:`scoring.ScoredDoc`: a few hundred a search)."""

    message_id: str
    conversation_id: str
    score: float
    #: Share of the query's idf mass the message matches (0..1).
    coverage: float = 0.0


class KeywordHits(list[KeywordHit]):
    """Keyword matches, best first, and beside them ``sessions``: the rank of each session
    (conversation id, second) the query's terms fall in (:func:`scoring.session_ranks`),
    and ``windows``: the terms each message holds, to score any message by its window's
    (:class:`scoring.TermWindows`; None unless asked for)."""

    sessions: dict[tuple[str, int], int]
    windows: TermWindows | None

    def __init__(
        self,
        hits: Sequence[KeywordHit] = (),
        sessions: dict[tuple[str, int], int] | None = None,
        windows: TermWindows | None = None,
    ) -> None:
        super().__init__(hits)
        self.sessions = sessions or {}
        self.windows = windows


def _term_query(dialect: str, term: str) -> str:
    if dialect == "sqlite":
        # A quoted string is a plain token to FTS5 (no operators): the owner's word.
        return '"' + term.replace('"', '""') + '"'
    # to_tsquery syntax; terms are word characters only (see text.analyse_query).
    return "'" + term.replace("'", "''").replace("\\", "") + "'"


def _term_rows(
    dialect: str, name: str, scope: Scope, term: str, cap: int, conversation_id: str | None
) -> Op[list[Row]]:
    """Run the dialect's ``name`` statement for one term of ``scope``'s messages (of one
    conversation, when given); SQLite's probe filters by the owner token alone."""
    where, params = _scope_sql(scope)
    if conversation_id is not None:
        where += " AND d.conversation_id = ?"
        params.append(conversation_id)
    if dialect == "sqlite" and name == "probe":
        params = []
    sql = _sql(dialect, name)
    assert sql is not None
    (term,) = query_terms(scope.tenant, scope.user, (term,), owner_tokens=dialect == "sqlite")
    query = _term_query(dialect, term)
    rows: list[Row] = yield Query(sql.format(scope=where), (query, *params, cap))
    return rows


def term_postings(
    dialect: str,
    scope: Scope,
    term: str,
    cap: int,
    *,
    conversation_id: str | None = None,
) -> Op[list[DocMatch]]:
    """The scope's newest messages holding ``term``, at most ``cap`` (so the read is
    bounded; ``cap`` rows back means the term is at least that common in the scope)."""
    rows = yield from _term_rows(dialect, "postings", scope, term, cap, conversation_id)
    return _matches(rows)


def _matches(rows: Sequence[Row]) -> list[DocMatch]:
    return [DocMatch(int(s), m, c, int(t), int(at) // 1_000_000) for s, m, c, t, at in rows]


def _held(
    dialect: str, scope: Scope, term: str, cap: int, conversation_id: str | None
) -> Op[int | None]:
    """How many of the scope's messages hold ``term``, counted up to ``cap`` from the
    keyword index alone (a third of a postings read on SQLite); None where the index
    alone cannot tell (SQLite, with an agent or a conversation to keep to)."""
    if dialect == "sqlite" and (scope.agent is not None or conversation_id is not None):
        return None
    rows = yield from _term_rows(dialect, "probe", scope, term, cap, conversation_id)
    return int(rows[0][0])


def keyword_search(
    dialect: str,
    scope: Scope,
    terms: Sequence[str],
    limit: int,
    *,
    conversation_id: str | None = None,
    cap: int = 1000,
    drop_common: bool = False,
    windows: bool = False,
    sessions: bool = True,
) -> Op[KeywordHits]:
    """Best ``limit`` keyword matches of ``scope`` (any of ``terms``), best first, scored
    from the scope's own statistics (see :mod:`memstrata.recall.scoring`).

    A term held by ``cap`` or more of the scope's messages is read only up to ``cap``
    (newest first), or left out with ``drop_common`` (it costs the most and tells the
    least); either way the decision depends on the caller's own messages only. With
    ``windows``, what is needed to score a message by its window's terms comes too;
    without ``sessions``, no session is ranked (a fusion that gives them no weight: the
    ranking costs about as much as scoring the messages).
    """
    unique = list(dict.fromkeys(terms))
    if dialect == "sqlite":
        matches = yield from _sqlite_matches(scope, unique, cap, drop_common, conversation_id)
    else:
        matches = yield from _matches_by_term(
            dialect, scope, unique, cap, drop_common, conversation_id
        )
    dropped = sum(idf(cap, COVERAGE_CORPUS) for df in matches.df if df is None)
    scored = score_docs(matches, dropped, limit)
    return KeywordHits(
        [KeywordHit(d.message_id, d.conversation_id, d.score, d.coverage) for d in scored],
        session_ranks(matches) if sessions else None,
        TermWindows(matches) if windows else None,
    )


def _matches_by_term(
    dialect: str,
    scope: Scope,
    terms: Sequence[str],
    cap: int,
    drop_common: bool,
    conversation_id: str | None,
) -> Op[Matches]:
    """:class:`Matches` from one posting list per term (after its count, when common
    terms are dropped and the index alone can count them)."""
    postings: dict[str, list[DocMatch]] = {}
    unread: set[str] = set()
    for term in terms:
        if drop_common:
            held = yield from _held(dialect, scope, term, cap, conversation_id)
            if held is not None and held >= cap:  # common: known without reading its rows
                postings[term] = []
                unread.add(term)
                continue
        docs = yield from term_postings(dialect, scope, term, cap, conversation_id=conversation_id)
        if drop_common and len(docs) >= cap:
            docs = []
            unread.add(term)
        postings[term] = docs
    return Matches.of(postings, unread)


#: Terms per full-text statement: their bit masks must fit SQLite's 64-bit integers.
_TERMS_PER_STATEMENT = 60


def _sqlite_matches(
    scope: Scope, terms: Sequence[str], cap: int, drop_common: bool, conversation_id: str | None
) -> Op[Matches]:
    """:class:`Matches` from SQLite in one statement (per 60 terms): each term's newest
    ``cap`` rows of the full-text index, the messages that hold any of them once each,
    with the bit mask of the terms they hold (a sum: a row holds a term once), and a
    marker row (seq NULL) for each term too common to read (``drop_common``)."""
    docs: list[DocMatch] = []
    unread: set[int] = set()
    tokens = query_terms(scope.tenant, scope.user, terms, owner_tokens=True)
    for start in range(0, len(terms), _TERMS_PER_STATEMENT):
        chunk = tokens[start : start + _TERMS_PER_STATEMENT]
        queries = [_term_query("sqlite", t) for t in chunk]
        sql, params = _matches_sql(scope, queries, cap, drop_common, conversation_id)
        rows: list[Row] = yield Query(sql, params)
        # Rows come in DocMatch's field order; a NULL seq marks a term too common to read.
        unread.update(start + r[5] for r in rows if r[0] is None)
        found = [r for r in rows if r[0] is not None]
        if start:
            found = [(*r[:5], r[5] << start) for r in found]
        docs.extend(map(_as_doc, found))
    # A message comes once per statement: more than one statement may repeat it.
    return Matches.counted(docs, len(terms), unread, merge=len(terms) > _TERMS_PER_STATEMENT)


#: A row of the statement below as a :class:`DocMatch` (no Python-level call per row).
_as_doc = partial(tuple.__new__, DocMatch)


#: A message's whole second (:func:`scoring.second_of`: floored, also before 1970).
_SECOND = (
    "CASE WHEN d.occurred_at >= 0 THEN d.occurred_at / 1000000 "
    "ELSE -((999999 - d.occurred_at) / 1000000) END"
)


def _matches_sql(
    scope: Scope,
    queries: Sequence[str],
    cap: int,
    drop_common: bool,
    conversation_id: str | None,
) -> tuple[str, list[Any]]:
    where, scope_params = _scope_sql(scope)
    if conversation_id is not None:
        where += " AND d.conversation_id = ?"
        scope_params.append(conversation_id)
    # The owner alone is the scope when no agent or conversation narrows it: each term's
    # rows (its tokens name the owner) then come from the full-text index alone (counted
    # there too).
    owner_only = scope.agent is None and conversation_id is None
    if owner_only:
        # Newest first when a term is read up to the cap. When a term that reaches it is
        # dropped instead, the rows kept are all of the term's, and the index's own
        # order (ascending: no reversal of its posting list) reads the same rows for less.
        order = "" if drop_common else " ORDER BY rowid DESC"
        each = f"SELECT rowid FROM recall_terms WHERE recall_terms MATCH ?{order} LIMIT ?"
    else:
        # Ordered by the index's rowid, so the planner starts from the index (left to
        # itself it scans the owner's messages and matches each).
        each = (
            "SELECT recall_terms.rowid FROM recall_terms "
            "JOIN recall_docs d ON d.seq = recall_terms.rowid "
            f"WHERE recall_terms MATCH ? AND {where} ORDER BY recall_terms.rowid DESC LIMIT ?"
        )
    params: list[Any] = []
    ctes: list[str] = []
    for i, query in enumerate(queries):
        ctes.append(f"f{i}(rowid) AS MATERIALIZED ({each})")
        params += [query, *([] if owner_only else scope_params), cap]
    keep = " WHERE (SELECT count(*) FROM f{i}) < ?" if drop_common else ""
    union = " UNION ALL ".join(
        f"SELECT rowid, {1 << i} FROM f{i}" + keep.format(i=i) for i in range(len(queries))
    )
    if drop_common:
        params += [cap] * len(queries)
    sql = (
        f"WITH {', '.join(ctes)}, u(seq, bit) AS ({union}), "
        "g(seq, mask) AS (SELECT seq, sum(bit) FROM u GROUP BY seq) "
        f"SELECT d.seq, d.message_id, d.conversation_id, d.token_count, {_SECOND}, g.mask "
        f"FROM g JOIN recall_docs d ON d.seq = g.seq WHERE {where}"
    )
    params += scope_params
    if drop_common:
        sql += "".join(
            f" UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, {i} FROM "
            f"(SELECT count(*) AS c FROM f{i}) WHERE c >= ?"
            for i in range(len(queries))
        )
        params += [cap] * len(queries)
    return sql, params


# -- deletion cascade ----------------------------------------------------------------------


def delete_for_conversations(dialect: str, ids: Sequence[str]) -> Op[None]:
    for start in range(0, len(ids), _BATCH):
        batch = list(ids[start : start + _BATCH])
        fts = _sql(dialect, "delete_conversations")
        if fts is not None:
            yield Exec(fts.format(ids=_ph(len(batch))), batch)
        yield Exec(f"DELETE FROM recall_docs WHERE conversation_id IN ({_ph(len(batch))})", batch)


def delete_for_messages(dialect: str, conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step for single deleted messages of one conversation: they leave the
    keyword index (a message of the same id in another conversation stays)."""
    fts = _sql(dialect, "delete_messages")
    if fts is not None:
        yield Exec(fts.format(ids=_ph(len(ids))), (conversation_id, *ids))
    yield Exec(
        f"DELETE FROM recall_docs WHERE conversation_id = ? AND message_id IN ({_ph(len(ids))})",
        (conversation_id, *ids),
    )


def delete_for_user(dialect: str, tenant: str, user: str) -> Op[None]:
    fts = _sql(dialect, "delete_user")
    if fts is not None:
        yield Exec(fts, (tenant, user))
    yield Exec("DELETE FROM recall_docs WHERE tenant_id = ? AND user_id = ?", (tenant, user))


def stored_vector(
    conversation_id: str, message_id: str, embedder: str, dim: int
) -> Op[bytes | None]:
    """The vector recall stored for the message in the space ``embedder`` (float32
    little-endian bytes), or None when it is not embedded there yet. Message ids are per
    conversation: the conversation is part of the lookup."""
    rows = yield Query(
        "SELECT vector FROM vectors WHERE conversation_id = ? AND message_id = ? "
        "AND embedder = ? AND dim = ?",
        (conversation_id, message_id, embedder, dim),
    )
    return bytes(rows[0][0]) if rows else None
