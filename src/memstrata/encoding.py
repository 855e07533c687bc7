"""``to_dict()`` of the domain types: their REST shape, as their wire model encodes it.

The wire models (:mod:`memstrata.wire`) are built on the domain types, so a domain module
cannot import its wire model without a cycle. It asks this registry instead, which
:mod:`memstrata.wire.domain` fills with one encoder per domain type; the registry loads
that module on first use, so ``to_dict()`` works whatever was imported before.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["register", "to_json"]

Encoder = Callable[[Any], dict[str, Any]]

_encoders: dict[type, Encoder] = {}
_loaded = threading.Event()


def register(domain: type, encode: Encoder) -> None:
    _encoders[domain] = encode


def to_json(value: Any) -> dict[str, Any]:
    """The JSON-ready dict of a domain value: what the REST API sends for it."""
    encode = _encoders.get(type(value))
    if encode is None and not _loaded.is_set():
        importlib.import_module("memstrata.wire.domain")  # registers every domain type
        _loaded.set()
        encode = _encoders.get(type(value))
    if encode is None:
        raise TypeError(f"{type(value).__name__} has no wire model")
    return encode(value)
