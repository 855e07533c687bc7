"""Generate the reference pages: ``python scripts/gen_docs.py [--check]``.

- ``docs/configuration.md`` from the settings models (``memstrata.config.Settings`` and
  the embedder's ``EmbedSettings``): one row per field, grouped by name prefix.
- ``docs/rest-reference.md`` from the OpenAPI document of ``create_app`` over a
  temporary in-memory store: one section per path and method.

Both pages are pure functions of the models and the app, so they are generated, never
edited: ``--check`` (run by the tests) writes nothing and exits 1 naming each page that
no longer matches what it would write. The renderers take plain data (a model class,
an OpenAPI dict) so they can be tested without files.
"""

from __future__ import annotations

import re
import sys
import tempfile
import types
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PAGE = Path("docs/configuration.md")
REST_PAGE = Path("docs/rest-reference.md")
GENERATED = "_Generated from {source} by `scripts/gen_docs.py`: change those and run it again._"

# -- shared Markdown helpers -------------------------------------------------------------------


def cell(text: str) -> str:
    """Text safe inside one table cell: a single line with its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def code(text: str) -> str:
    """Inline code; a value containing a backtick uses a double-backtick fence."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# -- configuration ----------------------------------------------------------------------------

# (title, name prefixes). A field belongs to the first group with a prefix that equals its
# name or starts it followed by "_"; unmatched fields land in "Other", so a new field is
# documented before anyone sorts it.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Core", ("home", "db", "token", "sqlite", "max_content", "local")),
    ("Server", ("host", "port", "max_body")),
    ("LLM", ("llm",)),
    ("Recall and embeddings", ("recall", "embedder", "embed")),
    ("Long-term memory", ("longterm",)),
    ("Rate limits", ("rate_limit",)),
    ("Logs", ("log",)),
    ("Blobs and S3", ("blobs", "blob", "s3")),
    ("Redis and worker", ("redis", "worker")),
    ("Retention", ("retention",)),
)
OTHER = "Other"

_TYPE_NAMES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    Path: "path",
    SecretStr: "string (secret)",
}


def group_of(name: str, groups: Sequence[tuple[str, Sequence[str]]] = GROUPS) -> str:
    for title, prefixes in groups:
        if any(name == p or name.startswith(p + "_") for p in prefixes):
            return title
    return OTHER


def env_name(model: type[BaseSettings], name: str, info: FieldInfo) -> str:
    """The environment variable pydantic-settings reads for a field (an alias wins)."""
    if isinstance(info.validation_alias, str):
        return info.validation_alias.upper()
    if info.alias:
        return info.alias.upper()
    prefix = str(model.model_config.get("env_prefix", ""))
    return f"{prefix}{name}".upper()


def _choices(annotation: Any) -> list[Any] | None:
    """The values of a Literal (also inside ``X | None``), or None."""
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _choices(arg)
            if found is not None:
                return found
    return None


def type_name(annotation: Any) -> str:
    """A reader's name for a field's type: ``string``, ``integer or unset``, ..."""
    origin = get_origin(annotation)
    if origin is Literal:
        kinds = {type(v) for v in get_args(annotation)}
        return _TYPE_NAMES.get(kinds.pop(), "value") if len(kinds) == 1 else "value"
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or unset" if type(None) in args else "")
    return _TYPE_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def literal_text(value: Any) -> str:
    """A value as written in an environment variable."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):
        return value.as_posix()
    return str(value)


def default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return "computed"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "unset"
    return code(literal_text(info.default))


_BOUNDS: tuple[tuple[type[Any], str, str], ...] = (
    (at.Gt, "gt", ">"),
    (at.Ge, "ge", ">="),
    (at.Lt, "lt", "<"),
    (at.Le, "le", "<="),
    (at.MinLen, "min_length", "length >="),
    (at.MaxLen, "max_length", "length <="),
)


def constraints_text(info: FieldInfo) -> str:
    """Bounds and choices of a field, e.g. ``>= 1, <= 300`` or ``one of `a`, `b` ``."""
    parts: list[str] = []
    for item in info.metadata:
        for kind, attr, sign in _BOUNDS:
            if isinstance(item, kind):
                parts.append(f"{sign} {literal_text(getattr(item, attr))}")
    choices = _choices(info.annotation)
    if choices is not None:
        parts.append("one of " + ", ".join(code(literal_text(c)) for c in choices))
    return ", ".join(parts)


_CONFIG_INTRO = """\
Every setting has a default, so memstrata runs with none of them set. A setting is read
from an environment variable (`MEMSTRATA_` and the field name in capitals; names are not
case-sensitive) or given in Python, where a keyword argument wins over the environment:

