"""Generated from ``_async_remote.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from memstrata.client import _decode as decode
from memstrata.client._backoff import Backoff, retryable
from memstrata.client._results import RemoteContext, RemoteHistory, RemoteNodeHistory
from memstrata.client._wire import (
    Identity,
    check_tenant,
    error_from_response,
    file_json,
    identity_from_dict,
    message_json,
    owner_headers,
    scope_headers,
    segment,
    version_headers,
)
from memstrata.context.kit import CompactionResult
from memstrata.conversation.history import check_limits
from memstrata.errors import BackendUnavailable, InvalidInput
from memstrata.jobs.ops import Job
from memstrata.longterm.model import Fact, FactEvent, ProfileSection
from memstrata.nodes.layout import Turn
from memstrata.recall.service import RecallHit
from memstrata.scoped import Scoped
from memstrata.state.ops import Checkpoint, Format, Iteration, PlanDoc, RunSnapshot, WorkingMemory
from memstrata.types import (
    Conversation,
    FileRef,
    Message,
    MessagePatch,
    NewMessage,
    Page,
    Scope,
)
from memstrata.validation import build

__all__ = ["RemoteMemory"]

T = TypeVar("T")

#: Sent for ``max_tokens=None`` (no token limit): the server's parameter is an integer.
NO_TOKEN_LIMIT = 1 << 53
#: Sent for ``max_messages=None`` (no message cap).
NO_MESSAGE_CAP_PARAM = "none"

_NODE_HISTORY_OPTIONS = frozenset(
    {"current_message_id", "parent_message_id", "max_tokens", "max_messages", "model"}
)


def _conv(conversation_id: str) -> str:
    return f"/v1/conversations/{segment(conversation_id)}"


def _query(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


class Session:
    """One HTTP client, the key's identity, retries and error mapping."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None,
    ) -> None:
        from memstrata import __version__

        if not isinstance(api_key, str) or not api_key:
            raise InvalidInput("api_key is required to reach a memstrata server", field="api_key")
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"a server URL starts with http:// or https://, got {base_url!r}", field="url"
            )
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.base_url,
            headers={
                "Authorization": f"Bearer {api_key}",
                "User-Agent": f"memstrata/{__version__}",
            },
            timeout=timeout,
            transport=transport,
        )
        self._backoff = Backoff()
        self._identity: Identity | None = None

    def identity(self) -> Identity:
        if self._identity is None:
            self._identity = self.call(
                "GET", "/v1/me", identity_from_dict, idempotent=True, headers=None
            )
        return self._identity

    def scoped(self, scope: Scope) -> dict[str, str]:
        return scope_headers(self.identity(), scope)

    def send(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._client.request(
                    method, path, headers=headers, params=params, json=json
                )
            except httpx.TransportError as exc:
                if not retryable(exc, attempt, idempotent):
                    raise BackendUnavailable(
                        f"cannot reach the memstrata server at {self.base_url}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                self._backoff.wait(attempt)
                attempt += 1
                continue
            if response.is_success:
                return response
            raise error_from_response(
                response.status_code,
                response.headers.get("content-type", ""),
                response.content,
                response.headers.get("retry-after"),
            )

    def call(
        self,
        method: str,
        path: str,
        decoder: Callable[[Any], T],
        *,
        headers: Mapping[str, str] | None,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> T:
        response = self.send(
            method, path, headers=headers, params=params, json=json, idempotent=idempotent
        )
        return decode.parse(decoder, response.json())

    def get(
        self,
        path: str,
        decoder: Callable[[Any], T],
        headers: Mapping[str, str],
        params: Mapping[str, Any] | None = None,
    ) -> T:
        return self.call(
            "GET", path, decoder, headers=headers, params=params, idempotent=True
        )

    def close(self) -> None:
        self._client.close()


class RemoteConversations:
    """``mem.conversations`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def create(
        self,
        scope: Scope,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
    ) -> Conversation:
        if id is not None:
            raise InvalidInput("the REST API makes conversation ids; leave id out", field="id")
        h = self._s.scoped(scope)
        body = _query(title=title, metadata=metadata)
        return self._s.call(
            "POST", "/v1/conversations", decode.conversation(scope), headers=h, json=body
        )

    def get(self, scope: Scope, conversation_id: str) -> Conversation:
        h = self._s.scoped(scope)
        return self._s.get(_conv(conversation_id), decode.conversation(scope), h)

    def list(
        self, scope: Scope, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Conversation]:
        h = self._s.scoped(scope)
        params = _query(limit=limit, cursor=cursor)
        return self._s.get(
            "/v1/conversations", decode.page(decode.conversation(scope)), h, params
        )

    def update(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        active_leaf_id: str | None = None,
    ) -> Conversation:
        """Change the title, metadata and/or active leaf (None leaves a field as is)."""
        h = self._s.scoped(scope)
        body = _query(title=title, metadata=metadata, active_leaf_id=active_leaf_id)
        return self._s.call(
            "PATCH", _conv(conversation_id), decode.conversation(scope), headers=h, json=body
        )

    def set_active_leaf(
        self, scope: Scope, conversation_id: str, message_id: str
    ) -> Conversation:
        return self.update(scope, conversation_id, active_leaf_id=message_id)

    def delete(self, scope: Scope, conversation_id: str) -> None:
        h = self._s.scoped(scope)
        self._s.send("DELETE", _conv(conversation_id), headers=h)


class RemoteMessages:
    """``mem.messages`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def append(
        self,
        scope: Scope,
        conversation_id: str,
        message: NewMessage | Mapping[str, Any] | None = None,
        /,
        **fields: Any,
    ) -> Message:
        """Append a message; without an ``id`` one is made here, so a retry is idempotent."""
        stored, _ = self.put(scope, conversation_id, message, **fields)
        return stored

    def put(
        self,
        scope: Scope,
        conversation_id: str,
        message: NewMessage | Mapping[str, Any] | None = None,
        /,
        **fields: Any,
    ) -> tuple[Message, bool]:
        """Like :meth:`append`, also telling whether the server created it (False: a replay)."""
        body = message_json(build(NewMessage, message, fields))
        h = self._s.scoped(scope)
        path = f"{_conv(conversation_id)}/messages"
        # The body carries its id: sending it again after a dropped answer stores nothing new.
        response = self._s.send("POST", path, headers=h, json=body, idempotent=True)
        return decode.parse(decode.message, response.json()), response.status_code == 201

    def complete(
        self,
        scope: Scope,
        conversation_id: str,
        message_id: str,
        patch: MessagePatch | Mapping[str, Any] | None = None,
        /,
        **fields: Any,
    ) -> Message:
        """Complete a pending assistant message with its final content."""
        body = build(MessagePatch, patch, fields).model_dump(mode="json", exclude_none=True)
        h = self._s.scoped(scope)
        path = f"{_conv(conversation_id)}/messages/{segment(message_id)}"
        return self._s.call("PATCH", path, decode.message, headers=h, json=body)

    def get(self, scope: Scope, conversation_id: str, message_id: str) -> Message:
        h = self._s.scoped(scope)
        path = f"{_conv(conversation_id)}/messages/{segment(message_id)}"
        return self._s.get(path, decode.message, h)

    def delete(self, scope: Scope, conversation_id: str, message_id: str) -> None:
        """Delete a message and the subtree under it (see the embedded facade)."""
        h = self._s.scoped(scope)
        path = f"{_conv(conversation_id)}/messages/{segment(message_id)}"
        self._s.send("DELETE", path, headers=h)

    def leaves(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Message]:
        h = self._s.scoped(scope)
        params = _query(limit=limit, cursor=cursor)
        path = f"{_conv(conversation_id)}/leaves"
        return self._s.get(path, decode.page(decode.message), h, params)

    def list(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Message]:
        """Every message of the conversation, all branches, oldest first."""
        h = self._s.scoped(scope)
        params = _query(limit=limit, cursor=cursor)
        path = f"{_conv(conversation_id)}/messages"
        return self._s.get(path, decode.page(decode.message), h, params)


class RemoteRecall:
    """``mem.recall`` over HTTP (search only)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def search(
        self,
        scope: Scope,
        query: str,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        leaf_id: str | None = None,
        message_range: int = 0,
        exclude_ids: Iterable[str] = (),
        include_other_branches: bool = False,
    ) -> list[RecallHit]:
        """The ``k`` messages of ``scope`` most relevant to ``query``, best first."""
        if isinstance(exclude_ids, str) or any(True for _ in exclude_ids):
            raise InvalidInput("exclude_ids is not offered by the REST API", field="exclude_ids")
        h = self._s.scoped(scope)
        body = _query(
            query=query,
            k=k,
            conversation_id=conversation_id,
            leaf_id=leaf_id,
            message_range=message_range,
            include_other_branches=include_other_branches or None,
        )
        # A search changes nothing: safe to send again.
        return self._s.call(
            "POST",
            "/v1/recall/search",
            lambda d: [decode.recall_hit(x) for x in d["hits"]],
            headers=h,
            json=body,
            idempotent=True,
        )


class RemoteFacts:
    """``mem.facts`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def list(
        self,
        scope: Scope,
        *,
        status: str | None = "active",
        category: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Fact]:
        """Newest first; ``status`` None means every status, as embedded."""
        h = self._s.scoped(scope)
        params = _query(status=status or "all", category=category, limit=limit, cursor=cursor)
        return self._s.get("/v1/facts", decode.page(decode.fact), h, params)

    def add(
        self,
        scope: Scope,
        content: str,
        *,
        category: str = "context",
        confidence: float = 1.0,
        source_error: str | None = None,
    ) -> Fact:
        h = self._s.scoped(scope)
        body = _query(
            content=content, category=category, confidence=confidence, source_error=source_error
        )
        return self._s.call("POST", "/v1/facts", decode.fact, headers=h, json=body)

    def get(self, scope: Scope, fact_id: str) -> Fact:
        h = self._s.scoped(scope)
        return self._s.get(f"/v1/facts/{segment(fact_id)}", decode.fact, h)

    def edit(self, scope: Scope, fact_id: str, **changes: Any) -> Fact:
        if not changes:
            raise InvalidInput("nothing to change", field="content")
        h = self._s.scoped(scope)
        path = f"/v1/facts/{segment(fact_id)}"
        return self._s.call("PATCH", path, decode.fact, headers=h, json=changes)

    def delete(self, scope: Scope, fact_id: str) -> None:
        h = self._s.scoped(scope)
        self._s.send("DELETE", f"/v1/facts/{segment(fact_id)}", headers=h)

    def history(self, scope: Scope, fact_id: str) -> builtins.list[FactEvent]:
        h = self._s.scoped(scope)
        path = f"/v1/facts/{segment(fact_id)}/history"
        return self._s.get(path, decode.items(decode.fact_event), h)


class RemoteLongTerm:
    """``mem.longterm`` over HTTP (the profile; extraction runs on the server)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def profile(self, scope: Scope) -> list[ProfileSection]:
        h = self._s.scoped(scope)
        return self._s.get("/v1/profile", decode.profile, h)

    def observe(
        self, scope: Scope, conversation_id: str, *, leaf_id: str | None = None
    ) -> Job:
        """Queue (or push back) the conversation's extraction on the server; the job."""
        h = self._s.scoped(scope)
        job_of = decode.job(scope.tenant)
        # Queueing merges by key on the server, so sending it again is harmless.
        return self._s.call(
            "POST",
            f"{_conv(conversation_id)}/observe",
            lambda d: job_of(d["job"]),
            headers=h,
            json=_query(leaf_id=leaf_id),
            idempotent=True,
        )


class RemoteWorking:
    """``mem.working`` over HTTP; ``expected_version`` becomes ``If-Match``."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def get(self, scope: Scope, *, conversation_id: str | None = None) -> WorkingMemory:
        h = self._s.scoped(scope)
        params = _query(conversation_id=conversation_id)
        return self._s.get("/v1/working-memory", decode.working, h, params)

    def put(
        self,
        scope: Scope,
        content: Any,
        *,
        conversation_id: str | None = None,
        format: Format | None = None,
        json_schema: dict[str, Any] | None = None,
        template: Any = None,
        expected_version: int | None = None,
    ) -> WorkingMemory:
        h = {**self._s.scoped(scope), **version_headers(expected_version)}
        body = {"content": content, **_query(format=format, json_schema=json_schema)}
        if template is not None:
            body["template"] = template
        return self._s.call(
            "PUT",
            "/v1/working-memory",
            decode.working,
            headers=h,
            params=_query(conversation_id=conversation_id),
            json=body,
        )


class RemotePlans:
    """``mem.plans`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def get(self, scope: Scope, conversation_id: str) -> PlanDoc:
        h = self._s.scoped(scope)
        return self._s.get(f"{_conv(conversation_id)}/plan", decode.plan, h)

    def put(
        self,
        scope: Scope,
        conversation_id: str,
        document: Any,
        *,
        expected_version: int | None = None,
    ) -> PlanDoc:
        h = {**self._s.scoped(scope), **version_headers(expected_version)}
        path = f"{_conv(conversation_id)}/plan"
        return self._s.call("PUT", path, decode.plan, headers=h, json={"document": document})


class RemoteIterations:
    """``mem.iterations`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def append(
        self,
        scope: Scope,
        conversation_id: str,
        task: str,
        *,
        outcome: str,
        error: str | None = None,
        attempt: int | None = None,
        detail: dict[str, Any] | None = None,
    ) -> Iteration:
        h = self._s.scoped(scope)
        body = _query(task=task, outcome=outcome, error=error, attempt=attempt, detail=detail)
        path = f"{_conv(conversation_id)}/iterations"
        return self._s.call("POST", path, decode.iteration, headers=h, json=body)

    def list(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        task: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Iteration]:
        h = self._s.scoped(scope)
        params = _query(task=task, limit=limit, cursor=cursor)
        path = f"{_conv(conversation_id)}/iterations"
        return self._s.get(path, decode.page(decode.iteration), h, params)


class RemoteCheckpoints:
    """``mem.checkpoints`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    @staticmethod
    def _path(name: str, run_id: str) -> str:
        return f"/v1/checkpoints/{segment(name)}/{segment(run_id)}"

    def save(
        self,
        scope: Scope,
        name: str,
        run_id: str,
        state: Any,
        *,
        ttl_s: float | None = None,
        conversation_id: str | None = None,
    ) -> Checkpoint:
        h = self._s.scoped(scope)
        body = {"state": state, **_query(ttl_s=ttl_s, conversation_id=conversation_id)}
        path = self._path(name, run_id)
        return self._s.call("PUT", path, decode.checkpoint, headers=h, json=body)

    def load(self, scope: Scope, name: str, run_id: str) -> Checkpoint:
        h = self._s.scoped(scope)
        return self._s.get(self._path(name, run_id), decode.checkpoint, h)

    def delete(self, scope: Scope, name: str, run_id: str) -> None:
        h = self._s.scoped(scope)
        self._s.send("DELETE", self._path(name, run_id), headers=h)


class RemoteSnapshots:
    """``mem.snapshots`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    @staticmethod
    def _path(conversation_id: str, run_id: str) -> str:
        return f"{_conv(conversation_id)}/runs/{segment(run_id)}/snapshot"

    def get(self, scope: Scope, conversation_id: str, run_id: str) -> RunSnapshot:
        h = self._s.scoped(scope)
        return self._s.get(self._path(conversation_id, run_id), decode.snapshot, h)

    def put(self, scope: Scope, conversation_id: str, run_id: str, data: Any) -> RunSnapshot:
        h = self._s.scoped(scope)
        path = self._path(conversation_id, run_id)
        return self._s.call("PUT", path, decode.snapshot, headers=h, json={"data": data})


class RemoteJobs:
    """``mem.jobs`` over HTTP: a user key sees its jobs, an admin key its tenant's."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def _owner(self, tenant: str | None, user: str | None) -> tuple[str, dict[str, str]]:
        me = self._s.identity()
        return me.tenant, owner_headers(me, tenant, user)

    def list(
        self,
        *,
        tenant: str | None = None,
        user: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Job]:
        """Newest first: the key's tenant (or ``user``); another tenant is Forbidden."""
        t, h = self._owner(tenant, user)
        params = _query(status=status, limit=limit, cursor=cursor)
        return self._s.get("/v1/jobs", decode.page(decode.job(t)), h, params)

    def get(self, job_id: str, *, tenant: str | None = None, user: str | None = None) -> Job:
        t, h = self._owner(tenant, user)
        return self._s.get(f"/v1/jobs/{segment(job_id)}", decode.job(t), h)

    def retry(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Send a dead job back to the queue."""
        t, h = self._owner(tenant, None)
        path = f"/v1/jobs/{segment(job_id)}/retry"
        return self._s.call("POST", path, decode.job(t), headers=h)


class RemoteUsers:
    """``mem.users`` over HTTP (admin keys)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def list(
        self, tenant: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[tuple[str, datetime]]:
        check_tenant(self._s.identity(), tenant)
        params = _query(limit=limit, cursor=cursor)
        return self._s.get("/v1/users", decode.page(decode.user), {}, params)

    def delete(self, scope: Scope) -> None:
        """Delete ``scope.user`` and everything it owns (the server does not say how much)."""
        check_tenant(self._s.identity(), scope.tenant)
        self._s.send("DELETE", f"/v1/users/{segment(scope.user)}", headers={})


class RemoteNodes:
    """``mem.nodes`` over HTTP: each turn is durable when ``add_turn`` returns."""

    def __init__(self, session: Session) -> None:
        self._s = session

    @staticmethod
    def _path(app_id: str, conversation_id: str, node_id: str) -> str:
        return (
            f"/v1/apps/{segment(app_id)}/conversations/{segment(conversation_id)}"
            f"/nodes/{segment(node_id)}"
        )

    def add_turn(
        self, scope: Scope, app_id: str, conversation_id: str, node_id: str, **turn: Any
    ) -> Turn:
        body = dict(turn)
        for key in ("user_files", "assistant_files"):
            files: Sequence[FileRef | dict[str, Any]] | None = body.get(key)
            if files is not None:
                body[key] = [file_json(f) for f in files]
        h = self._s.scoped(scope)
        path = f"{self._path(app_id, conversation_id, node_id)}/turns"
        return self._s.call("POST", path, decode.turn, headers=h, json=body)

    def history(
        self, scope: Scope, app_id: str, conversation_id: str, node_id: str, **options: Any
    ) -> RemoteNodeHistory:
        """Options: ``current_message_id``, ``parent_message_id`` (an id), ``max_tokens``
        (None: no limit), ``max_messages``, ``model``."""
        unknown = sorted(set(options) - _NODE_HISTORY_OPTIONS)
        if unknown:
            raise InvalidInput(
                f"not offered by the REST API: {', '.join(unknown)}", field=unknown[0]
            )
        if "parent_message_id" in options and options["parent_message_id"] is None:
            raise InvalidInput(
                "parent_message_id=None cannot be sent over HTTP", field="parent_message_id"
            )
        if "max_tokens" in options and options["max_tokens"] is None:
            options["max_tokens"] = NO_TOKEN_LIMIT
        if "max_messages" in options and options["max_messages"] is None:
            options["max_messages"] = NO_MESSAGE_CAP_PARAM
        h = self._s.scoped(scope)
        path = f"{self._path(app_id, conversation_id, node_id)}/history"
        return self._s.get(path, decode.node_history, h, _query(**options))

    def delete(self, scope: Scope, app_id: str, conversation_id: str, node_id: str) -> None:
        h = self._s.scoped(scope)
        self._s.send("DELETE", self._path(app_id, conversation_id, node_id), headers=h)


class RemoteMemory:
    """A memstrata server behind the embedded facade's methods.

    ``RemoteMemory("http://host:8700", api_key)``, used as a context manager or
    closed with :meth:`close`. ``transport`` is handed to httpx (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._session = Session(base_url, api_key, timeout=timeout, transport=transport)
        s = self._session
        self.conversations = RemoteConversations(s)
        self.messages = RemoteMessages(s)
        self.recall = RemoteRecall(s)
        self.facts = RemoteFacts(s)
        self.longterm = RemoteLongTerm(s)
        self.working = RemoteWorking(s)
        self.plans = RemotePlans(s)
        self.iterations = RemoteIterations(s)
        self.checkpoints = RemoteCheckpoints(s)
        self.snapshots = RemoteSnapshots(s)
        self.jobs = RemoteJobs(s)
        self.users = RemoteUsers(s)
        self.nodes = RemoteNodes(s)

    @property
    def url(self) -> str:
        return self._session.base_url

    def identity(self) -> Identity:
        """Who the API key speaks for (read once from ``GET /v1/me``)."""
        return self._session.identity()

    def history(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None = None,
        max_tokens: int | None = 2000,
        max_messages: int | None = 500,
        model: str | None = None,
        *,
        before: str | None = None,
    ) -> RemoteHistory:
        """Token-budgeted history of the branch ending at ``leaf_id`` (default: the active leaf);
        ``before`` ends it just before that message's turn (see the embedded facade)."""
        check_limits(max_tokens, max_messages)
        h = self._session.scoped(scope)
        params = _query(
            leaf_id=leaf_id,
            max_tokens=NO_TOKEN_LIMIT if max_tokens is None else max_tokens,
            max_messages=NO_MESSAGE_CAP_PARAM if max_messages is None else max_messages,
            model=model,
            before=before,
        )
        path = f"{_conv(conversation_id)}/history"
        return self._session.get(path, decode.history, h, params)

    def context(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None = None,
        budget: int = 8000,
        query: str | None = None,
        model: str | None = None,
        *,
        task: str | None = None,
    ) -> RemoteContext:
        """Messages for the next model call under one token budget, and the report on them."""
        h = self._session.scoped(scope)
        body = _query(leaf_id=leaf_id, budget=budget, query=query, model=model, task=task)
        # Assembly only reads (a compaction it queues is merged by key): safe to send again.
        return self._session.call(
            "POST",
            f"{_conv(conversation_id)}/context",
            decode.context,
            headers=h,
            json=body,
            idempotent=True,
        )

    def compact(
        self, scope: Scope, conversation_id: str, leaf_id: str | None = None
    ) -> CompactionResult:
        """Compact the branch now and wait for the outcome (``summary`` is the JSON object)."""
        h = self._session.scoped(scope)
        body = _query(leaf_id=leaf_id, wait=True)
        return self._session.call(
            "POST",
            f"{_conv(conversation_id)}/compact",
            decode.compaction,
            headers=h,
            json=body,
        )

    def scoped(self, scope: Scope) -> Scoped:
        """This memory bound to ``scope``: the same calls without the scope argument."""
        return Scoped(self, scope)


    def close(self) -> None:
        """Close the HTTP connections (the server and its data stay)."""
        self._session.close()

    close = close

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
