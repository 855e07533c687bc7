"""The features an opened memory runs, installed in order by :class:`~memstrata.api.core.Core`.

Each feature package has a ``feature.py`` whose ``install(core, ...)`` adds what the
feature brings (cascade steps run when conversations, messages or users are deleted, job
kinds, hooks at append, context tiers) and returns its kit, if it has one. What a feature
needs from another (its kit, or a facade operation its jobs run, from
:mod:`memstrata.api.handlers`) it takes as an argument: the entries below pass them, and
:class:`Kits` is the declared set of kits a core holds.

The order matters only where features share an event: cascade steps run in the order
they were registered, and tiers of the same order value keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from memstrata.api import handlers
from memstrata.context import feature as context_feature
from memstrata.context.kit import ContextKit
from memstrata.errors import ConfigurationError
from memstrata.graph import feature as graph_feature
from memstrata.jobs import feature as jobs_feature
from memstrata.longterm import feature as longterm_feature
from memstrata.longterm.service import LongTermKit
from memstrata.nodes import feature as nodes_feature
from memstrata.nodes.service import NodesKit
from memstrata.provenance import feature as provenance_feature
from memstrata.provenance.feature import FactUsage
from memstrata.recall import feature as recall_feature
from memstrata.recall.service import RecallEngine
from memstrata.receipts import feature as receipts_feature
from memstrata.retention import feature as retention_feature
from memstrata.state import feature as state_feature
from memstrata.usage import feature as usage_feature

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["FEATURES", "Feature", "Kits", "need"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Kits:
    """The kits of a core's features, one typed slot each (None: not installed)."""

    context: ContextKit | None = None
    nodes: NodesKit | None = None
    recall: RecallEngine | None = None
    longterm: LongTermKit | None = None
    #: How many recorded contexts held each fact (memory health reports usage as
    #: unknown without it).
    fact_usage: FactUsage | None = None


def need(kit: T | None, feature: str) -> T:
    """``kit``, or ConfigurationError when its feature is not installed."""
    if kit is None:
        raise ConfigurationError(f"the {feature} feature is not installed on this memory")
    return kit


@dataclass(frozen=True, slots=True)
class Feature:
    """A named feature and how it installs itself on a core: given the kits installed so
    far, it returns them with its own added."""

    name: str
    install: Callable[[Core, Kits], Kits]


def _plain(install: Callable[[Core], None]) -> Callable[[Core, Kits], Kits]:
    """A feature with no kit and no dependency."""

    def run(core: Core, kits: Kits) -> Kits:
        install(core)
        return kits

    return run


def _context(core: Core, kits: Kits) -> Kits:
    return replace(kits, context=context_feature.install(core, handlers.compact))


def _nodes(core: Core, kits: Kits) -> Kits:
    return replace(kits, nodes=nodes_feature.install(core))


def _state(core: Core, kits: Kits) -> Kits:
    state_feature.install(core, need(kits.context, "context"))
    return kits


def _recall(core: Core, kits: Kits) -> Kits:
    context = need(kits.context, "context")
    return replace(kits, recall=recall_feature.install(core, context, handlers.embed))


def _longterm(core: Core, kits: Kits) -> Kits:
    context, recall = need(kits.context, "context"), need(kits.recall, "recall")
    kit = longterm_feature.install(core, context, recall, handlers.extract)
    return replace(kits, longterm=kit)


def _memory_health(core: Core, kits: Kits) -> Kits:
    longterm_feature.install_health(core, handlers.consolidate)
    return kits


def _retention(core: Core, kits: Kits) -> Kits:
    retention_feature.install(core, handlers.retention)
    return kits


def _provenance(core: Core, kits: Kits) -> Kits:
    return replace(kits, fact_usage=provenance_feature.install(core))


def _receipts(core: Core, kits: Kits) -> Kits:
    receipts_feature.install(core, handlers.verify_receipts)
    return kits


FEATURES: tuple[Feature, ...] = (
    Feature("jobs", _plain(jobs_feature.install)),
    Feature("vectors", _plain(recall_feature.install_vectors)),
    Feature("context", _context),
    Feature("nodes", _nodes),
    Feature("state", _state),
    Feature("graph", _plain(graph_feature.install)),
    Feature("recall", _recall),
    Feature("longterm", _longterm),
    Feature("retention", _retention),
    Feature("provenance", _provenance),
    Feature("memory-health", _memory_health),
    Feature("usage", _plain(usage_feature.install)),
    Feature("receipts", _receipts),
)
