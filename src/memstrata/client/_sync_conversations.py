"""Generated from ``_async_conversations.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memstrata.client import _decode as decode
from memstrata.client._sync_receipts import receipt_of
from memstrata.client._sync_session import (
    NO_MESSAGE_CAP_PARAM,
    NO_TOKEN_LIMIT,
    Session,
    conversation_path,
    query_params,
)
from memstrata.client._values import RemoteNodeHistory
from memstrata.client._wire import file_json, iso_time, message_json, segment
from memstrata.domain.nodes import Turn
from memstrata.domain.recall import RecallResults, check_explain
from memstrata.domain.receipts import Receipt
from memstrata.errors import InvalidInput
from memstrata.types import Conversation, FileRef, Message, MessagePatch, NewMessage, Page, Scope
from memstrata.validation import build

__all__ = [
    "RemoteConversations",
    "RemoteMessages",
    "RemoteNodes",
    "RemoteRecall",
]

_NODE_HISTORY_OPTIONS = frozenset(
    {"current_message_id", "parent_message_id", "max_tokens", "max_messages", "model"}
)


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
        body = query_params(title=title, metadata=metadata)
        return self._s.call(
            "POST", "/v1/conversations", decode.conversation(scope), headers=h, json=body
        )

    def get(self, scope: Scope, conversation_id: str) -> Conversation:
        h = self._s.scoped(scope)
        return self._s.get(conversation_path(conversation_id), decode.conversation(scope), h)

    def list(
        self, scope: Scope, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Conversation]:
        h = self._s.scoped(scope)
        params = query_params(limit=limit, cursor=cursor)
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
        body = query_params(title=title, metadata=metadata, active_leaf_id=active_leaf_id)
        return self._s.call(
            "PATCH",
            conversation_path(conversation_id),
            decode.conversation(scope),
            headers=h,
            json=body,
        )

    def set_active_leaf(
        self, scope: Scope, conversation_id: str, message_id: str
    ) -> Conversation:
        return self.update(scope, conversation_id, active_leaf_id=message_id)

    def delete(self, scope: Scope, conversation_id: str) -> Receipt:
        h = self._s.scoped(scope)
        r = self._s.send("DELETE", conversation_path(conversation_id), headers=h)
        return receipt_of(self._s, r, h)


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
        """Like :meth:`append`, also telling whether the server created it (False: a replay).
        ``context_id`` links an assistant reply to a recorded context (prompt provenance)."""
        if isinstance(message, Mapping) and "context_id" in message:
            message = dict(message)
            fields.setdefault("context_id", message.pop("context_id"))
        context_id = fields.pop("context_id", None)
        body = message_json(build(NewMessage, message, fields))
        if context_id is not None:
            body["context_id"] = context_id
        h = self._s.scoped(scope)
        path = f"{conversation_path(conversation_id)}/messages"
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
        path = f"{conversation_path(conversation_id)}/messages/{segment(message_id)}"
        return self._s.call("PATCH", path, decode.message, headers=h, json=body)

    def get(self, scope: Scope, conversation_id: str, message_id: str) -> Message:
        h = self._s.scoped(scope)
        path = f"{conversation_path(conversation_id)}/messages/{segment(message_id)}"
        return self._s.get(path, decode.message, h)

    def find(self, scope: Scope, message_id: str) -> Message:
        """A message of the scope by its id alone (see the embedded facade)."""
        h = self._s.scoped(scope)
        return self._s.get(f"/v1/messages/{segment(message_id)}", decode.message, h)

    def delete(
        self, scope: Scope, conversation_id: str, message_id: str, *, mode: str = "subtree"
    ) -> Receipt:
        """Delete a message and the subtree under it, or (``mode="splice"``) the message
        alone, its children re-attached to its parent (see the embedded facade)."""
        h = self._s.scoped(scope)
        path = f"{conversation_path(conversation_id)}/messages/{segment(message_id)}"
        params = None if mode == "subtree" else {"mode": mode}
        sent = self._s.send("DELETE", path, headers=h, params=params)
        return receipt_of(self._s, sent, h)

    def leaves(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Message]:
        h = self._s.scoped(scope)
        params = query_params(limit=limit, cursor=cursor)
        path = f"{conversation_path(conversation_id)}/leaves"
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
        params = query_params(limit=limit, cursor=cursor)
        path = f"{conversation_path(conversation_id)}/messages"
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
        as_of: datetime | str | None = None,
        min_relevance: float = 0.0,
        explain: bool = False,
        explain_ids: Iterable[str] = (),
    ) -> RecallResults:
        """The ``k`` messages of ``scope`` most relevant to ``query``, best first
        (``as_of``: over the messages created by then), with ``pending`` and, for
        ``explain_ids``, ``explained`` beside them (see ``mem.recall.search``)."""
        floor, ids = check_explain(min_relevance, explain_ids)
        if isinstance(exclude_ids, str) or any(True for _ in exclude_ids):
            raise InvalidInput("exclude_ids is not offered by the REST API", field="exclude_ids")
        h = self._s.scoped(scope)
        body = query_params(
            query=query,
            k=k,
            conversation_id=conversation_id,
            leaf_id=leaf_id,
            message_range=message_range,
            include_other_branches=include_other_branches or None,
            as_of=iso_time(as_of, "as_of"),
            min_relevance=floor or None,
            explain=bool(explain) or None,
            explain_ids=ids or None,
        )
        # A search changes nothing: safe to send again.
        return self._s.call(
            "POST",
            "/v1/recall/search",
            decode.recall_results,
            headers=h,
            json=body,
            idempotent=True,
        )


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
        return self._s.get(path, decode.node_history, h, query_params(**options))

    def delete(self, scope: Scope, app_id: str, conversation_id: str, node_id: str) -> None:
        h = self._s.scoped(scope)
        self._s.send("DELETE", self._path(app_id, conversation_id, node_id), headers=h)
