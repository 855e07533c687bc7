"""Semantic recall: hybrid keyword + vector search over a user's past messages.

``mem.recall.search(scope, query, k=10, ...)`` (see :mod:`memstrata.api._async_recall`).
"""

from memstrata.recall.service import RecallHit

__all__ = ["RecallHit"]
