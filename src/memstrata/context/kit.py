"""Per-memory context settings: tier providers, policies, pre-compaction hooks, the LLM.

One :class:`ContextKit` per opened memory (what the ``context`` feature installs), shared
by its sync and async facades and by background compaction jobs, so a provider
registered once (recall, long-term facts) serves every call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memstrata.context.assemble import Settings
from memstrata.context.layout import DEFAULT_LAYOUT, Layout
from memstrata.context.tiers import TierPolicy, TierProvider
from memstrata.context.windows import (
    DEFAULT_LOW_WATER,
    DEFAULT_VOLATILE_ROOM,
    DEFAULT_WINDOW,
    RECALL_ROOM_MAX,
)
from memstrata.domain.context import CompactionResult
from memstrata.llm import LLM
from memstrata.storage.plan import Op
from memstrata.types import Message, Scope

__all__ = [
    "COMPACT_JOB",
    "CompactionResult",
    "ContextKit",
    "PreCompactionHook",
    "PreCompactionOp",
]

COMPACT_JOB = "memstrata.compact"

# Gets the messages about to be summarised, before the summary replaces them in
# context (long-term extraction registers one, like DeerFlow's summarization flush).
PreCompactionHook = Callable[[Scope, str, Sequence[Message]], None]
# The same, as a storage operation run in its own write transaction (features that
# queue work, so the hook never blocks an event loop or commits half of it).
PreCompactionOp = Callable[[Scope, str, Sequence[Message]], Op[None]]


class ContextKit:
    def __init__(
        self,
        llm: LLM | None = None,
        *,
        model: str | None = None,
        wrap: Callable[[LLM], LLM] | None = None,
    ) -> None:
        self._llm = llm
        self._wrap = wrap
        self.model = model
        self.window = DEFAULT_WINDOW
        self.threshold = 0.8
        self.debounce_s = 2.0
        self.max_wait_s = 30.0
        self.auto_compact = True
        self.layout: Layout = DEFAULT_LAYOUT
        self.low_water = DEFAULT_LOW_WATER
        self.volatile_room = DEFAULT_VOLATILE_ROOM
        self.recall_room_max = RECALL_ROOM_MAX
        self.providers: list[TierProvider] = []
        self.policies: dict[str, TierPolicy] = {}
        self.hooks: list[PreCompactionHook] = []
        self.hook_ops: list[PreCompactionOp] = []

    @property
    def llm(self) -> LLM | None:
        """The memory's model (None: offline fallbacks), as the memory calls it: redacted
        and metered when so configured."""
        llm = self._llm
        if llm is None or self._wrap is None:
            return llm
        return self._wrap(llm)

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        self._llm = value

    @property
    def given_llm(self) -> LLM | None:
        """The model as handed in (not wrapped): what to set back to restore it."""
        return self._llm

    def add_provider(self, provider: TierProvider) -> None:
        self.providers.append(provider)

    def set_policy(self, tier: str, policy: TierPolicy) -> None:
        self.policies[tier] = policy

    def on_pre_compaction(self, hook: PreCompactionHook) -> None:
        self.hooks.append(hook)

    def on_pre_compaction_op(self, op: PreCompactionOp) -> None:
        self.hook_ops.append(op)

    def settings(self) -> Settings:
        return Settings(
            policies=dict(self.policies),
            providers=list(self.providers),
            window=self.window,
            threshold=self.threshold,
            layout=self.layout,
            low_water=self.low_water,
            volatile_room=self.volatile_room,
            recall_room_max=self.recall_room_max,
        )
