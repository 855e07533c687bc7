"""Deterministic, offline stand-ins for a chat model and an embedder.

Both are meant for tests of features that would otherwise call a network
service (compaction, fact extraction, recall). They never touch the network,
never sleep, and give the same answer for the same input in every process
(hashing uses BLAKE2b, not Python's salted ``hash``).
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.lowlevel

from memstrata.errors import BackendUnavailable
from memstrata.tokens import get_tokenizer

__all__ = ["FakeEmbedder", "FakeLLM", "LLMCall", "ScriptExhausted", "Usage", "cosine"]

ChatMessage = Mapping[str, Any]
Responder = Callable[[list[dict[str, Any]]], str]
ErrorSpec = BaseException | type[BaseException]


class ScriptExhausted(AssertionError):
    """The test asked a :class:`FakeLLM` for more replies than it scripted."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage in the OpenAI sense, counted with memstrata's tokenizer."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One call made to a :class:`FakeLLM`; ``error`` is set when the call was made to fail."""

    messages: list[dict[str, Any]]
    model: str
    purpose: str | None
    reply: str | None
    error: BaseException | None
    usage: Usage


def _content_text(content: Any) -> str:
    """The text of an OpenAI message content: a string or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return str(content)


def _echo(messages: list[dict[str, Any]]) -> str:
    """Default reply: names the last user message, so tests can see what was asked."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return f"fake reply to: {_content_text(message.get('content'))}"
    return "fake reply"


class FakeLLM:
    """An OpenAI-compatible chat model that answers from a script.

    ``replies`` is either a list of strings, handed out in order (running out
    raises :class:`ScriptExhausted`, or starts over with ``cycle=True``), or a
    callable that gets the messages and returns the reply. Every call is
    recorded in :attr:`calls`, failed ones included. :meth:`fail_next` makes the
    next calls raise, to test retries::

        llm = FakeLLM(["summary one"])
        llm.fail_next(2, TimeoutError)
        # two calls raise TimeoutError, the third returns "summary one"
    """

    def __init__(
        self,
        replies: Sequence[str] | Responder | None = None,
        *,
        model: str = "fake-llm",
        cycle: bool = False,
    ) -> None:
        if isinstance(replies, str):
            raise TypeError("replies must be a list of strings or a callable, not one string")
        self.default_model = model
        self._responder: Responder | None = replies if callable(replies) else None
        self._script: list[str] = [] if replies is None or callable(replies) else list(replies)
        if replies is None:
            self._responder = _echo
        self._cycle = cycle
        self._next = 0
        self._failures: list[ErrorSpec] = []
        self._lock = threading.Lock()
        self.calls: list[LLMCall] = []

    # -- scripting ----------------------------------------------------------------------

    def fail_next(self, times: int = 1, error: ErrorSpec = BackendUnavailable) -> None:
        """Make the next ``times`` calls raise ``error`` (a class or an instance)."""
        if times < 0:
            raise ValueError("times must be >= 0")
        with self._lock:
            self._failures.extend([error] * times)

    @property
    def usage(self) -> Usage:
        """Total usage of the calls that returned a reply."""
        total = Usage()
        for call in self.calls:
            if call.error is None:
                total = total + call.usage
        return total

    def calls_for(self, purpose: str) -> list[LLMCall]:
        return [c for c in self.calls if c.purpose == purpose]

    # -- calling ------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        """Answer ``messages`` (OpenAI chat shape); ``purpose`` is a free label for tests."""
        return self._answer(messages, model, purpose)

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        # A real client yields to the event loop; so does the fake, to expose ordering bugs.
        await anyio.lowlevel.checkpoint()
        return self._answer(messages, model, purpose)

    def _answer(
        self, messages: Sequence[ChatMessage], model: str | None, purpose: str | None
    ) -> str:
        # Recorded as a deep copy: the caller may reuse and mutate its message list.
        sent = [dict(copy.deepcopy(m)) for m in messages]
        name = model or self.default_model
        tokenizer = get_tokenizer(name)
        prompt = sum(tokenizer.count_message(_content_text(m.get("content"))) for m in sent)
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
            if failure is not None:
                error = (
                    failure("FakeLLM: injected failure") if isinstance(failure, type) else failure
                )
                self.calls.append(LLMCall(sent, name, purpose, None, error, Usage(prompt, 0)))
                raise error
            reply = self._reply(sent)
            usage = Usage(prompt, tokenizer.count_text(reply))
            self.calls.append(LLMCall(sent, name, purpose, reply, None, usage))
        return reply

    def _reply(self, sent: list[dict[str, Any]]) -> str:
        if self._responder is not None:
            reply = self._responder(sent)
            if not isinstance(reply, str):
                raise TypeError(f"FakeLLM responder returned {type(reply).__name__}, not str")
            return reply
        if self._next >= len(self._script):
            if not self._cycle or not self._script:
                raise ScriptExhausted(
                    f"FakeLLM was called {self._next + 1} times but has "
                    f"{len(self._script)} scripted replies"
                )
            self._next = 0
        reply = self._script[self._next]
        self._next += 1
        return reply


_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder:
    """Embeds texts as unit vectors of hashed word and character-trigram features.

    Texts that share words (or parts of words) get a higher cosine similarity
    than texts that share none, which is enough to test recall ranking without
    a model. Each feature adds ``±weight`` at a hashed position (the sign comes
    from the hash too, so unrelated texts average out near zero similarity).
    """

    def __init__(
        self, dim: int = 64, *, name: str = "fake-hash", ngram_weight: float = 0.5
    ) -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self.dim = dim
        self.name = name
        self.ngram_weight = ngram_weight
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """Stored beside vectors, so vectors of another embedder are never compared with these."""
        return f"{self.name}:{self.dim}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [w.lower() for w in _WORD.findall(text)]
        feats: list[tuple[str, float]] = [("w:" + w, 1.0) for w in words]
        if self.ngram_weight:
            for w in words:
                padded = f"<{w}>"
                feats.extend(
                    ("g:" + padded[i : i + 3], self.ngram_weight) for i in range(len(padded) - 2)
                )
        return feats or [("empty:", 1.0)]

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "big")
            sign = 1.0 if value & 1 else -1.0
            vec[(value >> 1) % self.dim] += sign * weight
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0.0:  # features cancelled out exactly: fall back to a fixed unit vector
            vec[0], norm = 1.0, 1.0
        return [x / norm for x in vec]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not one string")
        batch = list(texts)
        with self._lock:
            self.calls.append(batch)
        return [self._vector(t) for t in batch]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        await anyio.lowlevel.checkpoint()
        return self.embed(texts)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (tests use it to rank embeddings)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
