"""A LangGraph store for one tenant: free items, long-term facts and working memory.

LangGraph nodes read and write a ``BaseStore`` by namespace and key. Any namespace (a
tuple of labels without periods, such as LangGraph's ``("memories", user_id)``) holds
free items under string keys: JSON-object values, kept on ``mem.graphs``. Three shapes
are memstrata's own memory instead, so what a graph remembers there is what
``mem.context`` injects:

==========================================  ===========  =============================
namespace                                   key          item value
==========================================  ===========  =============================
``("users", user, "facts")``                a fact id    ``content``, ``category``,
                                            (a UUID)     ``confidence`` (writable);
                                                         ``status``, ``origin``,
                                                         ``source_error``, ... (read)
``("users", user, "working")``              ``content``  ``content`` (markdown text or
                                                         JSON), ``format``, ``version``
``("users", user, "working", conv_id)``     ``content``  the same, for one conversation
==========================================  ===========  =============================

Facts:

- ``put`` on the id of one of the user's facts edits it (nothing is written when the
  writable fields are unchanged; memstrata keeps the previous version in the fact's
  history). ``put`` on any other UUID adds a manual fact under that id, so a key chosen
  with ``str(uuid.uuid4())`` finds its fact again. Keys must be UUIDs because fact ids
  are. Fields memstrata manages (``status``, ``origin``, ``sources``, ...) may be sent
  back as read and are ignored, except that ``status`` must not change: facts are
  forgotten with ``delete``, not by status.
- ``get`` returns a fact whatever its status; ``search`` shows active facts unless the
  filter names a ``status`` (``{"status": "superseded"}``; ``"all"`` for every status).
- ``delete`` erases the fact and its history.

Search: ``filter`` matches item values field by field (equality, or ``$eq``, ``$ne``,
``$gt``, ``$gte``, ``$lt``, ``$lte``). With an ``index`` (LangGraph's ``IndexConfig``),
``query`` is semantic: free items are embedded on put (the config's ``fields``, or
``index=[...]`` per put; ``index=False`` for none), facts and working memory by their
text at query time, and results come by cosine similarity, best first, items without a
vector last. Without an index, ``query`` is keyword overlap: an item's score is the
share of the query's words found in its text, and items without any are left out.
Without a query results come newest first with no score.

TTLs (LangGraph's ``TTLConfig``, minutes) apply to free items; facts and working memory
do not expire, and a TTL or per-item index fields on them raise
:class:`~memstrata.errors.InvalidInput`. LangGraph refuses periods in namespace labels,
so a user whose memstrata name has one cannot be reached through those shapes.

Every op runs as its own memstrata call (a batch is not one transaction). Listing or
searching above one user's namespaces reads each of the user's conversations for its
working memory (one read each), and a search reads every item under its prefix.

Needs ``pip install 'memstrata[langgraph]'``; importing this module without it raises
:class:`~memstrata.errors.MissingDependency`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio.to_thread

from memstrata.api import AsyncMemory, Memory
from memstrata.errors import InvalidInput, MissingDependency, NotFound
from memstrata.ids import parse_id
from memstrata.integrations.langgraph._steps import Steps as _Steps
from memstrata.integrations.langgraph._steps import call as _call
from memstrata.integrations.langgraph._steps import run_async, run_sync
from memstrata.longterm.model import Fact
from memstrata.state import WorkingMemory
from memstrata.types import Scope

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        ListNamespacesOp,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
    from langgraph.store.base import Op as StoreOp
except ImportError:
    raise MissingDependency(
        "the LangGraph integration needs langgraph: pip install 'memstrata[langgraph]'"
    ) from None

from memstrata.integrations.langgraph.items import (
    Embedding,
    get_item,
    item_namespaces,
    put_item,
    refresh,
    search_items,
)
from memstrata.integrations.langgraph.matching import (
    FACT_MANAGED,
    FACT_WRITABLE,
    WORKING_MANAGED,
    WORKING_WRITABLE,
    Found,
    by_similarity,
    checked_fields,
    found_fact,
    found_item,
    found_working,
    passes,
    ranked,
    status_pushdown,
)
from memstrata.integrations.langgraph.namespaces import (
    WORKING_KEY,
    Target,
    enumerable,
    facts_namespace,
    leading_labels,
    matches_condition,
    parse_namespace,
    working_namespace,
)

__all__ = ["MemstrataStore", "facts_namespace", "working_namespace"]


_PAGE = 500  # the largest page memstrata serves


class MemstrataStore(BaseStore):
    """LangGraph's ``BaseStore`` for one tenant: facts, working memory and free items.

    ``memory`` serves :meth:`batch`; :meth:`abatch` uses ``async_memory`` when given
    (the same store, e.g. ``AsyncMemory(mem.core)``), else runs :meth:`batch` in a
    worker thread. ``agent`` scopes every user's data to that agent, as
    ``Scope(tenant, user, agent)`` does. See the module doc for the namespace mapping.

    ``index`` (LangGraph's ``IndexConfig``) turns on semantic search: ``fields`` (default
    the whole value) are embedded on put, by ``embed`` when given (LangChain embeddings
    or a function), else by the memory's own embedder (the default, offline MiniLM
    model); ``dims`` is checked when given. ``ttl`` (LangGraph's ``TTLConfig``:
    ``default_ttl`` in minutes, ``refresh_on_read``) applies to free items.
    """

    supports_ttl = True

    def __init__(
        self,
        memory: Memory,
        tenant: str,
        *,
        agent: str | None = None,
        async_memory: AsyncMemory | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        Scope(tenant, "probe", agent)  # refuse bad names now rather than on first use
        self._mem = memory
        self._amem = async_memory
        self.tenant = tenant
        self.agent = agent
        self.index_config = index
        self.ttl_config = ttl
        self._embedding = None if index is None else Embedding.of(index)

    def batch(self, ops: Iterable[StoreOp]) -> list[Result]:
        return run_sync(self._mem, self._batch(list(ops)))

    async def abatch(self, ops: Iterable[StoreOp]) -> list[Result]:
        todo = list(ops)
        if self._amem is None:
            return await anyio.to_thread.run_sync(self.batch, todo)
        return await run_async(self._amem, self._batch(todo))

    # -- dispatch --

    def _scope(self, user: str) -> Scope:
        return Scope(self.tenant, user, self.agent)

    def _batch(self, ops: list[StoreOp]) -> _Steps[list[Result]]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp) and parse_namespace(op.namespace) is None:
                got = yield from get_item(
                    self.tenant, self.agent, op.namespace, op.key, op.refresh_ttl
                )
                results.append(None if got is None else found_item(got).item())
            elif isinstance(op, GetOp):
                found = yield from self._get(op.namespace, op.key)
                results.append(None if found is None else found.item())
            elif isinstance(op, PutOp):
                yield from self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op)))
            else:
                raise InvalidInput(f"unknown store operation {type(op).__name__}", field="op")
        return results

    # -- get --

    def _get(self, namespace: tuple[str, ...], key: str) -> _Steps[Found | None]:
        target = parse_namespace(namespace)
        if target is None:
            return None  # nothing can be stored there
        if target.kind == "facts":
            fact = yield from self._fact(target.user, key)
            return None if fact is None else found_fact(target, fact)
        if key != WORKING_KEY:
            return None
        wm = yield from self._working(target)
        return None if wm is None else found_working(target, wm)

    def _fact(self, user: str, key: str) -> _Steps[Fact | None]:
        scope = self._scope(user)
        try:
            fid = parse_id(key, field="key")
        except InvalidInput:
            return None  # fact ids are UUIDs: no fact has this key
        try:
            fact: Fact = yield _call(lambda m: m.facts.get, scope, fid)
        except NotFound:
            return None
        return fact

    def _working(self, target: Target) -> _Steps[WorkingMemory | None]:
        scope = self._scope(target.user)
        try:
            wm: WorkingMemory = yield _call(
                lambda m: m.working.get, scope, conversation_id=target.conversation_id
            )
        except NotFound:
            return None
        return wm

    # -- put / delete --

    def _put(self, op: PutOp) -> _Steps[None]:
        target = parse_namespace(op.namespace)
        if target is None:
            yield from put_item(self.tenant, self.agent, op, self._embedding)
            return
        if op.ttl is not None:
            raise InvalidInput("facts and working memory do not expire", field="ttl")
        if op.index not in (None, False):
            raise InvalidInput(
                "facts and working memory take no per-item index fields (their text is "
                "what semantic search reads)",
                field="index",
            )
        if target.kind == "facts":
            if op.value is None:
                yield from self._delete_fact(target.user, op.key)
            else:
                yield from self._put_fact(target.user, op.key, op.value)
        elif op.value is None:
            yield from self._delete_working(target, op.key)
        else:
            yield from self._put_working(target, op.key, op.value)

    def _delete_fact(self, user: str, key: str) -> _Steps[None]:
        fact = yield from self._fact(user, key)
        if fact is None:
            return  # deleting what is not there is a no-op, as in any store
        with contextlib.suppress(NotFound):  # deleted meanwhile
            yield _call(lambda m: m.facts.delete, self._scope(user), fact.id)

    def _put_fact(self, user: str, key: str, value: Mapping[str, Any]) -> _Steps[None]:
        scope = self._scope(user)
        fid = parse_id(key, field="key")
        fields = checked_fields(value, FACT_WRITABLE, FACT_MANAGED, "fact")
        current = yield from self._fact(user, fid)
        status = "active" if current is None else current.status.value
        if value.get("status", status) != status:
            raise InvalidInput(
                "a fact's status is kept by memstrata; delete the item to forget a fact",
                field="status",
            )
        if current is not None:
            if isinstance(fields.get("content"), str):
                fields["content"] = " ".join(fields["content"].split())  # as memstrata stores it
            changes = {k: v for k, v in fields.items() if getattr(current, k) != v}
            if changes:
                yield _call(lambda m: m.facts.edit, scope, fid, **changes)
            return
        yield _call(
            lambda m: m.facts.add,
            scope,
            fields.get("content"),
            category=fields.get("category", "context"),
            confidence=fields.get("confidence", 1.0),
            source_error=fields.get("source_error"),
            id=fid,
        )

    def _delete_working(self, target: Target, key: str) -> _Steps[None]:
        if key != WORKING_KEY:
            return
        with contextlib.suppress(NotFound):  # not there: deleting is a no-op
            yield _call(
                lambda m: m.working.delete,
                self._scope(target.user),
                conversation_id=target.conversation_id,
            )

    def _put_working(self, target: Target, key: str, value: Mapping[str, Any]) -> _Steps[None]:
        if key != WORKING_KEY:
            raise InvalidInput(
                f"working memory is one document, under the key {WORKING_KEY!r}", field="key"
            )
        fields = checked_fields(value, WORKING_WRITABLE, WORKING_MANAGED, "working memory")
        if "content" not in fields:
            raise InvalidInput("a working memory value needs 'content'", field="content")
        content = fields.pop("content")
        yield _call(
            lambda m: m.working.put,
            self._scope(target.user),
            content,
            conversation_id=target.conversation_id,
            **fields,
        )

    # -- search --

    def _search(self, op: SearchOp) -> _Steps[list[SearchItem]]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidInput("limit and offset must be >= 0", field="limit")
        prefix = tuple(op.namespace_prefix)
        conditions = dict(op.filter or {})
        semantic = bool(op.query) and self._embedding is not None
        items = yield from search_items(self.tenant, self.agent, prefix, semantic)
        found = [f for f in map(found_item, items) if passes(f.value, conditions)]
        if enumerable(prefix):
            found.extend((yield from self._reserved_matching(prefix, conditions)))
        if semantic and op.query and self._embedding is not None:
            # Facts and working memory have no stored vectors: embedded here, by text.
            texts = sorted({f.text for f in found if not f.free})
            got = yield from self._embedding.vectors([op.query, *texts], "documents")
            ordered = by_similarity(found, got[0], dict(zip(texts, got[1:], strict=True)))
        else:
            ordered = ranked(found, op.query)
        shown = ordered[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            keys = {(f.namespace, f.key) for f in shown}
            yield from refresh(
                self.tenant, self.agent, [i for i in items if (i.namespace, i.key) in keys]
            )
        return shown

    def _reserved_matching(
        self, prefix: tuple[str, ...], conditions: Mapping[str, Any]
    ) -> _Steps[list[Found]]:
        found: list[Found] = []
        for target in (yield from self._targets(prefix)):
            if target.kind == "facts":
                found.extend((yield from self._facts_matching(target, conditions)))
                continue
            wm = yield from self._working(target)
            if wm is not None:
                candidate = found_working(target, wm)
                if passes(candidate.value, conditions):
                    found.append(candidate)
        return found

    def _facts_matching(self, target: Target, conditions: Mapping[str, Any]) -> _Steps[list[Found]]:
        status, rest = status_pushdown(conditions)
        kwargs: dict[str, Any] = {"status": status}
        if isinstance(rest.get("category"), str):
            kwargs["category"] = rest["category"]
        facts = yield from self._pages(lambda m: m.facts.list, self._scope(target.user), **kwargs)
        found = [found_fact(target, fact) for fact in facts]
        return [f for f in found if passes(f.value, rest)]

    def _pages(
        self,
        method: Callable[[Memory | AsyncMemory], Callable[..., Any]],
        *args: Any,
        **kwargs: Any,
    ) -> _Steps[list[Any]]:
        """Every item of a cursor-paginated memstrata list."""
        items: list[Any] = []
        cursor: str | None = None
        while True:
            page = yield _call(method, *args, limit=_PAGE, cursor=cursor, **kwargs)
            items.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return items

    def _targets(self, prefix: tuple[str, ...]) -> _Steps[list[Target]]:
        """The namespaces under ``prefix`` that may hold items: each user's facts and
        working memory, and the working memory of each of their conversations."""
        if len(prefix) == 4:
            return [Target(prefix[1], "working", prefix[3])]
        if len(prefix) >= 2:
            users = [prefix[1]]
        else:
            users = [
                name for name, _ in (yield from self._pages(lambda m: m.users.list, self.tenant))
            ]
        kinds = {prefix[2]} if len(prefix) == 3 else {"facts", "working"}
        targets: list[Target] = []
        for user in users:
            if "facts" in kinds:
                targets.append(Target(user, "facts"))
            if "working" in kinds:
                targets.append(Target(user, "working"))
                conversations = yield from self._pages(
                    lambda m: m.conversations.list, self._scope(user)
                )
                targets.extend(Target(user, "working", c.id) for c in conversations)
        return targets

    # -- list_namespaces --

    def _list_namespaces(self, op: ListNamespacesOp) -> _Steps[list[tuple[str, ...]]]:
        conditions = tuple(op.match_conditions or ())
        lead = leading_labels(conditions)
        while not enumerable(lead):
            lead = lead[:-1]  # the conditions below still drop what does not match
        candidates = list((yield from item_namespaces(self.tenant, self.agent)))
        for target in (yield from self._targets(lead)):
            if all(matches_condition(target.namespace, c) for c in conditions) and (
                yield from self._has_items(target)
            ):
                candidates.append(target.namespace)
        names: set[tuple[str, ...]] = set()
        for ns in candidates:
            if all(matches_condition(ns, c) for c in conditions):
                names.add(ns if op.max_depth is None else ns[: op.max_depth])
        return sorted(names)[op.offset : op.offset + op.limit]

    def _has_items(self, target: Target) -> _Steps[bool]:
        if target.kind == "working":
            return (yield from self._working(target)) is not None
        page = yield _call(lambda m: m.facts.list, self._scope(target.user), status="all", limit=1)
        return bool(page.items)
