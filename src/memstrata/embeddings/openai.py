"""An embedder for any OpenAI-compatible ``/embeddings`` endpoint.

Works with OpenAI itself and with servers that copy its API (vLLM, Ollama, LM Studio,
llama.cpp, text-embeddings-inference, LiteLLM, ...). The ``openai`` SDK is imported
when the first client is built, so memstrata imports without it (extra: ``llm``).

Texts go out in batches of ``batch_size``; the SDK retries connection errors, 408,
409, 429 and 5xx responses ``max_retries`` times with backoff and gives up after
``timeout`` seconds per request. Failures surface as ``BackendUnavailable`` (503).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memstrata.errors import BackendUnavailable, ConfigurationError, InvalidInput, MissingDependency

if TYPE_CHECKING:
    import httpx
    from openai import AsyncOpenAI, OpenAI

__all__ = ["OpenAIEmbedder"]

INSTALL_HINT = 'pip install "memstrata[llm]"'
# Input limits of the OpenAI endpoint: 2048 inputs per request; one batch stays far below.
_MAX_BATCH = 2048


def _require_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependency(
            f"the OpenAI-compatible embedder needs the openai package: {INSTALL_HINT}",
            package="openai",
        ) from exc
    return openai


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server.

    ``dim`` must be given for models whose size memstrata cannot know in advance; if
    it is not, the first call probes the server once (an embedding of one short text)
    and checks every later answer against it. ``dimensions`` is passed on to models
    that can shorten their vectors (text-embedding-3-*); it is then the ``dim``.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        dimensions: int | None = None,
        batch_size: int = 128,
        max_retries: int = 3,
        timeout: float = 30.0,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError(
                "the OpenAI-compatible embedder needs a model name (MEMSTRATA_EMBED_MODEL)"
            )
        if not 1 <= batch_size <= _MAX_BATCH:
            raise ConfigurationError(f"batch_size must be between 1 and {_MAX_BATCH}")
        if dim is not None and dimensions is not None and dim != dimensions:
            raise ConfigurationError("dim and dimensions disagree")
        self.model = model
        self.base_url = base_url
        # Local servers accept any key, but the SDK refuses to build a client without one.
        self._api_key = api_key or "unused"
        self._dim = dim if dim is not None else dimensions
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.timeout = timeout
        self._http_client = http_client
        self._async_http_client = async_http_client
        self._client: OpenAI | None = None
        self._aclient: AsyncOpenAI | None = None
        self._lock = threading.Lock()

    # -- identity --------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """``openai:<model>@<host>:<dim>``: the host matters, two servers may serve two
        different models under one name."""
        from urllib.parse import urlsplit

        host = urlsplit(self.base_url).netloc if self.base_url else "api.openai.com"
        return f"openai:{self.model}@{host}:{self.dim}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed(["dimension probe"])[0])
        return self._dim

    # -- clients ---------------------------------------------------------------------------

    def _sync_client(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                openai = _require_openai()
                self._client = openai.OpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    max_retries=self.max_retries,
                    timeout=self.timeout,
                    http_client=self._http_client,
                )
            return self._client

    def _async_client(self) -> AsyncOpenAI:
        with self._lock:
            if self._aclient is None:
                openai = _require_openai()
                self._aclient = openai.AsyncOpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    max_retries=self.max_retries,
                    timeout=self.timeout,
                    http_client=self._async_http_client,
                )
            return self._aclient

    def _request(self, batch: list[str]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        return params

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != expected:
            raise BackendUnavailable(
                f"embedding server returned {len(data)} vectors for {expected} texts",
                model=self.model,
            )
        vectors = [list(map(float, item.embedding)) for item in data]
        for vector in vectors:
            if self._dim is None:
                self._dim = len(vector)
            elif len(vector) != self._dim:
                raise BackendUnavailable(
                    f"embedding server returned {len(vector)} dimensions, expected {self._dim}",
                    model=self.model,
                )
        return vectors

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        # Most servers reject empty input strings; one space embeds as "nothing".
        items = [t if t.strip() else " " for t in texts]
        return [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]

    # -- port ------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        client = self._sync_client()
        out: list[list[float]] = []
        for batch in self._batches(texts):
            try:
                response = client.embeddings.create(**self._request(batch))
            except Exception as exc:
                translated = _translate(exc, self.model)
                if translated is exc:
                    raise
                raise translated from exc
            out.extend(self._vectors(response, len(batch)))
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        client = self._async_client()
        out: list[list[float]] = []
        for batch in self._batches(texts):
            try:
                response = await client.embeddings.create(**self._request(batch))
            except Exception as exc:
                translated = _translate(exc, self.model)
                if translated is exc:
                    raise
                raise translated from exc
            out.extend(self._vectors(response, len(batch)))
        return out

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def aclose(self) -> None:
        client, self._aclient = self._aclient, None
        if client is not None:
            await client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"


def _translate(exc: Exception, model: str) -> Exception:
    openai = _require_openai()
    if isinstance(exc, openai.BadRequestError):
        return InvalidInput(f"embedding server rejected the request: {_brief(exc)}", model=model)
    if isinstance(
        exc, openai.AuthenticationError | openai.PermissionDeniedError | openai.NotFoundError
    ):
        return ConfigurationError(f"embedding server refused: {_brief(exc)}", model=model)
    if isinstance(exc, openai.OpenAIError):
        return BackendUnavailable(f"embedding server unavailable: {_brief(exc)}", model=model)
    return exc


def _brief(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 300 else text[:297] + "..."
