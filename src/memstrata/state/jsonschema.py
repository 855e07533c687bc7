"""A small JSON Schema subset for working-memory documents (no dependency).

Supported keywords: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties`` (bool or schema), ``items``, ``enum``, ``minLength``,
``maxLength``, ``minimum``, ``maximum``, ``minItems``, ``maxItems``. Unknown keywords
are ignored, as JSON Schema itself does; that is enough to keep an agent's state
document in shape without pulling a validator into the core install.
"""

from __future__ import annotations

from typing import Any

from memstrata.errors import InvalidInput

__all__ = ["check_schema", "validate"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_schema(schema: Any) -> None:
    """A schema must be an object whose ``type`` names are known."""
    if not isinstance(schema, dict):
        raise InvalidInput("json_schema must be a JSON object", field="json_schema")
    kinds = schema.get("type")
    for kind in [kinds] if isinstance(kinds, str) else kinds or []:
        if kind not in _TYPES:
            raise InvalidInput(f"json_schema: unknown type {kind!r}", field="json_schema")
    for sub in (schema.get("properties") or {}).values():
        check_schema(sub)
    if isinstance(schema.get("items"), dict):
        check_schema(schema["items"])


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False  # JSON keeps booleans and numbers apart; Python does not
    return isinstance(value, _TYPES[kind])


def _fail(where: str, what: str) -> None:
    raise InvalidInput(f"{where}: {what}", field="content")


def _scalar(value: Any, schema: dict[str, Any], where: str) -> None:
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            _fail(where, "shorter than minLength")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            _fail(where, "longer than maxLength")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            _fail(where, "below minimum")
        if "maximum" in schema and value > schema["maximum"]:
            _fail(where, "above maximum")


def _object(value: dict[str, Any], schema: dict[str, Any], where: str) -> None:
    props: dict[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            _fail(where, f"missing required {name!r}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            validate(item, props[key], f"{where}.{key}")
        elif extra is False:
            _fail(where, f"unexpected property {key!r}")
        elif isinstance(extra, dict):
            validate(item, extra, f"{where}.{key}")


def _array(value: list[Any], schema: dict[str, Any], where: str) -> None:
    if len(value) < schema.get("minItems", 0):
        _fail(where, "fewer than minItems")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        _fail(where, "more than maxItems")
    if isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{i}]")


def validate(value: Any, schema: dict[str, Any], where: str = "$") -> None:
    """Raise :class:`InvalidInput` naming the first place where ``value`` breaks ``schema``."""
    kinds = schema.get("type")
    if kinds is not None:
        options = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in options):
            _fail(where, f"expected {' or '.join(options)}")
    if "enum" in schema and value not in schema["enum"]:
        _fail(where, f"not one of {schema['enum']!r}")
    _scalar(value, schema, where)
    if isinstance(value, dict):
        _object(value, schema, where)
    if isinstance(value, list):
        _array(value, schema, where)
