"""What the models cost: LLM calls and tokens by purpose, embedder throughput.

One :class:`UsageMeter` per opened memory (``mem.usage.snapshot()`` reads it) counts every model
call made through :class:`MeteredLLM` and :class:`MeteredEmbedder`, whichever
feature made it (compaction, long-term extraction, recall); ``/metrics`` shows the
counters. Tokens are counted with the memory's own tokenizer, so they are
comparable across providers (a provider's bill may differ slightly).

With a :class:`~memstrata.usage.ledger.UsageLedger` the meter also hands each call to
it, for the store (per tenant, user, purpose and model; see :mod:`memstrata.usage`).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from memstrata.embeddings.port import Embedder
from memstrata.llm import LLM, ChatMessage
from memstrata.tokens import Tokenizer
from memstrata.usage.ledger import UsageLedger

__all__ = ["MeteredEmbedder", "MeteredLLM", "UsageMeter"]


def _micros(seconds: float) -> int:
    return int(seconds * 1_000_000)


class UsageMeter:
    """Process counters (``/metrics``), and the ledger that stores each call, if any."""

    def __init__(
        self, ledger: UsageLedger | None = None, tokenizer: Tokenizer | None = None
    ) -> None:
        self.ledger = ledger
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self.llm: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.embed: defaultdict[str, float] = defaultdict(float)

    def record_llm(
        self, purpose: str, *, prompt: int, completion: int, seconds: float, ok: bool
    ) -> None:
        with self._lock:
            self.llm[(purpose, "calls")] += 1
            self.llm[(purpose, "errors")] += 0 if ok else 1
            self.llm[(purpose, "prompt_tokens")] += prompt
            self.llm[(purpose, "completion_tokens")] += completion
            self.llm[(purpose, "seconds")] += seconds

    def record_embed(
        self, texts: int, seconds: float, ok: bool, *, tokens: int = 0, model: str = ""
    ) -> None:
        with self._lock:
            self.embed["calls"] += 1
            self.embed["errors"] += 0 if ok else 1
            self.embed["texts"] += texts
            self.embed["seconds"] += seconds
        if self.ledger is not None:
            self.ledger.add(
                kind="embed",
                purpose=None,
                model=model,
                ok=ok,
                input_tokens=tokens,
                output_tokens=0,
                duration_us=_micros(seconds),
            )

    def embed_tokens(self, texts: Sequence[str]) -> int:
        """Tokens of texts sent to an embedder (counted only when the calls are stored)."""
        if self.ledger is None or self.tokenizer is None:
            return 0
        return sum(self.tokenizer.count_text(t) for t in texts)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            llm: dict[str, dict[str, float]] = {}
            for (purpose, name), value in sorted(self.llm.items()):
                llm.setdefault(purpose, {})[name] = value
            return {"llm": llm, "embed": dict(self.embed)}


class MeteredLLM:
    """An :class:`~memstrata.llm.LLM` that records each call in a :class:`UsageMeter`."""

    def __init__(
        self, inner: LLM, meter: UsageMeter, tokenizer: Tokenizer, *, model: str | None = None
    ) -> None:
        self.inner = inner
        self._meter = meter
        self._tok = tokenizer
        self._model = model or ""

    def _prompt(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self._tok.count_text(str(m.get("content") or "")) + 4 for m in messages)

    def _record(
        self,
        purpose: str | None,
        model: str | None,
        messages: Sequence[ChatMessage],
        reply: Any,
        t0: float,
    ) -> None:
        seconds = time.perf_counter() - t0
        completion = self._tok.count_text(reply) if isinstance(reply, str) else 0
        prompt = self._prompt(messages)
        self._meter.record_llm(
            purpose or "chat",
            prompt=prompt,
            completion=completion,
            seconds=seconds,
            ok=reply is not None,
        )
        ledger = self._meter.ledger
        if ledger is not None:
            ledger.add(
                kind="llm",
                purpose=purpose,
                model=model or self._model,
                ok=reply is not None,
                input_tokens=prompt,
                output_tokens=completion,
                duration_us=_micros(seconds),
            )

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        t0 = time.perf_counter()
        reply: str | None = None
        try:
            reply = self.inner.complete(messages, model=model, purpose=purpose)
            return reply
        finally:
            self._record(purpose, model, messages, reply, t0)

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        t0 = time.perf_counter()
        reply: str | None = None
        try:
            reply = await self.inner.acomplete(messages, model=model, purpose=purpose)
            return reply
        finally:
            self._record(purpose, model, messages, reply, t0)


class MeteredEmbedder:
    """An :class:`~memstrata.embeddings.port.Embedder` that records texts and time."""

    def __init__(self, inner: Embedder, meter: UsageMeter) -> None:
        self.inner = inner
        self._meter = meter

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        t0, ok = time.perf_counter(), False
        try:
            out = self.inner.embed(texts)
            ok = True
            return out
        finally:
            self._done(texts, t0, ok)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        t0, ok = time.perf_counter(), False
        try:
            out = await self.inner.aembed(texts)
            ok = True
            return out
        finally:
            self._done(texts, t0, ok)

    def _done(self, texts: Sequence[str], t0: float, ok: bool) -> None:
        seconds = time.perf_counter() - t0
        tokens = self._meter.embed_tokens(texts)
        self._meter.record_embed(len(texts), seconds, ok, tokens=tokens, model=self.identity)
