"""What one opened memory holds, shared by its sync and async facades."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memstrata.backends.registry import Engine, open_engine
from memstrata.config import Settings
from memstrata.errors import ConfigurationError, InvalidInput
from memstrata.runtime import Limits, Runtime
from memstrata.tokens import get_tokenizer
from memstrata.types import Scope

__all__ = ["Core", "build", "checked_scope"]

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


class Core:
    """The engine, runtime and settings of one opened memory."""

    def __init__(self, engine: Engine, runtime: Runtime, settings: Settings) -> None:
        self.engine = engine
        self.rt = runtime
        self.settings = settings

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        blobs: str | None = None,
        redis: str | None = None,
        settings: Settings | None = None,
    ) -> Core:
        s = settings or Settings()
        # blobs and redis are kept for the features that use them (node memory, locks).
        if redis is not None and not redis.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                f"redis URL must start with redis:// or rediss://, got {redis!r}"
            )
        engine = open_engine(url or s.database_url(), sqlite_synchronous=s.sqlite_synchronous)
        rt = Runtime(
            tokenizer=get_tokenizer(s.token_encoding),
            limits=Limits(max_content_bytes=s.max_content_bytes),
        )
        return cls(engine, rt, s)
