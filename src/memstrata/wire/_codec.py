"""The machinery of wire models: one declaration, three uses.

A wire model is a pydantic model that states a REST resource's JSON shape. Pydantic
gives it its OpenAPI schema (the server's ``response_model``); this module compiles,
once per model, the two converters the hot paths use, straight from the field
annotations, with no validation on the way:

- ``Model.encode(obj)``: a domain object (read by attribute) to a JSON-ready dict, as
  its ``to_dict()`` returns and the server sends;
- ``Model.decode(data, **extra)``: that dict back to the domain type (the remote
  client), with ``extra`` for fields the answer does not carry (a scope's tenant).

How a value crosses depends only on its annotation: a datetime as ISO 8601, an enum
as its value, a nested wire model through its own converters, a pydantic input model
(``FileRef``, ``ToolCall``) as its dump without unset locators; everything else as is.
The converters are generated Python source (as :mod:`dataclasses` does for
``__init__``), so encoding costs what a hand-written ``to_dict()`` costs.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, Union, cast, get_args, get_origin

from pydantic import BaseModel

__all__ = ["Attr", "Derived", "OmitNone", "Via", "Wire"]


@dataclasses.dataclass(frozen=True, slots=True)
class Attr:
    """The domain attribute a field reads and is rebuilt into, when its name differs."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Derived:
    """A field computed from the object on encode and not rebuilt on decode."""

    compute: Callable[[Any], Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Via:
    """Cross through this wire model while the schema shows the field's own annotation
    (a shape documented loosely in a published schema that must not change)."""

    model: type[Wire]


class _OmitNone:
    """Leave the key out of the JSON when the value is None."""


OmitNone = _OmitNone()


class Wire(BaseModel):
    """Base of the wire models; ``__domain__`` is the type ``decode`` builds."""

    __domain__: ClassVar[Any] = None
    __decoders__: ClassVar[dict[tuple[Any, ...], Callable[..., Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__decoders__ = {}

    @classmethod
    def encode(cls, obj: Any) -> dict[str, Any]:
        """``obj`` as this resource's JSON-ready dict."""
        return _encoder(cls)(obj)

    @classmethod
    def decoder(cls, target: Any = None, **nested: Any) -> Callable[..., Any]:
        """The function ``(data, **extra) -> target`` (default ``__domain__``); ``nested``
        names the type a nested wire field builds instead of its own ``__domain__``."""
        key = (target, *sorted(nested.items()))
        found = cls.__decoders__.get(key)
        if found is None:
            found = cls.__decoders__[key] = _compile_decoder(cls, target or cls.__domain__, nested)
        return found

    @classmethod
    def decode(cls, data: Any, **extra: Any) -> Any:
        return cls.decoder()(data, **extra)


# -- field analysis --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    key: str
    attr: str
    annotation: Any
    required: bool
    default: Any  # when not required: what a left-out key decodes as
    omit_none: bool
    derived: Derived | None


def _fields(model: type[Wire]) -> list[_Field]:
    out = []
    for key, info in model.model_fields.items():
        attr, omit, derived = key, False, None
        annotation: Any = info.annotation
        for meta in info.metadata:
            if isinstance(meta, Attr):
                attr = meta.name
            elif isinstance(meta, Derived):
                derived = meta
            elif isinstance(meta, Via):
                annotation = meta.model | None if _optional(annotation)[0] else meta.model
            elif meta is OmitNone:
                omit = True
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        out.append(_Field(key, attr, annotation, info.is_required(), default, omit, derived))
    return out


def _codec_type(annotation: Any, domain_hint: Any) -> Any:
    """The annotation that decides the conversion: the domain's enum where the published
    schema says plain ``str`` (a schema that predates the enum keeps its shape)."""
    optional, tp = _optional(annotation)
    hinted = _optional(domain_hint)[1]
    if tp is str and _is_enum(hinted):
        return hinted | None if optional else hinted
    return annotation


def _optional(annotation: Any) -> tuple[bool, Any]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) < len(get_args(annotation)):
            return True, args[0] if len(args) == 1 else Any
    return False, annotation


def _domain_fields(target: Any) -> dict[str, Any] | None:
    if target is None or not dataclasses.is_dataclass(target):
        return None
    hints = typing.get_type_hints(target)
    return {f.name: hints.get(f.name) for f in dataclasses.fields(target)}


class _Source:
    """Generated source with its namespace: each constant it uses gets a fresh name."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self._counter = 0

    def const(self, value: Any) -> str:
        self._counter += 1
        name = f"_c{self._counter}"
        self.names[name] = value
        return name

    def var(self) -> str:
        self._counter += 1
        return f"_v{self._counter}"

    def function(self, name: str, text: str) -> Callable[..., Any]:
        namespace = dict(self.names)
        exec(text, namespace)  # the source is generated above, from field annotations
        fn: Callable[..., Any] = namespace[name]
        return fn


def _is_wire(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Wire)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel) and not _is_wire(tp)


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Enum)


_HOLE = "\x00"


# -- encoding --------------------------------------------------------------------------------


def _encode_expr(src: _Source, annotation: Any, value: str) -> str | None:
    """An expression converting ``value``, or None when it crosses as it is."""
    optional, tp = _optional(annotation)
    inner: str | None  # a template: _HOLE stands for the value
    if tp is datetime:
        inner = f"{_HOLE}.isoformat()"
    elif _is_enum(tp):
        # The member's own attribute: ``.value`` is a Python-level property of Enum.
        inner = f"{_HOLE}._value_"
    elif _is_wire(tp):
        inner = f"{src.const(_encoder(tp))}({_HOLE})"
    elif _is_model(tp):
        inner = f"{_HOLE}.model_dump(exclude_none=True)"
    elif get_origin(tp) in (list, tuple) and get_args(tp):
        item, items = src.var(), src.var()
        each = _encode_expr(src, get_args(tp)[0], item)
        # Most lists are empty (a message's files and tool calls): list() of an empty one
        # costs less than running a comprehension over it.
        inner = (
            f"list({_HOLE})"
            if each is None
            else f"([{each} for {item} in {items}] if ({items} := {_HOLE}) else list({items}))"
        )
    elif get_origin(tp) is dict and len(get_args(tp)) == 2:
        k, v = src.var(), src.var()
        each = _encode_expr(src, get_args(tp)[1], v)
        inner = None if each is None else f"{{{k}: {each} for {k}, {v} in {_HOLE}.items()}}"
    else:
        inner = None
    if inner is None:
        return None
    if not optional:
        return inner.replace(_HOLE, value)
    held = src.var()
    return f"(None if ({held} := {value}) is None else {inner.replace(_HOLE, held)})"


def _encoder(model: type[Wire]) -> Callable[[Any], dict[str, Any]]:
    """The model's compiled encoder. The first call puts it in the place of ``encode``
    on the model, so later calls go straight to the generated function."""
    found = model.__dict__.get("encode")
    if isinstance(found, staticmethod):
        return cast("Callable[[Any], dict[str, Any]]", found.__func__)
    fn = _compile_encoder(model)
    model.encode = staticmethod(fn)  # type: ignore[assignment,method-assign]
    return fn


def _compile_encoder(model: type[Wire]) -> Callable[[Any], dict[str, Any]]:
    src = _Source()
    domain = model.__domain__
    hints = _domain_fields(domain) or {}
    items, omitted = [], []
    for f in _fields(model):
        annotation = _codec_type(f.annotation, hints.get(f.attr))
        if f.derived is not None:
            value = f"{src.const(f.derived.compute)}(o)"
        elif domain is not None and not hasattr(domain, f.attr):
            continue  # not the domain's: the surface that owns it adds it (a job's "blocked")
        else:
            value = f"o.{f.attr}"
        if f.omit_none:
            omitted.append((f.key, value, _optional(annotation)[1]))
        else:
            items.append(f"{f.key!r}: {_encode_expr(src, annotation, value) or value}")
    lines = ["def encode(o):", f"    out = {{{', '.join(items)}}}"]
    for key, value, annotation in omitted:
        held = src.var()
        lines.append(f"    if ({held} := {value}) is not None:")
        lines.append(f"        out[{key!r}] = {_encode_expr(src, annotation, held) or held}")
    lines.append("    return out")
    return src.function("encode", "\n".join(lines))


# -- decoding --------------------------------------------------------------------------------


def _decode_expr(
    src: _Source, annotation: Any, value: str, domain_hint: Any, nested: Any = None
) -> str:
    optional, tp = _optional(annotation)
    inner: str | None  # a template: _HOLE stands for the value
    if tp is datetime:
        inner = f"{src.const(datetime.fromisoformat)}({_HOLE})"
    elif _is_enum(tp):
        inner = f"{src.const(tp)}({_HOLE})"
    elif _is_wire(tp):
        inner = f"{src.const(tp.decoder(nested))}({_HOLE})"
    elif _is_model(tp):
        inner = f"{src.const(tp.model_validate)}({_HOLE})"
    elif tp in (int, float, bool):
        inner = f"{tp.__name__}({_HOLE})"
    elif get_origin(tp) in (list, tuple) and get_args(tp):
        item = src.var()
        each = _decode_expr(src, get_args(tp)[0], item, None, nested)
        seq = "tuple" if get_origin(_optional(domain_hint)[1]) is tuple else "list"
        inner = f"{seq}({_HOLE})" if each == item else f"{seq}({each} for {item} in {_HOLE})"
    elif get_origin(tp) is dict:
        k, v = src.var(), src.var()
        each = _decode_expr(src, get_args(tp)[1], v, None, nested) if get_args(tp) else v
        inner = (
            f"dict({_HOLE})" if each == v else f"{{{k}: {each} for {k}, {v} in {_HOLE}.items()}}"
        )
    else:  # str, Literal, Any: as it is
        inner = None
    if inner is None:
        return value
    if not optional:
        return inner.replace(_HOLE, value)
    held = src.var()
    return f"(None if ({held} := {value}) is None else {inner.replace(_HOLE, held)})"


def _compile_decoder(model: type[Wire], target: Any, nested: dict[str, Any]) -> Callable[..., Any]:
    if target is None:
        raise TypeError(f"{model.__name__} has no __domain__ to decode into")
    src = _Source()
    domain = _domain_fields(target)
    args = []
    for f in _fields(model):
        if f.derived is not None or (domain is not None and f.attr not in domain):
            continue
        value = f"d[{f.key!r}]" if f.required else f"d.get({f.key!r}, {src.const(f.default)})"
        hint = None if domain is None else domain[f.attr]
        annotation = _codec_type(f.annotation, hint)
        args.append(f"{f.attr}={_decode_expr(src, annotation, value, hint, nested.get(f.key))}")
    args.append("**extra")
    text = f"def decode(d, **extra):\n    return {src.const(target)}({', '.join(args)})"
    return src.function("decode", text)
