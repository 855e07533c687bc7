"""How long-term memory is shown to a model: one line per fact or profile section, and
the order in which facts compete for the injection budget.

Lines are HTML-escaped and kept on one line, because fact text comes from users and
models: a fact saying ``</memory>`` or starting a new ``- `` item must not be able to
change the structure of the prompt it is injected into. The order guarantees the
corrections (what the assistant got wrong before) a reserved share of the budget, then
lets every fact compete by confidence; every tie is broken, so the same facts always
give the same prompt (and prompt caches keep hitting).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from datetime import datetime

from memstrata.longterm.model import PROFILE_LABELS, Fact, FactStatus

__all__ = [
    "GUARANTEED_CATEGORY",
    "confidence_text",
    "fact_line",
    "injection_order",
    "profile_line",
]

#: The category that gets a reserved budget ahead of the others.
GUARANTEED_CATEGORY = "correction"


def _clean(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False)


def _clamp(confidence: float) -> float:
    # NaN would make sorting unstable and print as "nan"; treat it as no confidence.
    if math.isnan(confidence):
        return 0.0
    return min(1.0, max(0.0, confidence))


def confidence_text(confidence: float) -> str:
    """A confidence as shown in prompts: clamped to [0, 1], two decimals."""
    return f"{_clamp(confidence):.2f}"


def fact_line(content: str, category: str, confidence: float, source_error: str | None) -> str:
    """``[category | 0.95] content``, plus ``(avoid: ...)`` for a correction that says
    what went wrong."""
    line = f"[{_clean(category)} | {confidence_text(confidence)}] {_clean(content)}"
    if category == GUARANTEED_CATEGORY and source_error and source_error.strip():
        line += f" (avoid: {_clean(source_error)})"
    return line


def profile_line(section: str, summary: str) -> str:
    """``Label: summary`` for one profile section (unknown sections keep their name)."""
    return f"{_clean(PROFILE_LABELS.get(section, section))}: {_clean(summary)}"


def _rank(fact: Fact) -> tuple[float, datetime, str, str]:
    return (-_clamp(fact.confidence), fact.created_at, fact.id, fact.content)


def injection_order(
    facts: Sequence[Fact], cost: Callable[[Fact], int], guaranteed: int = 500
) -> list[Fact]:
    """Active facts in the order an injector should take them until its budget is spent.

    First the corrections, by confidence, while their summed ``cost`` stays within
    ``guaranteed`` (the first that does not fit ends the reserved part, so a smaller
    one is not pulled ahead of it); then every other active fact, leftover corrections
    included, by confidence. Ties go to the older fact, then the smaller id.
    """
    active = sorted((f for f in facts if f.status is FactStatus.ACTIVE), key=_rank)
    reserved: list[int] = []
    spent = 0
    for index, fact in enumerate(active):
        if fact.category != GUARANTEED_CATEGORY:
            continue
        spent += cost(fact)
        if spent > guaranteed:
            break
        reserved.append(index)
    taken = set(reserved)
    return [active[i] for i in reserved] + [f for i, f in enumerate(active) if i not in taken]
