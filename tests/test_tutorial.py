"""docs/tutorial.md is real: its example runs against an OpenAI-compatible fake server,
and every Python snippet of the page is in the example, unchanged and in order."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from longterm_support import rule_extractor
from memstrata.testing import FakeLLM, FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tutorial_chat.py"
TUTORIAL = ROOT / "docs" / "tutorial.md"

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(markdown: str) -> list[str]:
    return _PYTHON_BLOCK.findall(markdown)


def _responder() -> Any:
    """Extraction prompts get the rule-based extractor; chat calls a numbered echo."""
    replies = itertools.count(1)

    def answer(messages: list[dict[str, Any]]) -> str:
        if "<conversation>\n" in messages[-1]["content"]:
            return rule_extractor(messages)
        question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        return f"Reply {next(replies)} to: {question}"

    return answer


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    return {**env, **extra}


def _run(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_tutorial_runs_end_to_end_against_a_fake_openai_server(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with FakeOpenAIServer(FakeLLM(_responder())) as server:
        env = _clean_env(
            MEMSTRATA_LLM_BASE_URL=server.base_url,
            MEMSTRATA_LLM_MODEL="fake-chat",
            MEMSTRATA_LLM_API_KEY="test-key",
            MEMSTRATA_EMBEDDER="none",
            # No background worker: it could run the debounced extraction on a very slow
            # machine and add a model call; the tutorial's flush does the extraction.
            MEMSTRATA_WORKER="off",
            TMPDIR=str(scratch),
        )
        done = _run(env, tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    hike = "Which hike would you suggest for Saturday?"
    for line in [
        "assistant: Reply 1 to: Hi! I'm spending next weekend in Bergen. I like seafood.",
        "history under 60 tokens: 3 messages, truncated=True",
        "kept: ['system', 'user', 'assistant']",
        f"assistant: Reply 3 to: {hike}",
        f"regenerated: Reply 4 to: {hike}",
        "leaves: 2",
        f"active branch ends with: Reply 3 to: {hike}",
        "extraction: applied",
        "fact: [preference 0.95] User likes seafood",
        "fact: [preference 0.95] User likes quiet hotels",
        f"recall: user: {hike}",
        "working memory version: 2",
        "assistant: Reply 6 to: Somewhere close to the hotel, please.",
    ]:
        assert line in out.splitlines(), line
    assert re.search(r"^context: \d+ of 3000 tokens, \d+ messages$", out, re.M)
    assert re.search(r"^  tier recent: \d+ tokens, \d+ items$", out, re.M)
    assert re.search(r"^refused: .+", out, re.M)  # the stale working-memory write
    memory = (
        "<memory>\n[preference | 0.95] User likes seafood\n"
        "[preference | 0.95] User likes quiet hotels\n</memory>"
    )
    assert f"--- system\n{memory}\n--- user\nBook a table for tonight, please.\n" in out
    working = (
        "<working-memory>\nUser working memory (kept across conversations):\n"
        "# Trip\n- city: Bergen\n- hotel: quiet\n</working-memory>"
    )
    assert f"{memory}\n{working}\n" in out

    sent = [r["messages"] for r in server.requests]
    assert [r["model"] for r in server.requests] == ["fake-chat"] * 7
    extraction = [i for i, m in enumerate(sent) if "<conversation>\n" in m[-1]["content"]]
    assert extraction == [5]  # one extraction, between the two conversations
    assert sent[3] == sent[2]  # the regeneration asked with the same prompt
    assert sent[0][0] == {"role": "system", "content": "You are a concise travel assistant."}
    # The last reply was asked with the facts and the working memory in its context.
    system = "\n".join(m["content"] for m in sent[-1] if m["role"] == "system")
    assert memory in system
    assert working in system
    assert list(scratch.iterdir()) == []  # the temporary store was removed


def test_tutorial_without_a_model_says_what_to_set(tmp_path: Path) -> None:
    done = _run(_clean_env(TMPDIR=str(tmp_path)), tmp_path)
    assert done.returncode == 1
    assert "set MEMSTRATA_LLM_MODEL" in done.stderr


def test_every_python_snippet_of_the_tutorial_is_in_the_example_in_order() -> None:
    blocks = python_blocks(TUTORIAL.read_text(encoding="utf-8"))
    assert len(blocks) >= 10
    source = EXAMPLE.read_text(encoding="utf-8")
    at = 0
    for block in blocks:
        found = source.find(block, at)
        assert found >= 0, f"not in examples/tutorial_chat.py (after offset {at}):\n{block}"
        at = found + len(block)


def test_python_blocks_are_read_whole() -> None:
    page = "x\n```python\na = 1\n\nb = 2\n```\n```bash\nls\n```\n```python\nc\n```\n"
    assert python_blocks(page) == ["a = 1\n\nb = 2\n", "c\n"]


def test_tutorial_runs_end_to_end_with_the_demo_model(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = _clean_env(
        MEMSTRATA_LLM_BASE_URL="fake://",
        MEMSTRATA_LLM_MODEL="any-name",
        MEMSTRATA_EMBEDDER="none",
        MEMSTRATA_WORKER="off",
        TMPDIR=str(scratch),
    )
    done = _run(env, tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    hike = "Which hike would you suggest for Saturday?"
    for line in [
        "assistant: (demo model) You asked: Hi! I'm spending next weekend in Bergen. I like seafood.",
        f"regenerated: (demo model) You asked: {hike}",
        "extraction: applied",
        "fact: [preference 0.95] User likes seafood",
        "fact: [preference 0.95] User likes quiet hotels",
        "working memory version: 2",
        "assistant: (demo model) You asked: Somewhere close to the hotel, please. "
        "I remember: User likes seafood; User likes quiet hotels.",
    ]:
        assert line in out, line
    # Selected openly: the log says it is the demo model, once.
    assert done.stderr.count("demo model") == 1, done.stderr
    assert list(scratch.iterdir()) == []
