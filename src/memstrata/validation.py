"""Input checks shared by the embedded facade and the remote clients.

Neither surface imports the other: both take a model, a mapping or keyword fields
through :func:`build`, and refuse a missing scope through :func:`checked_scope`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memstrata.errors import InvalidInput
from memstrata.types import Scope

__all__ = ["build", "checked_scope"]

M = TypeVar("M", bound=BaseModel)


def build(model: type[M], value: M | Mapping[str, Any] | None, fields: Mapping[str, Any]) -> M:
    """Accept a model instance, a mapping or keyword fields; bad input is InvalidInput."""
    if isinstance(value, model):
        if fields:
            raise InvalidInput(f"pass a {model.__name__} or keyword fields, not both")
        return value
    data = dict(value or {})
    data.update(fields)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or model.__name__
        raise InvalidInput(
            f"{where}: {first['msg']}", field=where, errors=exc.errors(include_url=False)
        ) from None


def checked_scope(scope: Scope) -> Scope:
    """Every call names its scope; refuse anything else rather than guess an owner."""
    if not isinstance(scope, Scope):
        raise InvalidInput(
            f"scope must be a memstrata.Scope, got {type(scope).__name__}", field="scope"
        )
    return scope
