"""Instants as the store keeps them: integer microseconds since the epoch, UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstrata.errors import InvalidInput

__all__ = ["EPOCH", "from_micros", "parse_instant", "to_micros"]


def to_micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1_000_000)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_micros(value: int) -> datetime:
    # Exact integer arithmetic, and about 3x cheaper than fromtimestamp() on a float.
    return EPOCH + timedelta(microseconds=value)


def parse_instant(value: object, field: str) -> int | None:
    """``value`` (ISO 8601 text or a ``datetime``; None passes) as microseconds."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_micros(value)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.endswith(("z", "Z")):
            text = text[:-1] + "+00:00"
        try:
            return to_micros(datetime.fromisoformat(text))
        except ValueError:
            pass
    raise InvalidInput(f"{field} must be an ISO 8601 time", field=field)
