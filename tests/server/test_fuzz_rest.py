"""Fuzz the REST API from its own OpenAPI document with schemathesis.

Every documented operation gets generated requests (valid and invalid) sent in-process
to the ASGI app with a user key. Two properties must hold for every answer: the server
never fails (no 5xx), and every 4xx is an RFC 9457 problem (``application/problem+json``
with ``type``, ``title``, ``status``, ``detail`` and memstrata's ``code``).

A seeded conversation, message, fact and deletion receipt let path parameters sometimes
name real data, so the fuzzer reaches past the 404 of an unknown id into the handlers
themselves.

schemathesis only generates finite numbers and shallow values, so about half of the JSON
object bodies get one top-level value replaced by what JSON parsers disagree on: ``NaN``,
``Infinity``, ``-Infinity``, a lone surrogate, or arrays nested 65 and 5,000 deep. They
are sent as raw bytes (the client's own encoder refuses NaN) and must answer 4xx.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from memstrata import AsyncMemory, Memory, Scope
from memstrata.config import Settings
from memstrata.server import create_app

schemathesis = pytest.importorskip("schemathesis")

PROBLEM_JSON = "application/problem+json"
# Routes outside the documented JSON API, should a later version list them.
EXCLUDED_PATHS = r"^/(metrics|mcp|ui)(/|$)|^/$"

# Kept small so the file runs in well under a minute on two cores; the CI profile
# (derandomize, no database) is inherited from tests/conftest.py and only narrowed here.
FUZZ = settings(
    settings(),
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)


@dataclass(frozen=True)
class Seed:
    """Real ids the fuzzer may put into path parameters, and the key that can see them."""

    secret: str
    path_ids: dict[str, str]


def seed_store(db_url: str) -> Seed:
    """Create a user key and a little data for it through a separate sync handle."""
    mem = Memory.open(db_url)
    try:
        mem.core.recall.use(None)  # keyword recall: no embedder needed for seeding
        alice = Scope("t1", "alice")
        secret = mem.keys.create("t1", user="alice")[1]
        conv = mem.conversations.create(alice)
        first = mem.messages.append(alice, conv.id, role="user", content="hello parrot")
        mem.messages.append(alice, conv.id, role="assistant", content="hi", parent_id=first.id)
        fact = mem.facts.add(alice, "alice keeps a parrot")
        # A recorded context linked to a reply: provenance and fact usage have data to show.
        ctx = mem.context(alice, conv.id, leaf_id=first.id, record=True)
        mem.messages.append(
            alice,
            conv.id,
            role="assistant",
            content="a parrot",
            parent_id=first.id,
            context_id=ctx.context_id,
        )
        # A near duplicate merged away, so a revert can name a real consolidation.
        mem.facts.add(alice, "Alice keeps a parrot!")
        merged = mem.memory.consolidate(alice, dry_run=False)
        receipt = mem.facts.delete(alice, mem.facts.add(alice, "alice had a cat").id)
        ids = {
            "cid": conv.id,
            "mid": first.id,
            "fid": fact.id,
            "consolidation_id": merged.id,
            "rid": receipt.id,
        }
        return Seed(secret, ids)
    finally:
        mem.close()


# The seeded ids of the running module, read by the generation hooks at draw time (the
# schema is built at collection, before any fixture exists).
SEEDED_IDS: dict[str, str] = {}


@pytest.fixture(scope="module")
def fuzz_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AsyncMemory, Settings, Seed]]:
    db_url = f"sqlite:///{(tmp_path_factory.mktemp('fuzz') / 'fuzz.db').as_posix()}"
    seed = seed_store(db_url)
    amem = AsyncMemory.open(db_url)
    amem.core.recall.use(None)
    SEEDED_IDS.update(seed.path_ids)
    yield amem, Settings(db=db_url), seed
    SEEDED_IDS.clear()
    amem.core.close()


def real_or_generated(path_ids: dict[str, str], params: dict[str, Any] | None) -> Any:
    """A strategy keeping the generated path parameters or swapping in seeded ids."""
    if not params or not any(name in path_ids for name in params):
        return st.just(params)
    return st.booleans().map(
        lambda real: (
            {**params, **{k: path_ids[k] for k in params if k in path_ids}} if real else params
        )
    )


# Headers only an admin key may send: with the user key they always answer 403, which
# would starve the handlers behind them, so they are sent in a minority of cases.
ADMIN_HEADERS = ("X-Memstrata-User", "X-Memstrata-Agent")


# Raw JSON texts of the values a strict decoder refuses (issue 21, findings 1 and 4).
POISONS = (
    "NaN",
    "Infinity",
    "-Infinity",
    '"\\ud800"',
    "[" * 65 + "0" + "]" * 65,
    "[" * 5000 + "]" * 5000,
)
_MARK = "__memstrata_fuzz_poison__"


def with_poison(body: dict[str, Any], key: str, raw: str) -> bytes:
    """``body`` as JSON bytes with the value of ``key`` replaced by the raw text ``raw``."""
    return json.dumps({**body, key: _MARK}).replace(json.dumps(_MARK), raw, 1).encode()


def sometimes_poisoned(body: Any) -> Any:
    """A strategy keeping a JSON object body or poisoning one of its top-level values."""
    if not isinstance(body, dict) or not body:
        return st.just(body)
    return st.tuples(st.booleans(), st.sampled_from(sorted(body)), st.sampled_from(POISONS)).map(
        lambda pick: with_poison(body, pick[1], pick[2]) if pick[0] else body
    )


def mostly_without_admin_headers(headers: dict[str, Any] | None) -> Any:
    """A strategy that usually drops the admin-only headers from ``headers``."""
    if not headers or not any(name in headers for name in ADMIN_HEADERS):
        return st.just(headers)
    kept = {k: v for k, v in headers.items() if k not in ADMIN_HEADERS}
    return st.sampled_from([kept, kept, kept, headers])


@pytest.fixture(scope="module")
def fuzz_app(fuzz_store: tuple[AsyncMemory, Settings, Seed]) -> Any:
    amem, app_settings, _ = fuzz_store
    return create_app(amem, app_settings)


@pytest.fixture(scope="module")
def fuzz_auth(fuzz_store: tuple[AsyncMemory, Settings, Seed]) -> dict[str, str]:
    return {"Authorization": f"Bearer {fuzz_store[2].secret}"}


def problem_shape_errors(status: int, content_type: str, body: Any) -> list[str]:
    """What is wrong with an error answer as an RFC 9457 problem (empty when nothing)."""
    if not 400 <= status < 500:
        return []
    if not content_type.startswith(PROBLEM_JSON):
        return [f"content-type is {content_type!r}, not {PROBLEM_JSON}"]
    if not isinstance(body, dict):
        return [f"body is not a JSON object: {body!r}"]
    wrong = []
    for name in ("type", "title", "detail", "code"):
        if not isinstance(body.get(name), str) or not body[name]:
            wrong.append(f"{name} is not a non-empty string: {body.get(name)!r}")
    if body.get("status") != status:
        wrong.append(f"status {body.get('status')!r} differs from the HTTP status {status}")
    type_, code = body.get("type"), body.get("code")
    if isinstance(type_, str) and isinstance(code, str) and not type_.endswith(code):
        wrong.append(f"type {type_!r} does not end with code {code!r}")
    return wrong


def problem_json_on_4xx(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis check: a 4xx answer is a memstrata problem document."""
    if not 400 <= response.status_code < 500:
        return None
    content_type = response.headers.get("content-type", [""])[0]
    try:
        body = response.json()
    except ValueError:
        body = response.text
    wrong = problem_shape_errors(response.status_code, content_type, body)
    assert not wrong, f"{response.status_code} is not a problem: {'; '.join(wrong)}"
    return True


