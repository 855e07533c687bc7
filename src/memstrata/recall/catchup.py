"""Read-path embedding, bounded by count: the async implementation and its generated
sync twin (see ``_async_catchup``)."""

from memstrata.recall._async_catchup import AsyncCatchUp
from memstrata.recall._sync_catchup import CatchUp

__all__ = ["AsyncCatchUp", "CatchUp"]
