"""The JSON response of every route: one that cannot fail on a stored value.

Values are checked before they are stored (:mod:`memstrata.strictjson`), but a row
written by an older version may still hold ``NaN`` or a lone surrogate. Starlette's
response refuses both (a 500 on every later read of that user's data); this one sends
``null`` for a non-finite number and escapes what UTF-8 cannot encode.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse as _StarletteJSON

from memstrata.strictjson import finite

__all__ = ["JSONResponse"]


class JSONResponse(_StarletteJSON):
    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except ValueError:  # NaN/Infinity, or a lone surrogate (UnicodeEncodeError)
            text = json.dumps(finite(content), allow_nan=False, separators=(",", ":"))
            return text.encode("ascii")
