"""Every ``/v1`` JSON answer states its shape in the OpenAPI document, and the answers
are what those shapes say.

The shapes are a public contract: ``SHAPES`` pins, for the routes that published no
schema before, the keys and JSON types of a real answer as they were then, so stating
the schema changed nothing on the wire.
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI

pytestmark = pytest.mark.anyio

JSON = "application/json"


def unstated(document: dict[str, Any]) -> list[str]:
    """The ``/v1`` 2xx JSON answers of an OpenAPI document that have no schema."""
    missing = []
    for path, operations in document["paths"].items():
        if not path.startswith("/v1"):
            continue
        for method, operation in operations.items():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status.startswith("2") and JSON in content and not content[JSON].get("schema"):
                    missing.append(f"{method.upper()} {path} {status}")
    return missing


def test_the_walk_finds_an_answer_without_a_schema() -> None:
    document = {
        "paths": {
            "/v1/a": {"get": {"responses": {"200": {"content": {JSON: {"schema": {}}}}}}},
            "/v1/b": {
                "put": {"responses": {"200": {"content": {JSON: {"schema": {"$ref": "x"}}}}}}
            },
            "/v1/c": {"delete": {"responses": {"204": {"description": "gone"}}}},
            "/health": {"get": {"responses": {"200": {"content": {JSON: {"schema": {}}}}}}},
        }
    }
    assert unstated(document) == ["GET /v1/a 200"]


def test_every_v1_json_answer_states_its_shape(app: FastAPI) -> None:
    assert unstated(app.openapi()) == []


def shape(value: Any) -> Any:
    """The keys and JSON types of ``value`` (a list by its first item)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def answer_schema(document: dict[str, Any], method: str, path: str, status: int) -> Any:
    """The published schema of one answer, with the document's components to resolve it."""
    response = document["paths"][path][method]["responses"][str(status)]
    return {**response["content"][JSON]["schema"], "components": document["components"]}


# The shapes of real answers as they were sent before these routes published a schema
# (the answers the scenario below gets; `document`, `state`, `data` are what it stored).
_PLAN = {"conversation_id": "str", "document": {"a": "int"}, "updated_at": "str", "version": "int"}


_ITERATION = {
    "attempt": "int",
    "conversation_id": "str",
    "created_at": "str",
    "detail": {"k": "int"},
    "error": "str",
    "outcome": "str",
    "seq": "int",
    "task": "str",
}


_SNAPSHOT = {
    "conversation_id": "str",
    "created_at": "str",
    "data": {"x": ["int"]},
    "run_id": "str",
    "updated_at": "str",
}


_CHECKPOINT = {
    "conversation_id": "str",
    "created_at": "str",
    "expires_at": "str",
    "key": "str",
    "name": "str",
    "run_id": "str",
    "state": {"s": "int"},
    "updated_at": "str",
}


_WORKING = {
    "content": "str",
    "conversation_id": "NoneType",
    "format": "str",
    "json_schema": "NoneType",
    "scope": "str",
    "template": "NoneType",
    "updated_at": "str",
    "version": "int",
}


_JOB = {
    "agent": "NoneType",
    "attempts": "int",
    "conversation_id": "str",
    "created_at": "str",
    "enqueue_count": "int",
    "finished_at": "NoneType",
    "first_enqueued_at": "str",
    "flags": {},
    "id": "str",
    "key": "str",
    "kind": "str",
    "last_error": "NoneType",
    "max_attempts": "int",
    "request_id": "str",
    "run_after": "str",
    "status": "str",
    "updated_at": "str",
    "user": "str",
}

