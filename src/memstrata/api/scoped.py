"""A memory bound to one scope: ``mem.scoped(scope)`` (see :mod:`memstrata.scoped`).

The class lives outside the facade so the remote clients share it without importing
``memstrata.api``; this import path stays for callers who use it.
"""

from memstrata.scoped import Scoped

__all__ = ["Scoped"]
