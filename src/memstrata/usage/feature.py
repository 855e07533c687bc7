"""What usage metering adds to an opened memory: a deleted user's usage rows stay, since
they are the tenant's accounting, re-attributed to no one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.usage import store

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["install"]


def install(core: Core) -> None:
    core.rt.cascade.on_user_delete(store.anonymise_user)
