"""Node memory keys, turns and the stored object format.

Every object is gzip-compressed JSON with ``"version": 1`` and a ``"kind"``;
gzip's CRC catches a truncated or damaged object, which is reported as
:class:`~memstrata.errors.Corruption` naming its key. Ids that go into keys are
validated, so no app, conversation or node id can leave its key prefix.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

from memstrata.encoding import to_json
from memstrata.errors import Corruption, InvalidInput
from memstrata.types import FileRef, dump_files

__all__ = ["VERSION", "NodeKey", "Turn", "check_id", "decode", "encode"]

VERSION = 1
ROOT = "node_memory"

# The scope name rule: letters, digits and ._:@+- only, starting with a letter or digit,
# so no slash, no "..", no NUL can reach a key.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}$")


def check_id(value: object, field: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value:
        raise InvalidInput(
            f"{field} must be 1-128 characters of letters, digits and ._:@+- starting with a "
            f"letter or digit (no '/', '..' or NUL), got {value!r}",
            field=field,
        )
    return value


@dataclass(frozen=True, slots=True)
class NodeKey:
    """One node memory: ``(tenant, app, conversation, node)``."""

    tenant: str
    app_id: str
    conversation_id: str
    node_id: str

    def __post_init__(self) -> None:
        check_id(self.tenant, "tenant")
        check_id(self.app_id, "app_id")
        check_id(self.conversation_id, "conversation_id")
        check_id(self.node_id, "node_id")

    def prefix(self, generation: str) -> str:
        """The folder of one generation (a clear or a delete starts a new one)."""
        check_id(generation, "generation")
        return (
            f"{ROOT}/{self.tenant}/{self.app_id}/{self.conversation_id}/{self.node_id}/"
            f"{generation}/"
        )


@dataclass(frozen=True, slots=True)
class Turn:
    """One dialogue turn of a node: a user input and the assistant's answer.

    ``message_id`` and ``parent_message_id`` are the caller's ids (Dify's
    Message ids); ``uid`` is unique per stored turn, so a turn read twice
    during a compaction is still returned once. ``revision`` is None for a
    message's first turns; turns that replace them carry the id of the flush
    that wrote them (see :mod:`memstrata.nodes.revisions`).
    """

    uid: str
    message_id: str
    parent_message_id: str | None
    user_content: str
    user_files: tuple[FileRef, ...]
    assistant_content: str
    assistant_files: tuple[FileRef, ...]
    created_at: int  # microseconds since the epoch
    revision: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uid": self.uid,
            "message_id": self.message_id,
            "parent_message_id": self.parent_message_id,
            "user": self.user_content,
            "assistant": self.assistant_content,
            "created_at": self.created_at,
        }
        if self.user_files:
            out["user_files"] = dump_files(self.user_files)
        if self.assistant_files:
            out["assistant_files"] = dump_files(self.assistant_files)
        if self.revision is not None:
            out["revision"] = self.revision
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Turn:
        return cls(
            uid=d["uid"],
            message_id=d["message_id"],
            parent_message_id=d.get("parent_message_id"),
            user_content=d["user"],
            user_files=tuple(FileRef.model_validate(f) for f in d.get("user_files", ())),
            assistant_content=d["assistant"],
            assistant_files=tuple(FileRef.model_validate(f) for f in d.get("assistant_files", ())),
            created_at=int(d["created_at"]),
            revision=d.get("revision"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The public shape (REST)."""
        return to_json(self)


def encode(kind: str, body: dict[str, Any]) -> bytes:
    """The one serializer of node memory (and of the benchmark's whole-file baseline)."""
    doc = {"version": VERSION, "kind": kind, **body}
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    return gzip.compress(raw, compresslevel=6, mtime=0)


def decode(data: bytes, key: str, kind: str) -> dict[str, Any]:
    """Decode an object; anything unreadable is Corruption naming ``key``."""
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, zlib.error, ValueError, UnicodeDecodeError) as exc:
        raise Corruption(f"node memory object {key} is damaged: {exc}", key=key) from None
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise Corruption(f"node memory object {key} is not a {kind}", key=key)
    if doc.get("version") != VERSION:
        raise Corruption(
            f"node memory object {key} has layout version {doc.get('version')!r}; "
            f"this memstrata reads version {VERSION}",
            key=key,
        )
    return doc


def decode_turns(data: bytes, key: str, kind: str) -> list[Turn]:
    doc = decode(data, key, kind)
    try:
        return [Turn.from_json(t) for t in doc["turns"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise Corruption(f"node memory object {key} has a malformed turn: {exc}", key=key) from None
