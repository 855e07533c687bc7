"""JSON every store and every client can take back: finite numbers, well-formed strings,
bounded nesting.

Python's ``json`` accepts ``NaN`` and ``Infinity`` (which JSON does not have), lone
UTF-16 surrogates such as ``"\\ud800"`` (which UTF-8 cannot encode), and nesting as deep
as the interpreter's stack. Each of these, once stored, made later reads fail, so values
are checked when they come in (:func:`loads`, :func:`check`) and when they are
serialised for storage (:func:`dumps`). :func:`finite` maps what older versions may
already have stored to something a response can carry.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from memstrata.errors import InvalidInput

__all__ = ["MAX_DEPTH", "check", "dumps", "finite", "loads"]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a request body or a stored value."""

# A lone surrogate can only come from a \\u escape (raw bytes that encode one are not UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _non_finite(name: str) -> NoReturn:
    raise InvalidInput(
        f"the JSON holds {name}, which is not a JSON number; send a finite number or null"
    )


def _too_deep(max_depth: int) -> NoReturn:
    raise InvalidInput(f"the JSON is nested deeper than {max_depth} levels")


def _bad_string(where: str) -> NoReturn:
    raise InvalidInput(f"{where} holds a lone UTF-16 surrogate, which is not valid text")


# One decoder for every call: json.loads with any option builds a new one each time.
_DECODER = json.JSONDecoder(parse_constant=_non_finite)


def check(value: Any, *, max_depth: int = MAX_DEPTH, what: str = "the JSON") -> None:
    """Raise :class:`InvalidInput` when ``value`` (decoded JSON, or tool arguments) holds a
    non-finite float, a string that is not valid Unicode text, or nesting over ``max_depth``."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    _bad_string(what)
        elif isinstance(item, float):
            if not math.isfinite(item):
                _non_finite(repr(item))
        elif isinstance(item, dict):
            if depth >= max_depth:
                _too_deep(max_depth)
            for k, v in item.items():
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(item, list | tuple):
            if depth >= max_depth:
                _too_deep(max_depth)
            stack.extend((v, depth + 1) for v in item)


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode a request body, refusing what :func:`check` refuses (and malformed JSON)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        value = _DECODER.decode(raw.decode("utf-8"))
    except RecursionError:
        _too_deep(max_depth)
    except UnicodeDecodeError:
        raise InvalidInput("the request body is not UTF-8 text") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise InvalidInput(f"the request body is not valid JSON ({exc})") from None
    # The walk costs a pass over the value: only when nesting or a surrogate is possible.
    if raw.count(b"[") + raw.count(b"{") > max_depth or _SURROGATE_ESCAPE.search(raw):
        check(value, max_depth=max_depth, what="the request body")
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` for storage: refuses what :func:`check` refuses with InvalidInput, so
    no path (REST, MCP or the Python API) stores a value that cannot be read back."""
    try:
        text = json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Circular reference" in str(exc):
            raise
        _non_finite("NaN or Infinity")
    except RecursionError:
        _too_deep(MAX_DEPTH)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            _bad_string("a stored value")
    elif _SURROGATE_ESCAPE.search(text.encode("ascii")):  # ensure_ascii escaped it
        check(value, max_depth=1_000_000, what="a stored value")
    return text


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (for rows stored before
    these checks existed; JSON responses cannot carry NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value
