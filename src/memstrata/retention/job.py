"""The periodic retention job's kind (the job applies the stored policies, then comes
back: :func:`memstrata.api.handlers.retention`)."""

from __future__ import annotations

__all__ = ["RETENTION_JOB"]

RETENTION_JOB = "memstrata.retention"
