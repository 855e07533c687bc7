"""The remote client stands alone: importing it loads no module of the local stack.

Each import runs in a fresh interpreter (this process has long since loaded everything),
which reports the memstrata modules it holds afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import memstrata
from memstrata.client import _decode

# What `import memstrata.client` must not load: the facade, storage and its backends,
# every feature package, and the surfaces.
LOCAL_STACK = (
    "memstrata.api",
    "memstrata.backends",
    "memstrata.storage",
    "memstrata.context",
    "memstrata.longterm",
    "memstrata.recall",
    "memstrata.nodes",
    "memstrata.transfer",
    "memstrata.graph",
    "memstrata.retention",
    "memstrata.backup",
    "memstrata.state",
    "memstrata.conversation",
    "memstrata.jobs",
    "memstrata.provenance",
    "memstrata.receipts",
    "memstrata.usage",
    "memstrata.server",
    "memstrata.mcpserver",
    "memstrata.cli",
)


def loaded_after(statement: str) -> list[str]:
    """The memstrata modules a fresh interpreter holds after running ``statement``."""
    code = (
        "import json, sys\n"
        f"{statement}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'memstrata')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return list(json.loads(done.stdout))


def of_local_stack(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in LOCAL_STACK)]


def test_importing_the_client_loads_no_local_stack_module() -> None:
    loaded = loaded_after("import memstrata.client")
    assert "memstrata.client._decode" in loaded  # the measure sees what the client loads
    assert of_local_stack(loaded) == []


def test_the_measure_sees_the_local_stack_when_it_is_loaded() -> None:
    loaded = loaded_after("from memstrata import Memory")
    assert "memstrata.api" in loaded
    assert {"memstrata.storage", "memstrata.state", "memstrata.longterm"} <= set(
        of_local_stack(loaded)
    )


def test_importing_memstrata_loads_the_kernel_only() -> None:
    loaded = loaded_after("import memstrata")
    assert set(loaded) <= {
        "memstrata",
        "memstrata.encoding",
        "memstrata.errors",
        "memstrata.ids",
        "memstrata.instants",  # Message's datetimes, built from stored microseconds
        "memstrata.types",
        "memstrata.version",
    }


@pytest.mark.parametrize("name", memstrata.__all__)
def test_every_public_name_is_importable(name: str) -> None:
    assert getattr(memstrata, name) is not None
    assert name in dir(memstrata)


def test_the_facade_and_its_results_are_the_same_classes_everywhere() -> None:
    from memstrata import History, Memory
    from memstrata.api import AsyncMemory as FacadeAsync
    from memstrata.api import Memory as Facade
    from memstrata.conversation.history import History as FeatureHistory
    from memstrata.longterm.model import Fact
    from memstrata.state import WorkingMemory

    assert Memory is Facade
    assert memstrata.AsyncMemory is FacadeAsync
    assert History is FeatureHistory
    # What the client decodes into is what the facade returns.
    assert type(_decode.working(_working_json())) is WorkingMemory
    assert Fact.__module__ == "memstrata.domain.longterm"


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        memstrata.Nope  # noqa: B018


def _working_json() -> dict[str, object]:
    return {
        "conversation_id": None,
        "format": "markdown",
        "content": "# notes",
        "json_schema": None,
        "template": None,
        "version": 1,
        "updated_at": "2026-11-27T00:00:00+00:00",
    }
