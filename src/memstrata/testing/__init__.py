"""Test kit: deterministic fakes and the backend conformance suite.

``FakeLLM`` and ``FakeEmbedder`` are importable from here. The conformance
suite lives in :mod:`memstrata.testing.conformance` and needs pytest, so it is
not imported by this package::

    from memstrata.testing.conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def memory(self): ...
"""

from memstrata.testing.fakes import FakeEmbedder, FakeLLM, LLMCall, ScriptExhausted, Usage, cosine

__all__ = ["FakeEmbedder", "FakeLLM", "LLMCall", "ScriptExhausted", "Usage", "cosine"]