# (method, path as the OpenAPI document names it, status) -> the answer's shape.
SHAPES: dict[tuple[str, str, int], Any] = {
    ("get", "/v1/checkpoints/{name}/{run_id}", 200): _CHECKPOINT,
    ("get", "/v1/conversations/{cid}/iterations", 200): {
        "items": [_ITERATION],
        "next_cursor": "NoneType",
    },
    ("get", "/v1/conversations/{cid}/plan", 200): _PLAN,
    ("get", "/v1/conversations/{cid}/runs/{run_id}/snapshot", 200): _SNAPSHOT,
    ("get", "/v1/memory/export", 200): {
        "facts": [
            {
                "category": "str",
                "confidence": "float",
                "content": "str",
                "createdAt": "str",
                "id": "str",
                "source": "str",
            }
        ],
        "history": {
            "earlierContext": {"summary": "str", "updatedAt": "str"},
            "longTermBackground": {"summary": "str", "updatedAt": "str"},
            "recentMonths": {"summary": "str", "updatedAt": "str"},
        },
        "lastUpdated": "str",
        "user": {
            "personalContext": {"summary": "str", "updatedAt": "str"},
            "topOfMind": {"summary": "str", "updatedAt": "str"},
            "workContext": {"summary": "str", "updatedAt": "str"},
        },
        "version": "str",
    },
    ("get", "/v1/working-memory", 200): _WORKING,
    ("post", "/v1/conversations/{cid}/compact", 200): {
        "outcome": "str",
        "reason": "str",
        "summary": "NoneType",
    },
    ("post", "/v1/conversations/{cid}/compact", 202): {
        "job": {**_JOB, "payload": {"leaf_id": "NoneType"}}
    },
    ("post", "/v1/conversations/{cid}/context", 200): {
        "messages": [{"content": "str", "role": "str"}],
        "report": {
            "budget": "int",
            "cache": {"breakpoint": "int", "prefix_tokens": "int"},
            "compaction_due": "bool",
            "covered_up_to": "NoneType",
            "dropped": [],
            "encoding": "str",
            "hash": "str",
            "layout": "str",
            "leaf_id": "str",
            "newest_turn_over_budget": "bool",
            "over_budget": "bool",
            "summary_id": "NoneType",
            "tiers": {
                "facts": {"asked": "int", "granted": "int", "items": "int"},
                "iterations": {"asked": "int", "granted": "int", "items": "int"},
                "plan": {"asked": "int", "granted": "int", "items": "int"},
                "profile": {"asked": "int", "granted": "int", "items": "int"},
                "recall": {"asked": "int", "granted": "int", "items": "int", "pending": "int"},
                "recent": {"asked": "int", "granted": "int", "items": "int"},
                "summary": {"asked": "int", "granted": "int", "items": "int"},
                "system": {"asked": "int", "granted": "int", "items": "int"},
                "working": {"asked": "int", "granted": "int", "items": "int"},
            },
            "total": "int",
        },
    },
    ("post", "/v1/conversations/{cid}/iterations", 201): _ITERATION,
    ("post", "/v1/conversations/{cid}/observe", 202): {
        "job": {**_JOB, "payload": {"leaf_id": "str"}}
    },
    ("put", "/v1/checkpoints/{name}/{run_id}", 200): _CHECKPOINT,
    ("put", "/v1/conversations/{cid}/plan", 200): _PLAN,
    ("put", "/v1/conversations/{cid}/runs/{run_id}/snapshot", 200): _SNAPSHOT,
    ("put", "/v1/working-memory", 200): _WORKING,
}


async def test_the_answers_keep_their_shape_and_match_their_schema(
    app: FastAPI, client: httpx.AsyncClient, keys: Any, auth: Any
) -> None:
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", json={}, headers=h)).json()["id"]
    await client.post(
        f"/v1/conversations/{cid}/messages", json={"role": "user", "content": "hi"}, headers=h
    )
    base = f"/v1/conversations/{cid}"
    calls: list[tuple[str, str, str, int, dict[str, Any] | None]] = [
        ("put", f"{base}/plan", "/v1/conversations/{cid}/plan", 200, {"document": {"a": 1}}),
        ("get", f"{base}/plan", "/v1/conversations/{cid}/plan", 200, None),
        (
            "post",
            f"{base}/iterations",
            "/v1/conversations/{cid}/iterations",
            201,
            {"task": "t", "outcome": "failed", "error": "e", "detail": {"k": 1}},
        ),
        ("get", f"{base}/iterations", "/v1/conversations/{cid}/iterations", 200, None),
        (
            "put",
            f"{base}/runs/r1/snapshot",
            "/v1/conversations/{cid}/runs/{run_id}/snapshot",
            200,
            {"data": {"x": [1]}},
        ),
        (
            "get",
            f"{base}/runs/r1/snapshot",
            "/v1/conversations/{cid}/runs/{run_id}/snapshot",
            200,
            None,
        ),
        (
            "put",
            "/v1/checkpoints/c1/r1",
            "/v1/checkpoints/{name}/{run_id}",
            200,
            {"state": {"s": 1}, "ttl_s": 60, "conversation_id": cid},
        ),
        ("get", "/v1/checkpoints/c1/r1", "/v1/checkpoints/{name}/{run_id}", 200, None),
        ("put", "/v1/working-memory", "/v1/working-memory", 200, {"content": "# notes"}),
        ("get", "/v1/working-memory", "/v1/working-memory", 200, None),
        ("post", f"{base}/context", "/v1/conversations/{cid}/context", 200, {"budget": 500}),
        ("post", f"{base}/compact", "/v1/conversations/{cid}/compact", 202, {}),
        ("post", f"{base}/compact", "/v1/conversations/{cid}/compact", 200, {"wait": True}),
        ("post", f"{base}/observe", "/v1/conversations/{cid}/observe", 202, {}),
        ("get", "/v1/memory/export", "/v1/memory/export", 200, None),
    ]
    await client.post(
        "/v1/facts", json={"content": "likes tea", "category": "preference"}, headers=h
    )
    document = app.openapi()
    seen = {}
    for method, url, path, status, body in calls:
        kwargs: dict[str, Any] = {"headers": h}
        if body is not None:
            kwargs["json"] = body
        response = await client.request(method.upper(), url, **kwargs)
        assert response.status_code == status, (method, url, response.text)
        data = response.json()
        jsonschema.validate(data, answer_schema(document, method, path, status))
        seen[(method, path, status)] = shape(data)
    assert seen == SHAPES
