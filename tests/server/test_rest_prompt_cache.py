"""``report.cache`` and ``layout`` over REST: the prefix repeated from the previous context."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio


async def _say(
    client: httpx.AsyncClient, h: dict[str, str], cid: str, role: str, text: str
) -> None:
    r = await client.post(
        f"/v1/conversations/{cid}/messages", json={"role": role, "content": text}, headers=h
    )
    assert r.status_code == 201, r.text


async def test_context_reports_its_cacheable_prefix(
    client: httpx.AsyncClient, keys: Any, auth: Callable[..., dict[str, str]]
) -> None:
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", json={}, headers=h)).json()["id"]
    await _say(client, h, cid, "system", "You are terse.")
    await _say(client, h, cid, "user", "first question")
    first = (await client.post(f"/v1/conversations/{cid}/context", json={}, headers=h)).json()
    assert first["report"]["cache"] == {"prefix_tokens": 0, "breakpoint": 0}
    assert first["report"]["layout"] == "cache"
    await _say(client, h, cid, "assistant", "first answer")
    await _say(client, h, cid, "user", "second question")
    second = (await client.post(f"/v1/conversations/{cid}/context", json={}, headers=h)).json()
    cache = second["report"]["cache"]
    assert 0 < cache["prefix_tokens"] < second["report"]["total"]
    assert cache["breakpoint"] == 2
    assert second["messages"][: cache["breakpoint"]] == first["messages"]
    # The classic layout is there on request; an unknown one is refused.
    again = await client.post(
        f"/v1/conversations/{cid}/context", json={"layout": "classic"}, headers=h
    )
    assert again.json()["report"]["layout"] == "classic"
    bad = await client.post(f"/v1/conversations/{cid}/context", json={"layout": "x"}, headers=h)
    assert bad.status_code == 422
