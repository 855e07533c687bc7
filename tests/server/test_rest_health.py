"""/healthz, /readyz, /metrics and the OpenAPI document."""

from __future__ import annotations

import re

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings

pytestmark = pytest.mark.anyio


async def test_healthz_and_readyz_need_no_key(client):
    r = await client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}
    r = await client.get("/readyz")
    assert r.status_code == 200
    body = r.json()
    assert (body["status"], body["backends"]) == ("ready", {"sqlite": "ok"})
    assert set(body["details"]) == {"recall", "jobs"}
    assert body["details"]["jobs"]["due"] == 0
    assert body["warnings"] == []


async def test_readyz_details_say_what_is_degraded(client, keys, auth, db_url):
    # Due jobs that no worker runs: /readyz and /v1/jobs say so (ready all the same).
    with Memory.open(db_url, settings=Settings(db=db_url, worker="off")) as queuer:
        queuer.jobs.enqueue(Scope("t1", "alice"), "noop")
    body = (await client.get("/readyz")).json()
    assert body["status"] == "ready"
    (warning,) = [w for w in body["warnings"] if "job(s) due" in w]
    assert "memstrata worker" in warning
    assert body["details"]["jobs"]["warning"] == warning
    jobs = (await client.get("/v1/jobs", headers=auth(keys.alice))).json()
    assert "no worker" in jobs["worker_warning"]
    # Recall without an embedder is reported as keyword-only.
    recall = body["details"]["recall"]
    assert recall["semantic"] is (recall["embedder"] is not None)
    if not recall["semantic"]:
        assert recall["note"].startswith("keyword recall only")


