"""Where ``Memory.open`` finds the client of a memstrata server (an ``http(s)://`` URL).

The facade names the client here instead of importing it: the client sits above the
facade's layer (it mirrors it over REST), and importing it only when a server URL is
opened keeps httpx out of embedded use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CLIENTS", "remote_client"]

# Class name -> module: the sync and async clients of the REST API.
CLIENTS = {"RemoteMemory": "memstrata.client", "AsyncRemoteMemory": "memstrata.client"}


def remote_client(name: str) -> Any:
    """The client class registered under ``name`` (its module imported on first use)."""
    return getattr(importlib.import_module(CLIENTS[name]), name)
