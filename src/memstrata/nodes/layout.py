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

from memstrata.domain.nodes import Turn
from memstrata.errors import Corruption, InvalidInput

__all__ = [
    "VERSION",
    "NodeKey",
    "Turn",
    "check_id",
    "decode",
    "decode_turns",
    "encode",
    "mentions",
    "parse",
    "parse_turns",
    "unpack",
]

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

    def root(self) -> str:
        """The folder of every generation of this node memory."""
        return f"{ROOT}/{self.tenant}/{self.app_id}/{self.conversation_id}/{self.node_id}/"

    def prefix(self, generation: str) -> str:
        """The folder of one generation (a clear or a delete starts a new one)."""
        check_id(generation, "generation")
        return f"{self.root()}{generation}/"


def encode(kind: str, body: dict[str, Any]) -> bytes:
    """The one serializer of node memory (and of the benchmark's whole-file baseline)."""
    doc = {"version": VERSION, "kind": kind, **body}
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    return gzip.compress(raw, compresslevel=6, mtime=0)


def unpack(data: bytes, key: str) -> bytes:
    """An object's JSON text, unparsed; a damaged one is Corruption naming ``key``."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise Corruption(f"node memory object {key} is damaged: {exc}", key=key) from None


def mentions(raw: bytes, text: str) -> bool | None:
    """Whether the JSON text ``raw`` (from :func:`unpack`) holds the JSON string ``text``
    anywhere; None when that cannot be told from its bytes (a string JSON may escape in
    more than one way)."""
    if not text.isascii() or not text.isprintable() or '"' in text or "\\" in text:
        return None
    return f'"{text}"'.encode() in raw


def decode(data: bytes, key: str, kind: str) -> dict[str, Any]:
    """Decode an object; anything unreadable is Corruption naming ``key``."""
    return parse(unpack(data, key), key, kind)


def parse(raw: bytes, key: str, kind: str) -> dict[str, Any]:
    """Parse an object's text (from :func:`unpack`); Corruption naming ``key`` if bad."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
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
    return parse_turns(unpack(data, key), key, kind)


def parse_turns(raw: bytes, key: str, kind: str) -> list[Turn]:
    """The turns of an object's text (from :func:`unpack`)."""
    doc = parse(raw, key, kind)
    try:
        return [Turn.from_json(t) for t in doc["turns"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise Corruption(f"node memory object {key} has a malformed turn: {exc}", key=key) from None
