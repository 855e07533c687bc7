"""Stable conversation ids for a framework's own session or thread ids.

Frameworks name a chat by any string (``"user-42-chat"``, ``"1"``, a UUID); memstrata
conversation ids are UUIDs. :func:`conversation_id_for` maps one to the other: a UUID
stays itself (so an id that came from memstrata finds its conversation), and any other
string becomes a name-based UUID of the scope and the string, so the same session of
the same tenant, user and agent always reaches the same conversation, and the same
string of another user reaches another one.
"""

from __future__ import annotations

import uuid

from memstrata.errors import InvalidInput
from memstrata.types import Scope

__all__ = ["conversation_id_for"]

# Fixed forever: changing it would move every mapped session to a new conversation.
_NAMESPACE = uuid.UUID("d3d6a7c0-59d4-4ac9-9598-97fae0092dfe")


def conversation_id_for(scope: Scope, session_id: str) -> str:
    """The conversation id of a framework session id (see the module doc)."""
    if not isinstance(session_id, str) or not session_id or "\x00" in session_id:
        raise InvalidInput("a session id must be a non-empty string", field="session_id")
    try:
        return str(uuid.UUID(session_id))
    except ValueError:
        pass
    name = "\x1f".join((scope.tenant, scope.user, scope.agent or "", session_id))
    return str(uuid.uuid5(_NAMESPACE, name))
