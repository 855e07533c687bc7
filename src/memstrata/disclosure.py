"""What a client may read of an error: never a driver's words.

Backends translate driver errors into memstrata errors (a unique index into Conflict, a
value the driver cannot store into InvalidInput), and some messages quote the driver
(table and column names, SQL, the driver's limits). REST problems and MCP tool errors
take their text from :func:`client_message`, which swaps such a message for a generic one.
"""

from __future__ import annotations

from http import HTTPStatus

from memstrata.errors import MemstrataError

__all__ = ["client_message", "quotes_its_cause"]

_GENERIC = {
    409: "the request conflicts with data already stored",
    422: "a value is out of range or not valid for the store",
}


def quotes_its_cause(exc: MemstrataError) -> bool:
    """Whether ``exc``'s message repeats the text of a foreign exception it was raised from."""
    seen = exc.__cause__ or exc.__context__
    for _ in range(5):
        if seen is None:
            return False
        if not isinstance(seen, MemstrataError):
            text = str(seen).strip()
            if text and text in exc.message:
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def client_message(exc: MemstrataError) -> str:
    """``exc.message``, or a generic sentence for its status when it quotes a driver."""
    if not quotes_its_cause(exc):
        return exc.message
    try:
        return _GENERIC.get(exc.status, HTTPStatus(exc.status).phrase)
    except ValueError:
        return "the request failed"