def _samples(text: str) -> dict[tuple[str, str, str, str], float]:
    """The HTTP request samples (the job and model families are checked in test_rest_ops)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line or not line.startswith("memstrata_http_"):
            continue
        m = re.fullmatch(r'(\w+)\{method="(\w+)",route="([^"]*)",status="(\d+)"\} (\S+)', line)
        assert m, line
        out[(m[1], m[2], m[3], m[4])] = float(m[5])
    return out


async def test_metrics_count_by_route_template_and_status(client, keys, auth):
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", headers=h)).json()["id"]
    await client.get(f"/v1/conversations/{cid}", headers=h)
    await client.get("/v1/conversations/01900000-0000-7000-8000-000000000000", headers=h)
    await client.get("/v1/conversations/not-a-uuid", headers=h)
    await client.get("/v1/conversations")
    await client.get("/no/such/route")
    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert "# TYPE memstrata_http_requests_total counter" in r.text
    s = _samples(r.text)
    total = "memstrata_http_requests_total"
    assert s[(total, "POST", "/v1/conversations", "201")] == 1
    assert s[(total, "GET", "/v1/conversations/{cid}", "200")] == 1
    assert s[(total, "GET", "/v1/conversations/{cid}", "404")] == 2
    assert s[(total, "GET", "/v1/conversations", "401")] == 1
    assert s[(total, "GET", "unmatched", "404")] == 1
    key = ("memstrata_http_request_duration_seconds_count", "GET", "/v1/conversations/{cid}", "404")
    assert s[key] == 2
    assert s[("memstrata_http_request_duration_seconds_sum", *key[1:])] > 0
    # Raw ids never become labels.
    assert cid not in r.text


EXPECTED = {
    "/healthz": {"get"},
    "/readyz": {"get"},
    "/metrics": {"get"},
    "/v1/me": {"get"},
    "/v1/users": {"get"},
    "/v1/users/{user}": {"delete"},
    "/v1/jobs": {"get"},
    "/v1/jobs/{jid}": {"get"},
    "/v1/jobs/{jid}/retry": {"post"},
    "/v1/recall/search": {"post"},
    "/v1/conversations": {"get", "post"},
    "/v1/conversations/{cid}": {"get", "patch", "delete"},
    "/v1/conversations/{cid}/messages": {"get", "post"},
    "/v1/conversations/{cid}/messages/{mid}": {"get", "patch", "delete"},
    "/v1/messages/{mid}": {"get"},
    "/v1/conversations/{cid}/leaves": {"get"},
    "/v1/conversations/{cid}/observe": {"post"},
    "/v1/conversations/{cid}/history": {"get"},
    "/v1/conversations/{cid}/context": {"post"},
    "/v1/conversations/{cid}/compact": {"post"},
    "/v1/conversations/{cid}/summary": {"get"},
    "/v1/conversations/{cid}/plan": {"get", "put"},
    "/v1/conversations/{cid}/iterations": {"get", "post"},
    "/v1/conversations/{cid}/runs/{run_id}/snapshot": {"get", "put"},
    "/v1/checkpoints/{name}/{run_id}": {"get", "put", "delete"},
    "/v1/working-memory": {"get", "put"},
    "/v1/apps/{app}/conversations/{cid}/nodes/{node}/turns": {"post"},
    "/v1/apps/{app}/conversations/{cid}/nodes/{node}/history": {"get"},
    "/v1/apps/{app}/conversations/{cid}/nodes/{node}": {"delete"},
    "/v1/facts": {"get", "post"},
    "/v1/facts/{fid}": {"get", "patch", "delete"},
    "/v1/facts/{fid}/history": {"get"},
    "/v1/profile": {"get"},
    "/v1/memory/export": {"get"},
    # Prompt provenance.
    "/v1/conversations/{cid}/messages/{mid}/provenance": {"get"},
    "/v1/facts/{fid}/usage": {"get"},
    # Memory health and consolidation.
    "/v1/memory/health": {"get"},
    "/v1/memory/consolidate": {"post"},
    "/v1/memory/consolidations/{consolidation_id}/revert": {"post"},
    # Usage and budgets.
    "/v1/usage": {"get"},
    "/v1/budgets": {"get", "put"},
    "/v1/budgets/{purpose}": {"delete"},
    # Deletion receipts.
    "/v1/receipts/{rid}": {"get"},
}


def _resolve(doc, schema):
    ref = schema.get("$ref")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


async def test_openapi_lists_the_endpoints_with_schemas(client):
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    paths = {p: set(ops) for p, ops in doc["paths"].items()}
    assert paths == EXPECTED
    schemas = doc["components"]["schemas"]

    append = doc["paths"]["/v1/conversations/{cid}/messages"]["post"]
    body = _resolve(doc, append["requestBody"]["content"]["application/json"]["schema"])
    assert {"role", "content", "parent_id", "id", "status", "files", "tool_calls"} <= set(
        body["properties"]
    )
    assert body["required"] == ["role"]
    assert "default" not in body["properties"]["parent_id"]  # left out and null differ
    assert {"200", "201", "409", "404", "401", "422"} <= set(append["responses"])
    created = _resolve(doc, append["responses"]["201"]["content"]["application/json"]["schema"])
    assert "parent_id" in created["properties"]

    patch = doc["paths"]["/v1/conversations/{cid}"]["patch"]
    patch_body = _resolve(doc, patch["requestBody"]["content"]["application/json"]["schema"])
    assert "active_leaf_id" in patch_body["properties"]

    hist = doc["paths"]["/v1/conversations/{cid}/history"]["get"]
    assert {p["name"] for p in hist["parameters"]} >= {
        "leaf_id",
        "max_tokens",
        "max_messages",
        "model",
    }
    hist_out = _resolve(doc, hist["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(hist_out["properties"]) == {
        "leaf_id",
        "messages",
        "tokens",
        "truncated",
        "over_budget",
    }

    listing = doc["paths"]["/v1/conversations"]["get"]
    page = _resolve(doc, listing["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(page["properties"]) == {"items", "next_cursor"}

    # Every error response is documented as a problem.
    for path, ops in doc["paths"].items():
        for op in ops.values():
            for code, response in op["responses"].items():
                if int(code) >= 400:
                    assert list(response["content"]) == ["application/problem+json"], (path, code)
    assert "Problem" in schemas
    assert "HTTPValidationError" not in schemas
    assert any(s.get("scheme") == "bearer" for s in doc["components"]["securitySchemes"].values())
    headers = {p["name"] for p in listing["parameters"] if p["in"] == "header"}
    assert headers == {"X-Memstrata-User", "X-Memstrata-Agent"}
