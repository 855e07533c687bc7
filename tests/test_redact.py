"""Redaction: configured patterns never reach the model or the long-term store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.errors import ConfigurationError
from memstrata.redact import Redactor
from memstrata.testing import FakeLLM
from support import Models


def test_builtin_kinds_and_custom_patterns() -> None:
    red = Redactor.build(["email", "phone", "secret"], [r"\bACME-\d+\b"])
    assert red is not None
    text = (
        "mail ann.lee+x@example.co.uk or call +44 20 7946 0958, key sk-abcdefghijklmnop1234 "
        "token 0123456789abcdef0123456789abcdef, ticket ACME-42, year 2026, room 12"
    )
    out = red(text)
    assert "example.co.uk" not in out
    assert "7946" not in out
    assert "sk-abcdefghijklmnop1234" not in out
    assert "0123456789abcdef0123456789abcdef" not in out
    assert "ACME-42" not in out
    assert "[redacted:email]" in out
    assert "[redacted:phone]" in out
    assert "[redacted:secret]" in out
    assert "[redacted:pattern1]" in out
    assert "year 2026, room 12" in out  # short numbers are not phone numbers
    assert Redactor.build([], []) is None
    with pytest.raises(ConfigurationError, match="unknown redaction kind"):
        Redactor.build(["passport"])
    with pytest.raises(ConfigurationError, match="REDACT_PATTERNS"):
        Redactor.build([], ["(unclosed"])


def test_nothing_redacted_reaches_the_model_or_the_facts(tmp_path: Path, models: Models) -> None:
    settings = Settings(home=tmp_path, worker="off", redact="email,secret")
    mem = Memory.open(f"sqlite:///{tmp_path / 'm.db'}", settings=settings)
    try:
        # A model that repeats what it was told, and one address it "remembers" on its own.
        reply = {
            "newFacts": [
                {"content": "Email is bob@corp.example", "category": "context", "confidence": 0.9}
            ],
            "profile": {"workContext": "Uses key sk-live1234567890abcdefgh at work."},
        }
        llm = FakeLLM([json.dumps(reply)])
        models(mem, facts_llm=llm, facts_embedder=None)
        s = Scope("t", "u")
        c = mem.conversations.create(s)
        mem.messages.append(
            s, c.id, role="user", content="I am bob@corp.example, key sk-live1234567890abcdefgh"
        )
        mem.messages.append(s, c.id, role="assistant", content="noted")
        mem.longterm.flush(s, c.id)
        sent = json.dumps(llm.calls[0].messages)
        assert "bob@corp.example" not in sent
        assert "sk-live1234567890abcdefgh" not in sent
        assert "[redacted:email]" in sent
        [fact] = mem.facts.list(s).items
        assert fact.content == "Email is [redacted:email]"
        profile = {p.name: p.summary for p in mem.longterm.profile(s)}
        assert "sk-live" not in profile["workContext"]
        # The raw messages are the user's record: kept as written.
        assert "bob@corp.example" in mem.messages.path(s, c.id)[0].content
        # Compaction prompts go through the same filter.
        comp = FakeLLM(["### Goal\n- x"])
        models(mem, llm=comp)
        for i in range(30):
            mem.messages.append(
                s, c.id, role="user", content=f"write to bob@corp.example {i} " * 20
            )
            mem.messages.append(s, c.id, role="assistant", content="ok " * 50)
        mem.compact(s, c.id)
        assert comp.calls
        assert "bob@corp.example" not in json.dumps(comp.calls[0].messages)
    finally:
        mem.close()