def load_schema() -> Any:
    """The OpenAPI document as the app serves it, fetched in-process.

    The document comes from a throwaway app on an in-memory store; the requests go to the
    module's app (``app=`` in the call), which serves the same document.
    """
    amem = AsyncMemory.open("sqlite:///:memory:")
    try:
        loaded = schemathesis.openapi.from_asgi(
            "/openapi.json", create_app(amem, Settings(db="sqlite:///:memory:"))
        )
    finally:
        amem.core.close()
    loaded = loaded.exclude(path_regex=EXCLUDED_PATHS)

    # schemathesis picks the hook by the function's name.
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
        return real_or_generated(SEEDED_IDS, path_parameters)

    def flatmap_headers(context: Any, headers: dict[str, Any] | None) -> Any:
        return mostly_without_admin_headers(headers)

    def flatmap_body(context: Any, body: Any) -> Any:
        return sometimes_poisoned(body)

    loaded.hook(flatmap_path_parameters)
    loaded.hook(flatmap_headers)
    loaded.hook(flatmap_body)
    return loaded


def test_api_answers_without_server_errors_and_with_problems(
    fuzz_app: Any, fuzz_auth: Any, subtests: Any
) -> None:
    """Every documented operation, one subtest each, with the tests `schema.parametrize()`
    would build (examples, coverage and fuzzing phases). They are built here, when the
    test runs, rather than at collection: building the schema and its tests costs every
    pytest process seconds, and a run that does not select this test should not pay it."""
    from schemathesis.checks import load_all_checks
    from schemathesis.core.result import Err
    from schemathesis.pytest.lazy import get_all_tests

    load_all_checks()

    def call(case: Any, app: Any, auth: Any) -> None:
        case.call_and_validate(
            app=app,
            headers=auth,
            checks=[schemathesis.checks.not_a_server_error, problem_json_on_4xx],
        )

    built = list(
        get_all_tests(schema=load_schema(), test_func=call, settings=FUZZ, given_kwargs={})
    )
    assert len(built) > 40  # every documented operation, not a filtered few
    for result in built:
        if isinstance(result, Err):  # an operation's definition schemathesis cannot use
            raise result.err()
        operation, run = result.ok()
        with subtests.test(msg=operation.label):
            run(app=fuzz_app, auth=fuzz_auth)


