"""Each domain type's wire model, registered as its ``to_dict()`` (see memstrata.encoding)."""

from __future__ import annotations

from memstrata.encoding import register
from memstrata.wire import context, conversations, jobs, longterm, nodes, recall, state
from memstrata.wire import memory as memory_health
from memstrata.wire import provenance as provenance_wire
from memstrata.wire import receipts as receipt_wire
from memstrata.wire._codec import Wire

__all__: list[str] = []

CANONICAL: tuple[type[Wire], ...] = (
    conversations.MessageOut,
    conversations.ConversationOut,
    conversations.HistoryOut,
    context.TierReportOut,
    context.CacheReportOut,
    context.ContextReportOut,
    context.ContextOut,
    context.SummaryOut,
    context.CompactionOut,
    jobs.JobOut,
    longterm.FactOut,
    longterm.FactEventOut,
    longterm.ProfileSectionOut,
    nodes.TurnOut,
    nodes.NodeHistoryOut,
    recall.ExplanationOut,
    recall.HitOut,
    state.PlanOut,
    state.IterationOut,
    state.CheckpointOut,
    state.SnapshotOut,
    state.WorkingMemoryOut,
    provenance_wire.RecordItemOut,
    provenance_wire.ContextRecordOut,
    provenance_wire.ProvenanceOut,
    provenance_wire.FactUseOut,
    # memory health and consolidation
    memory_health.FactBriefOut,
    memory_health.HealthExampleOut,
    memory_health.HealthCheckOut,
    memory_health.MemorySizesOut,
    memory_health.MemoryHealthOut,
    memory_health.ConsolidationChangeOut,
    memory_health.ConsolidationOut,
    memory_health.ConsolidationRevertOut,
    receipt_wire.ReceiptOut,
)

for _model in CANONICAL:
    register(_model.__domain__, _model.encode)
