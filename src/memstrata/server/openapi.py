"""The OpenAPI document: FastAPI's, plus the problem shape on every error response.

Also adds the NewMessage schema, because the append route reads its body raw
(to keep a left-out ``parent_id`` apart from ``null``) and so FastAPI cannot
see its model.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from memstrata.server.problems import PROBLEM_JSON, Problem
from memstrata.types import NewMessage

__all__ = ["install_openapi"]

_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

_COMMON_ERRORS = {
    "401": "Missing, unknown or revoked API key.",
    "403": "The key may not do this (a user key on an admin route, or with admin headers).",
    "413": "The request body is over the size limit.",
    "422": "Invalid input, or an admin key without the X-Memstrata-User header on a user route.",
    "503": "A backend is unavailable.",
}


def _add_model(schemas: dict[str, Any], model: type[BaseModel]) -> None:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        schemas.setdefault(name, sub)
    schemas[model.__name__] = schema


def _document_errors(operation: dict[str, Any], authenticated: bool) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if authenticated:
        for code, text in _COMMON_ERRORS.items():
            responses.setdefault(code, {"description": text})
    for code, response in responses.items():
        if code.isdigit() and int(code) >= 400:
            response["content"] = {PROBLEM_JSON: {"schema": _PROBLEM_REF}}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        _add_model(schemas, NewMessage)
        # Left out and null mean different things, so parent_id has no default to show.
        parent = schemas["NewMessage"]["properties"]["parent_id"]
        parent.pop("default", None)
        parent["description"] = (
            "Left out: after the active leaf. null: a new root. An id: a child of that message."
        )
        # Read by the append route beside the message's fields (prompt provenance).
        schemas["NewMessage"]["properties"]["context_id"] = {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "title": "Context Id",
            "description": "Links this assistant reply to a recorded context "
            "(POST .../context with record: true), in the same transaction.",
        }
        _add_model(schemas, Problem)
        for path, item in doc.get("paths", {}).items():
            for operation in item.values():
                _document_errors(operation, authenticated=path.startswith("/v1/"))
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
