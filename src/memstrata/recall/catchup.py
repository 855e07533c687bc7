"""Read-path embedding, bounded in time: the async implementation and its generated
sync twin (see ``_async_catchup``)."""

from memstrata.recall._async_catchup import CATCH_UP_SECONDS, AsyncCatchUp
from memstrata.recall._sync_catchup import CatchUp

__all__ = ["CATCH_UP_SECONDS", "AsyncCatchUp", "CatchUp"]
