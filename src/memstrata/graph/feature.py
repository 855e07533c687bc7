"""What graph storage adds to an opened memory: forgetting a user forgets their checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.graph import checkpoints

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["install"]


def install(core: Core) -> None:
    core.rt.cascade.on_user_delete(checkpoints.delete_for_user)
