"""Test kit: deterministic fakes and the backend conformance suite.

``FakeLLM``, ``FakeEmbedder`` and ``FakeOpenAIServer`` (``FakeLLM`` behind an
OpenAI-compatible HTTP endpoint on 127.0.0.1) are importable from here, and ``override``,
which swaps a memory's models for a ``with`` block. The conformance
suite lives in :mod:`memstrata.testing.conformance` and needs pytest, so it is
not imported by this package::

    from memstrata.testing.conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def memory(self): ...
"""

from memstrata.testing.fakes import FakeEmbedder, FakeLLM, LLMCall, ScriptExhausted, Usage, cosine
from memstrata.testing.openai_server import FakeOpenAIServer
from memstrata.testing.override import KEEP, override

__all__ = [
    "KEEP",
    "FakeEmbedder",
    "FakeLLM",
    "FakeOpenAIServer",
    "LLMCall",
    "ScriptExhausted",
    "Usage",
    "cosine",
    "override",
]