# -- the check itself ------------------------------------------------------------------------


def test_problem_shape_accepts_a_memstrata_problem() -> None:
    body = {
        "type": "urn:memstrata:problem:not_found",
        "title": "Not found",
        "status": 404,
        "detail": "no such conversation",
        "code": "not_found",
    }
    assert problem_shape_errors(404, PROBLEM_JSON, body) == []
    assert problem_shape_errors(200, "application/json", {"ok": True}) == []


@pytest.mark.parametrize(
    ("content_type", "body", "fragment"),
    [
        ("application/json", {}, "content-type"),
        (PROBLEM_JSON, ["x"], "not a JSON object"),
        (PROBLEM_JSON, {"type": "t", "title": "T", "status": 404, "detail": "d"}, "code"),
        (
            PROBLEM_JSON,
            {"type": "urn:x:a", "title": "T", "status": 400, "detail": "d", "code": "a"},
            "status",
        ),
        (
            PROBLEM_JSON,
            {"type": "urn:x:b", "title": "T", "status": 404, "detail": "d", "code": "a"},
            "does not end",
        ),
    ],
)
def test_problem_shape_rejects(content_type: str, body: Any, fragment: str) -> None:
    wrong = problem_shape_errors(404, content_type, body)
    assert any(fragment in w for w in wrong), wrong


# -- regressions found by the fuzzer ---------------------------------------------------------


def test_checkpoint_with_a_huge_ttl_is_a_problem_not_a_server_error(tmp_path: Path) -> None:
    db_url = f"sqlite:///{(tmp_path / 'ttl.db').as_posix()}"
    secret = seed_store(db_url).secret
    amem = AsyncMemory.open(db_url)
    app = create_app(amem, Settings(db=db_url))

    async def put() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
            return await c.put(
                "/v1/checkpoints/n/r",
                content=b'{"state": {}, "ttl_s": 1e303}',
                headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            )

    try:
        response = anyio.run(put)
    finally:
        amem.core.close()
    assert response.status_code == 422, response.text
    assert problem_shape_errors(422, response.headers["content-type"], response.json()) == []


def test_poisoned_bodies_are_what_the_strict_decoder_refuses() -> None:
    from memstrata import strictjson
    from memstrata.errors import InvalidInput

    for raw in POISONS:
        text = with_poison({"title": "t", "metadata": {}}, "metadata", raw)
        assert raw.encode() in text
        with pytest.raises(InvalidInput):
            strictjson.loads(text)
