"""The documented end-to-end example, run for real: the OpenAI SDK speaks HTTP to a local
OpenAI-compatible fake server, and the next conversation's context carries what the
first one taught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from longterm_support import rule_extractor
from memstrata.testing import FakeLLM, FakeOpenAIServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "longterm_preferences.py"


def test_preferences_from_one_conversation_reach_the_next(tmp_path: Path) -> None:
    llm = FakeLLM(rule_extractor)
    with FakeOpenAIServer(llm) as server:
        env = {
            **os.environ,
            "MEMSTRATA_LLM_BASE_URL": server.base_url,
            "MEMSTRATA_LLM_MODEL": "fake-extractor",
            "MEMSTRATA_LLM_API_KEY": "test-key",
            "MEMSTRATA_EMBEDDER": "none",
        }
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "extraction: applied" in out
    assert "fact: [preference 0.95] User likes window seats" in out
    assert "fact: [preference 0.95] User likes vegetarian food" in out
    assert (
        "<memory>\n[preference | 0.95] User likes window seats\n"
        "[preference | 0.95] User likes vegetarian food\n</memory>"
    ) in out
    assert "Book me a flight to Oslo." in out
    # The model was asked over HTTP, once, with the conversation in the prompt.
    assert [r["model"] for r in server.requests] == ["fake-extractor"]
    assert "I prefer window seats" in server.requests[0]["messages"][-1]["content"]
