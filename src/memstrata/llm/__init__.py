"""The LLM port: one small protocol, an OpenAI-compatible client, and nothing by default.

Features that need a model (compaction, later fact extraction) take an
:class:`LLM`; tests pass :class:`memstrata.testing.FakeLLM`. The real client
speaks to any OpenAI-compatible endpoint through the ``openai`` SDK, imported
only when the client is first used (``pip install 'memstrata[llm]'``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from memstrata.config import Settings
from memstrata.errors import BackendUnavailable, ConfigurationError, MissingDependency

__all__ = ["LLM", "ChatMessage", "OpenAICompatibleLLM", "llm_from_settings"]

log = logging.getLogger("memstrata.llm")
_demo_announced = False

ChatMessage = Mapping[str, Any]


@runtime_checkable
class LLM(Protocol):
    """A chat model: OpenAI-shaped messages in, the reply text out."""

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str: ...

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str: ...


def _openai() -> Any:
    try:
        return importlib.import_module("openai")
    except ImportError:
        raise MissingDependency(
            "the OpenAI-compatible LLM client needs the openai SDK: pip install 'memstrata[llm]'"
        ) from None


class OpenAICompatibleLLM:
    """Chat completions against ``base_url`` (OpenAI, vLLM, Ollama, LiteLLM, ...).

    Timeouts and retries are the SDK's own (``timeout``, ``max_retries``); any error
    the SDK raises reaches the caller as :class:`BackendUnavailable`.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 2,
    ) -> None:
        self.model = model
        self._options: dict[str, Any] = {
            "base_url": base_url,
            # Local endpoints often need no key, but the SDK insists on one.
            "api_key": api_key or "not-needed",
            "timeout": timeout_s,
            "max_retries": retries,
        }
        self._sync: Any = None
        self._async: Any = None

    def _reply(self, response: Any) -> str:
        content = response.choices[0].message.content if response.choices else None
        return content or ""

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        if self._sync is None:
            self._sync = _openai().OpenAI(**self._options)
        try:
            response = self._sync.chat.completions.create(
                model=model or self.model, messages=[dict(m) for m in messages]
            )
        except Exception as exc:  # the SDK's own error tree, translated at the boundary
            raise BackendUnavailable(f"LLM call failed ({purpose or 'chat'}): {exc}") from exc
        return self._reply(response)

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        if self._async is None:
            self._async = _openai().AsyncOpenAI(**self._options)
        try:
            response = await self._async.chat.completions.create(
                model=model or self.model, messages=[dict(m) for m in messages]
            )
        except Exception as exc:
            raise BackendUnavailable(f"LLM call failed ({purpose or 'chat'}): {exc}") from exc
        return self._reply(response)


def llm_from_settings(settings: Settings) -> LLM | None:
    """The configured client, or None (features then use their offline fallbacks).

    ``MEMSTRATA_LLM_BASE_URL=fake://`` selects the rule-based demo model
    (:mod:`memstrata.llm.demo`) and says so in the log: it is never chosen silently.
    """
    if not settings.llm_model:
        if settings.llm_base_url:
            raise ConfigurationError("MEMSTRATA_LLM_BASE_URL is set but MEMSTRATA_LLM_MODEL is not")
        return None
    from memstrata.llm.demo import DemoLLM, is_demo_url

    if is_demo_url(settings.llm_base_url):
        global _demo_announced
        if not _demo_announced:  # once per process, however many memories open
            _demo_announced = True
            log.warning(
                "LLM: the rule-based demo model (MEMSTRATA_LLM_BASE_URL=fake://), a demo and "
                "test aid: answers come from fixed rules, not a language model"
            )
        return DemoLLM(settings.llm_model)
    return OpenAICompatibleLLM(
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key,
        timeout_s=settings.llm_timeout_seconds,
        retries=settings.llm_retries,
    )
