"""The JSON response of every route: encoded once, fast, and never failing on a stored value.

Routes hand over the wire model's dict (already JSON-ready) and orjson encodes it in
native code; FastAPI does not validate it again. Values are checked before they are
stored (:mod:`memstrata.strictjson`), but a row written by an older version may still
hold ``NaN`` or a lone surrogate: orjson sends ``null`` for a non-finite number, and a
lone surrogate (or anything else orjson refuses, such as an integer over 64 bits)
takes the standard library path, which escapes what UTF-8 cannot encode.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi.responses import JSONResponse as _StarletteJSON

from memstrata.strictjson import finite

__all__ = ["JSONResponse", "render_json"]


def render_json(content: Any) -> bytes:
    """The body of a :class:`JSONResponse` of ``content``."""
    try:
        return orjson.dumps(content)
    except orjson.JSONEncodeError:
        pass
    try:  # Starlette's own encoding
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8")
    except ValueError:  # NaN/Infinity, or a lone surrogate (UnicodeEncodeError)
        text = json.dumps(finite(content), allow_nan=False, separators=(",", ":"))
        return text.encode("ascii")


class JSONResponse(_StarletteJSON):
    def render(self, content: Any) -> bytes:
        return render_json(content)
