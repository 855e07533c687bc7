"""Long-term memory's moving parts for one opened memory: settings, the LLM, capture at
append, the extraction job, cascade steps and the context tiers.

Capture never does the extraction itself. At append (when ``longterm_capture`` is on)
a captured message only queues a debounced ``longterm.extract`` job for its
conversation, in the append's own transaction, so it cannot be lost. The job's key
is the conversation (whose owner is the job's scope), so ten messages inside the
debounce window make one job: the newest leaf wins and the signal flags are ORed.
With no LLM configured the job kind is *blocked*: its jobs stay queued (merging as
they should) and are shown as waiting for an LLM, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from memstrata.jobs import ops as jobs_ops
from memstrata.longterm import branchfacts, forget
from memstrata.longterm.capture import capturable, signals_in
from memstrata.longterm.model import Signal
from memstrata.longterm.tier import FactsTier, ProfileTier
from memstrata.storage.plan import Op
from memstrata.types import Message, Role, Scope

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.context.kit import ContextKit
    from memstrata.embeddings.port import Embedder
    from memstrata.jobs.ops import Job
    from memstrata.jobs.worker import Handler
    from memstrata.llm import LLM
    from memstrata.recall.service import RecallEngine

__all__ = ["EXTRACT_JOB", "NEEDS_LLM", "LongTermKit"]

EXTRACT_JOB = "longterm.extract"
NEEDS_LLM = (
    "needs an LLM: long-term extraction is disabled until MEMSTRATA_LLM_MODEL (and "
    "MEMSTRATA_LLM_BASE_URL for a local endpoint) is set; queued jobs wait, none is dropped"
)
_UNSET: Any = object()


def job_key(conversation_id: str) -> str:
    return f"{EXTRACT_JOB}:{conversation_id}"


class LongTermKit:
    """Per-memory long-term settings (from :class:`~memstrata.config.Settings`, adjustable
    at run time), shared by the sync and async facades and the extraction job."""

    def __init__(self, core: Core, context: ContextKit, recall: RecallEngine) -> None:
        s = core.settings
        self._core = core
        self._context = context
        self._recall = recall
        self._capture: bool | str = s.longterm_capture
        # "auto" looks at the configuration (MEMSTRATA_LLM_*), fixed when the memory opens.
        self._configured_llm = bool(s.llm_model)
        self.debounce_s = s.longterm_debounce_seconds
        self.max_wait_s = s.longterm_max_wait_seconds
        self.threshold = s.longterm_confidence_threshold
        self.max_facts = s.longterm_max_facts
        self.max_llm_calls = s.longterm_max_llm_calls
        self.max_input_tokens = s.longterm_max_input_tokens
        self.max_attempts = s.longterm_max_attempts
        #: Withdraw facts whose sources all left the active branches (and restore them).
        self.branch_withdraw = s.longterm_branch_withdraw
        #: Cosine similarity at or above which a new fact repeats an active one.
        self.near_duplicate = 0.92
        self._llm: LLM | None = _UNSET
        self._embedder: Embedder | None = _UNSET
        self.model: str | None = s.llm_model
        self.facts_tier = FactsTier()
        self.profile_tier = ProfileTier()

    # -- what extraction uses -----------------------------------------------------------------

    @property
    def llm(self) -> LLM | None:
        """The model that extracts (default: the memory's LLM, shared with compaction)."""
        if self._llm is _UNSET:
            return self._context.llm
        if self._llm is None:
            return None
        return self._core.wrap_llm(self._llm)

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        self._llm = value

    @property
    def embedder(self) -> Embedder | None:
        """Finds near-duplicate facts (default: recall's embedder; None: exact keys only)."""
        return self._recall.embedder if self._embedder is _UNSET else self._embedder

    @embedder.setter
    def embedder(self, value: Embedder | None) -> None:
        self._embedder = value

    def own_models(self) -> tuple[object, object]:
        """This kit's own model and embedder settings, for :meth:`restore_models` (a marker
        stands for "the memory's": then :attr:`llm` and :attr:`embedder` follow it)."""
        return self._llm, self._embedder

    def restore_models(self, models: tuple[object, object]) -> None:
        """Set back what :meth:`own_models` returned."""
        self._llm, self._embedder = cast("tuple[LLM | None, Embedder | None]", models)

    @property
    def capture(self) -> bool:
        """Whether appends queue extraction: the ``longterm_capture`` setting, whose default
        ``auto`` means "when an LLM is configured" (``MEMSTRATA_LLM_*``; DeerFlow extracts
        whenever it has a model). A model handed in at run time leaves it as configured."""
        if self._capture == "auto":
            return self._configured_llm
        return bool(self._capture)

    @capture.setter
    def capture(self, value: bool | str) -> None:
        self._capture = value

    @property
    def capture_mode(self) -> str:
        """``auto``, ``on`` or ``off``: the setting as given (``capture`` is its effect now)."""
        if self._capture == "auto":
            return "auto"
        return "on" if self._capture else "off"

    def blocked(self) -> str | None:
        """Why extraction jobs cannot run in this process, or None."""
        return NEEDS_LLM if self.llm is None else None

    # -- wiring -------------------------------------------------------------------------------

    def install(self, extract: Handler[JobContext]) -> None:
        """Queue extraction at append, follow branches and deletes, run ``extract`` (the
        facade's flush) for the extraction jobs, and serve the facts and profile tiers."""
        core, context = self._core, self._context
        core.rt.on_message.append(self.hook)
        core.rt.on_branch_change.append(self.branch_moved)
        # Before forgetting: it reads the provenance that forgetting removes.
        core.rt.cascade.on_conversation_delete(self.conversations_deleted)
        core.rt.cascade.on_conversation_delete(forget.forget_conversations)
        core.rt.cascade.on_messages_delete(forget.forget_messages)
        core.rt.cascade.on_user_delete(forget.forget_user)
        core.jobs.register(
            EXTRACT_JOB,
            extract,
            lease_s=core.settings.longterm_lease_seconds,
            blocked=self.blocked,
        )
        context.add_provider(self.facts_tier)
        context.add_provider(self.profile_tier)
        context.on_pre_compaction_op(self.pre_compaction)

    def hook(self, scope: Scope, message: Message) -> Op[None]:
        """At append: queue (or push back) the conversation's extraction."""
        if not self.capture or not capturable(message):
            return
        # Embedded mode: the process that captures also extracts (a cheap check after the first).
        self._core.start_local_worker()
        flags = signals_in(message.content) if message.role is Role.USER else frozenset()
        if not flags:  # the common case: one UPDATE pushes the queued job back
            moved = yield from jobs_ops.push_back(
                kind=EXTRACT_JOB,
                key=job_key(message.conversation_id),
                payload={"leaf_id": message.id},
                delay_s=self.debounce_s,
                max_wait_s=max(self.max_wait_s, self.debounce_s),
                now=self._core.rt.clock(),
            )
            if moved:
                return
        yield from self.enqueue(scope, message.conversation_id, message.id, flags)

    def branch_moved(self, scope: Scope, conversation_id: str) -> Op[None]:
        """A conversation's active branch moved: its facts follow (see branchfacts)."""
        if self.branch_withdraw:
            yield from branchfacts.reconcile(self._core.rt, conversation_id)

    def conversations_deleted(self, conversation_ids: Sequence[str]) -> Op[None]:
        """Facts also drawn from other conversations follow those (see branchfacts)."""
        if self.branch_withdraw:
            yield from branchfacts.before_conversations_delete(self._core.rt, conversation_ids)

    def pre_compaction(
        self, scope: Scope, conversation_id: str, batch: Sequence[Message]
    ) -> Op[None]:
        """Before a summary replaces old messages in context: extract now, not later."""
        if not self.capture or not batch:
            return
        yield from self.enqueue(scope, conversation_id, None, frozenset(), delay_s=0.0)

    def enqueue(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None,
        flags: frozenset[Signal],
        *,
        delay_s: float | None = None,
    ) -> Op[Job]:
        rt = self._core.rt
        delay = self.debounce_s if delay_s is None else delay_s
        return (
            yield from jobs_ops.enqueue(
                job_id=rt.make_id(),
                kind=EXTRACT_JOB,
                key=job_key(conversation_id),
                tenant=scope.tenant,
                user=scope.user,
                agent=scope.agent,
                conversation_id=conversation_id,
                payload={"leaf_id": leaf_id} if leaf_id else None,
                flags={f.value: True for f in flags},
                delay_s=delay,
                max_wait_s=max(self.max_wait_s, delay),
                max_attempts=self.max_attempts,
                now=rt.clock(),
            )
        )