```python
from memstrata import Memory
from memstrata.config import Settings

mem = Memory.open(settings=Settings(home="/srv/memstrata", longterm_capture=True))
```

Environment values are parsed into the field's type: booleans take `true`/`false` (or
`1`/`0`), numbers are decimal. A default of "unset" means the feature is off or derived
(e.g. `MEMSTRATA_DB` unset: SQLite under `MEMSTRATA_HOME`). A value outside a field's
constraints raises a validation error naming the field when the settings are read.

The embedder's settings (`MEMSTRATA_EMBEDDER`, `MEMSTRATA_EMBED_*`) belong to a model of
their own, `memstrata.embeddings.registry.EmbedSettings`, read from the environment
when a store opens without an explicit `embedder=`; `Settings(...)` ignores them.
"""


def render_configuration(models: Sequence[type[BaseSettings]]) -> str:
    """The configuration page for ``models`` (fields of later models follow earlier ones)."""
    rows: dict[str, list[list[str]]] = {}
    for model in models:
        for name, info in model.model_fields.items():
            rows.setdefault(group_of(name), []).append(
                [
                    code(env_name(model, name, info)),
                    type_name(info.annotation),
                    default_text(info),
                    constraints_text(info),
                    info.description or "",
                ]
            )
    sources = " and ".join(f"`{m.__module__}.{m.__name__}`" for m in models)
    lines = [
        "# Configuration",
        "",
        GENERATED.format(source=sources),
        "",
        _CONFIG_INTRO.rstrip("\n"),
    ]
    for title in [t for t, _ in GROUPS] + [OTHER]:
        if title not in rows:
            continue
        lines += ["", f"## {title}", ""]
        lines += table(["variable", "type", "default", "constraints", "description"], rows[title])
    return "\n".join(lines) + "\n"


# -- REST reference ---------------------------------------------------------------------------

METHODS = ("get", "post", "put", "patch", "delete", "head", "options")
_SCHEMA_PREFIX = "#/components/schemas/"

_REST_INTRO = """\
Every path and method of the `/v1` API and of the health and metrics probes, as the
server's OpenAPI document (served at `/openapi.json`) describes them. [rest.md](rest.md)
explains what this page does not repeat: keys and scope, status codes, pagination and
conditional writes. Every error answer is `application/problem+json` ([Problem](#problem)).
"""


def ref_name(ref: str) -> str:
    if not ref.startswith(_SCHEMA_PREFIX):
        raise ValueError(f"unsupported $ref {ref!r}: only {_SCHEMA_PREFIX}... is resolved")
    return ref[len(_SCHEMA_PREFIX) :]


def resolve(schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with any ``$ref`` chain followed into the components."""
    seen: set[str] = set()
    while "$ref" in schema:
        name = ref_name(schema["$ref"])
        if name in seen:
            raise ValueError(f"$ref cycle through {name}")
        seen.add(name)
        schema = schemas[name]
    return schema


def anchor(name: str) -> str:
    """The heading anchor Markdown renderers give a schema's ``### Name`` heading."""
    return "#" + re.sub(r"[^a-z0-9_-]", "", name.lower())


def number_text(value: Any) -> str:
    """1.0 -> 1, 0.5 -> 0.5: JSON Schema bounds come back as floats."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _json_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or '""'
    return number_text(value)


def _is_enum(schema: Mapping[str, Any]) -> bool:
    return "enum" in schema and not schema.get("properties")


def schema_type(schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> str:
    """A one-line reading of a JSON Schema: ``string or null``, ``array of [FileRef](#fileref)``."""
    if "$ref" in schema:
        name = ref_name(schema["$ref"])
        target = schemas[name]
        return schema_type(target, schemas) if _is_enum(target) else f"[{name}]({anchor(name)})"
    if "const" in schema:
        return code(_json_value(schema["const"]))
    if "enum" in schema:
        return "one of " + ", ".join(code(_json_value(v)) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            names: list[str] = []
            for option in schema[key]:
                text = schema_type(option, schemas)
                if text not in names:
                    names.append(text)
            return " or ".join(names)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(schema_type({**schema, "type": k}, schemas) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return "array" if not items else f"array of {schema_type(items, schemas)}"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and extra:
            return f"object of {schema_type(extra, schemas)}"
        return "object"
    if isinstance(kind, str):
        return f"{kind} ({schema['format']})" if "format" in schema else kind
    return "any"


_SCHEMA_BOUNDS = (
    ("minimum", ">="),
    ("exclusiveMinimum", ">"),
    ("maximum", "<="),
    ("exclusiveMaximum", "<"),
    ("minLength", "length >="),
    ("maxLength", "length <="),
    ("minItems", "items >="),
    ("maxItems", "items <="),
)


def schema_notes(schema: Mapping[str, Any]) -> str:
    """Description, default and bounds of a field (bounds also from its anyOf options)."""
    parts: list[str] = []
    description = schema.get("description")
    if description:
        parts.append(" ".join(str(description).split()).rstrip(".") + ".")
    if "default" in schema:
        parts.append(f"Default: {code(_json_value(schema['default']))}.")
    bounds: list[str] = []
    for option in [schema, *schema.get("anyOf", ())]:
        for key, sign in _SCHEMA_BOUNDS:
            if key in option:
                bounds.append(f"{sign} {number_text(option[key])}")
        if "pattern" in option:
            bounds.append(f"matches {code(option['pattern'])}")
    if bounds:
        parts.append("Constraints: " + ", ".join(bounds) + ".")
    return " ".join(parts)


def field_rows(schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> list[list[str]]:
    """name, type, required, notes for each property of an object schema."""
    required = set(schema.get("required", ()))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        needed = "yes" if name in required else "no"
        rows.append([code(name), schema_type(prop, schemas), needed, schema_notes(prop)])
    return rows


def _body_target(body: Mapping[str, Any]) -> tuple[str, bool, Mapping[str, Any]]:
    """Media type, whether the body may be left out, and its schema (null option dropped)."""
    content: Mapping[str, Any] = body.get("content", {})
    media = next(iter(content), "application/json")
    schema: Mapping[str, Any] = content.get(media, {}).get("schema", {})
    optional = not body.get("required", False)
    options = schema.get("anyOf", [schema])
    real = [o for o in options if o.get("type") != "null"]
    if len(real) < len(options):  # FastAPI's ``Model | None`` body: it may be left out
        optional = True
    return media, optional, real[0] if len(real) == 1 else schema


def _render_body(body: Mapping[str, Any], schemas: Mapping[str, Any]) -> list[str]:
    """The body's fields inline (its own schema is not repeated under Schemas)."""
    media, optional, target = _body_target(body)
    resolved = resolve(target, schemas)
    name = code(ref_name(target["$ref"])) if "$ref" in target else schema_type(target, schemas)
    head = f"Request body (`{media}`, {'optional' if optional else 'required'}): {name}."
    lines = ["", head]
    if resolved.get("properties"):
        rows = field_rows(resolved, schemas)
        lines += ["", *table(["field", "type", "required", "description"], rows)]
    return lines


def _response_body(response: Mapping[str, Any], schemas: Mapping[str, Any]) -> str:
    content: Mapping[str, Any] = response.get("content", {})
    if not content:
        return "none"
    media = next(iter(content))
    schema = content[media].get("schema", {})
    if media.startswith("text/"):
        return f"text (`{media}`)"
    plain = media in ("application/json", "application/problem+json")
    return schema_type(schema, schemas) + ("" if plain else f" (`{media}`)")


def _render_operation(
    method: str, path: str, op: Mapping[str, Any], schemas: Mapping[str, Any]
) -> list[str]:
    lines = ["", f"## {method.upper()} {path}", ""]
    if op.get("summary"):
        lines.append(str(op["summary"]).rstrip(".") + ".")
    if op.get("description"):
        lines += ["", " ".join(str(op["description"]).split())]
    auth = "API key (`Authorization: Bearer`)" if op.get("security") else "none"
    lines += ["", f"Authentication: {auth}."]
    params = op.get("parameters", [])
    if params:
        rows = [
            [
                code(p["name"]),
                p["in"],
                "yes" if p.get("required") else "no",
                schema_type(p.get("schema", {}), schemas),
                schema_notes({**p.get("schema", {}), "description": p.get("description", "")}),
            ]
            for p in params
        ]
        lines += [
            "",
            "Parameters:",
            "",
            *table(["name", "in", "required", "type", "description"], rows),
        ]
    if "requestBody" in op:
        lines += _render_body(op["requestBody"], schemas)
    responses = sorted(op.get("responses", {}).items())
    if responses:
        rows = [
            [f"`{c}`", r.get("description", ""), _response_body(r, schemas)] for c, r in responses
        ]
        lines += ["", "Responses:", "", *table(["status", "description", "body"], rows)]
    return lines


def _referenced(node: Any, schemas: Mapping[str, Any], found: set[str]) -> None:
    """Collect every component schema ``node`` reaches, following refs transitively."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref_name(ref) not in found:
            found.add(ref_name(ref))
            _referenced(schemas[ref_name(ref)], schemas, found)
        for value in node.values():
            _referenced(value, schemas, found)
    elif isinstance(node, list):
        for value in node:
            _referenced(value, schemas, found)


def _render_schema(name: str, schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> list[str]:
    lines = ["", f"### {name}", ""]
    if schema.get("description"):
        lines += [" ".join(str(schema["description"]).split()), ""]
    if schema.get("properties"):
        lines += table(["field", "type", "required", "description"], field_rows(schema, schemas))
    else:
        lines.append(f"Type: {schema_type(schema, schemas)}.")
    return lines


def operations(doc: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(method, path, operation), paths sorted, methods in a fixed order within a path."""
    found = []
    for path in sorted(doc.get("paths", {})):
        item = doc["paths"][path]
        found += [(m, path, item[m]) for m in METHODS if m in item]
    return found


def render_rest_reference(doc: Mapping[str, Any]) -> str:
    """The REST reference page for an OpenAPI 3 document."""
    schemas: Mapping[str, Any] = doc.get("components", {}).get("schemas", {})
    ops = operations(doc)
    source = "the OpenAPI document of `memstrata.server.create_app`"
    lines = ["# REST reference", "", GENERATED.format(source=source), "", _REST_INTRO.rstrip("\n")]
    description = doc.get("info", {}).get("description")
    if description:
        lines += ["", " ".join(str(description).split())]
    lines += [
        "",
        *table(
            ["method", "path", "summary"],
            [[m.upper(), code(p), op.get("summary", "")] for m, p, op in ops],
        ),
    ]
    for method, path, op in ops:
        lines += _render_operation(method, path, op, schemas)
    used: set[str] = set()
    for _, _, op in ops:
        _referenced([op.get("parameters", []), op.get("responses", {})], schemas, used)
        if "requestBody" in op:  # its fields are inline; only the types they name
            _referenced(resolve(_body_target(op["requestBody"])[2], schemas), schemas, used)
    if used:
        lines += ["", "## Schemas"]
        for name in sorted(n for n in used if not _is_enum(schemas[n])):  # enums are inline
            lines += _render_schema(name, schemas[name], schemas)
    return "\n".join(lines) + "\n"


def load_openapi() -> dict[str, Any]:
    """The OpenAPI document of an app over a throwaway in-memory store.

    Settings come from defaults only (never the environment), so the page does not
    depend on who runs the generator.
    """
    from memstrata import AsyncMemory
    from memstrata.config import Settings
    from memstrata.server import create_app

    class Defaults(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings,)  # defaults and the arguments below, nothing else

    with tempfile.TemporaryDirectory() as home:
        settings = Defaults(home=Path(home), worker="off")
        mem = AsyncMemory.open("sqlite:///:memory:", settings=settings)
        try:
            return create_app(mem, settings).openapi()
        finally:
            mem.core.close()


# -- the pages --------------------------------------------------------------------------------


def pages() -> dict[Path, str]:
    """Each generated page (path relative to the repository root) and its text."""
    from memstrata.config import Settings
    from memstrata.embeddings.registry import EmbedSettings

    return {
        CONFIG_PAGE: render_configuration([Settings, EmbedSettings]),
        REST_PAGE: render_rest_reference(load_openapi()),
    }


def stale_pages(wanted: Mapping[Path, str], root: Path) -> list[Path]:
    """The pages under ``root`` whose text differs from ``wanted`` (or that are missing)."""
    stale = []
    for path, text in wanted.items():
        target = root / path
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(path)
    return stale


def main(argv: Sequence[str]) -> int:
    wanted = pages()
    if "--check" in argv:
        stale = stale_pages(wanted, ROOT)
        for path in stale:
            print(f"{path.as_posix()} is stale: run python scripts/gen_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in wanted.items():
        (ROOT / path).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
