"""Generated from ``_async_session.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx

from memstrata.client import _decode as decode
from memstrata.client._backoff import Backoff, retryable
from memstrata.client._wire import (
    Identity,
    error_from_response,
    identity_from_dict,
    scope_headers,
    segment,
)
from memstrata.errors import BackendUnavailable, InvalidInput
from memstrata.types import Scope

__all__ = [
    "NO_MESSAGE_CAP_PARAM",
    "NO_TOKEN_LIMIT",
    "Session",
    "conversation_path",
    "query_params",
]

T = TypeVar("T")

#: Sent for ``max_tokens=None`` (no token limit): the server's parameter is an integer.
NO_TOKEN_LIMIT = 1 << 53
#: Sent for ``max_messages=None`` (no message cap).
NO_MESSAGE_CAP_PARAM = "none"


def conversation_path(conversation_id: str) -> str:
    return f"/v1/conversations/{segment(conversation_id)}"


def query_params(**params: Any) -> dict[str, Any]:
    """The parameters that are set (None means "left out")."""
    return {k: v for k, v in params.items() if v is not None}


class Session:
    """One HTTP client, the key's identity, retries and error mapping."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None,
    ) -> None:
        from memstrata.version import __version__

        if not isinstance(api_key, str) or not api_key:
            raise InvalidInput("api_key is required to reach a memstrata server", field="api_key")
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"a server URL starts with http:// or https://, got {base_url!r}", field="url"
            )
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.base_url,
            headers={
                "Authorization": f"Bearer {api_key}",
                "User-Agent": f"memstrata/{__version__}",
            },
            timeout=timeout,
            transport=transport,
        )
        self._backoff = Backoff()
        self._identity: Identity | None = None

    def identity(self) -> Identity:
        if self._identity is None:
            self._identity = self.call(
                "GET", "/v1/me", identity_from_dict, idempotent=True, headers=None
            )
        return self._identity

    def scoped(self, scope: Scope) -> dict[str, str]:
        return scope_headers(self.identity(), scope)

    def send(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._client.request(
                    method, path, headers=headers, params=params, json=json
                )
            except httpx.TransportError as exc:
                if not retryable(exc, attempt, idempotent):
                    raise BackendUnavailable(
                        f"cannot reach the memstrata server at {self.base_url}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                self._backoff.wait(attempt)
                attempt += 1
                continue
            if response.is_success:
                return response
            raise error_from_response(
                response.status_code,
                response.headers.get("content-type", ""),
                response.content,
                response.headers.get("retry-after"),
            )

    def call(
        self,
        method: str,
        path: str,
        decoder: Callable[[Any], T],
        *,
        headers: Mapping[str, str] | None,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool = False,
    ) -> T:
        response = self.send(
            method, path, headers=headers, params=params, json=json, idempotent=idempotent
        )
        return decode.parse(decoder, response.json())

    def get(
        self,
        path: str,
        decoder: Callable[[Any], T],
        headers: Mapping[str, str],
        params: Mapping[str, Any] | None = None,
    ) -> T:
        return self.call(
            "GET", path, decoder, headers=headers, params=params, idempotent=True
        )

    def close(self) -> None:
        self._client.close()
