"""Wire models of usage reports and budgets (``GET /v1/usage``, ``/v1/budgets``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memstrata.domain.usage import Budget

__all__ = ["BudgetIn", "BudgetOut", "BudgetPage", "UsageReportOut", "UsageTotalOut", "budget_dict"]


class UsageTotalOut(BaseModel):
    key: str = Field(description="The purpose or the user of this group ('*' for the total).")
    calls: int = Field(description="Model calls (an embedder call may embed many texts).")
    errors: int = Field(description="Calls that failed.")
    input_tokens: int
    output_tokens: int
    tokens: int = Field(description="input_tokens + output_tokens.")
    duration_s: float = Field(description="Time spent in the calls.")


class UsageReportOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: datetime = Field(alias="from", description="Start of the period (inclusive).")
    to: datetime = Field(description="End of the period (exclusive).")
    group_by: str = Field(description="purpose or user.")
    items: list[UsageTotalOut]
    next_cursor: str | None
    total: UsageTotalOut = Field(description="Every group of the period together.")


class BudgetOut(BaseModel):
    purpose: str
    daily_tokens: int = Field(description="Tokens (input + output) allowed per UTC day; 0 blocks.")
    used_today: int = Field(description="Tokens of this purpose used today (UTC).")
    exhausted: bool = Field(
        description="Jobs of this purpose wait (blocked: budget) until tomorrow (UTC) or a raise."
    )
    updated_at: datetime


class BudgetPage(BaseModel):
    items: list[BudgetOut]
    next_cursor: str | None = None


class BudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    purpose: str = Field(
        min_length=1,
        max_length=64,
        description="extraction, compaction, consolidation, embedding, query, chat (or another).",
    )
    daily_tokens: int = Field(ge=0, lt=2**62, description="Tokens per UTC day; 0 blocks.")


def budget_dict(budget: Budget, *, tenant: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"tenant": budget.tenant} if tenant else {}
    out.update(
        purpose=budget.purpose,
        daily_tokens=budget.daily_tokens,
        used_today=budget.used_today,
        exhausted=budget.exhausted,
        updated_at=budget.updated_at.isoformat(),
    )
    return out
