"""Benchmarks with encryption at rest on: a throwaway master key and keyring for one run.

Benchmarks open their stores from the environment's settings, so turning encryption on is
setting ``MEMSTRATA_ENCRYPT_AT_REST`` (with a master key and a keyring in a temporary
directory) for the length of the run, and putting the environment back after it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memstrata.keyring import create_master_key

__all__ = ["MODES", "encrypted"]

#: ``--encryption``: off (as before), on, or both in one run (on's result under "encrypted").
MODES = ("off", "on", "both")


@contextmanager
def encrypted() -> Iterator[None]:
    names = ("MEMSTRATA_ENCRYPT_AT_REST", "MEMSTRATA_MASTER_KEY_FILE", "MEMSTRATA_KEYRING")
    saved = {n: os.environ.get(n) for n in names}
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-keys-") as tmp:
        key = Path(tmp) / "master.key"
        create_master_key(key)
        os.environ.update(zip(names, ("true", str(key), str(Path(tmp) / "keyring")), strict=True))
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
