"""The offline tokenizer: exact tables, no network, the shared counting rule."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memstrata import tokens
from memstrata.tokens import (
    DEFAULT_ENCODING,
    MESSAGE_OVERHEAD,
    encoding_for_model,
    estimate_tokens,
    get_tokenizer,
)
from memstrata.types import ToolCall


def test_patterns_and_specials_match_tiktoken_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry constructors would download the tables; give them an empty table instead.
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    for name in ("o200k_base", "cl100k_base"):
        spec = getattr(openai_public, name)()
        assert spec["pat_str"] == tokens._PATTERNS[name]
        assert spec["special_tokens"] == tokens._SPECIALS[name]


@pytest.mark.parametrize(
    ("encoding", "text", "expected"),
    [
        # Reference counts from the published encodings.
        ("o200k_base", "hello world", 2),
        ("cl100k_base", "hello world", 2),
        ("cl100k_base", "tiktoken is great!", 6),
        ("o200k_base", "", 0),
    ],
)
def test_known_counts(encoding: str, text: str, expected: int) -> None:
    assert get_tokenizer(encoding).count_text(text) == expected


def test_encodings_differ_on_cjk() -> None:
    text = "今天天气很好，我们去公园散步吧。" * 3
    assert get_tokenizer("o200k_base").count_text(text) != get_tokenizer("cl100k_base").count_text(
        text
    )


def test_special_token_text_is_plain_content() -> None:
    tok = get_tokenizer()
    assert tok.count_text("<|endoftext|>") > 1


def test_model_map() -> None:
    assert encoding_for_model(None) == DEFAULT_ENCODING
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("openai/gpt-4.1-2025-04-14") == "o200k_base"
    assert encoding_for_model("gpt-4-turbo") == "cl100k_base"
    assert encoding_for_model("gpt-3.5-turbo") == "cl100k_base"
    assert encoding_for_model("cl100k_base") == "cl100k_base"
    assert encoding_for_model("claude-sonnet-4") == "estimate"
    assert encoding_for_model("llama3") == "estimate"


def test_estimate_counts_cjk_as_half_token() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("你好世界") == 2
    assert get_tokenizer("some-unknown-model").count_text("abcdefgh") == 2


def test_message_rule_counts_content_tool_calls_and_overhead() -> None:
    tok = get_tokenizer()
    call = ToolCall.model_validate(
        {"id": "c1", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    )
    plain = tok.count_message("hello world")
    assert plain == 2 + MESSAGE_OVERHEAD
    with_call = tok.count_message("hello world", [call])
    expected = plain + tok.count_text("get_weather") + tok.count_text('{"city":"Paris"}')
    assert with_call == expected


def test_cache_is_bounded() -> None:
    tok = tokens.Tokenizer(tokens.get_encoding("o200k_base"), cache_size=3)
    for i in range(10):
        tok.count_text(f"a text long enough to be cached number {i}")
    assert len(tok._cache) == 3


def test_import_and_first_count_never_touch_the_network(tmp_path) -> None:
    # A fresh interpreter with sockets disabled and no tiktoken cache must still count.
    code = (
        "import socket\n"
        "def _no(*a, **k): raise RuntimeError('network used')\n"
        "socket.socket.connect = _no; socket.socket.connect_ex = _no\n"
        "socket.create_connection = _no; socket.getaddrinfo = _no\n"
        "import memstrata\n"
        "from memstrata.tokens import get_tokenizer\n"
        "print(get_tokenizer('o200k_base').count_text('hello world'),"
        " get_tokenizer('cl100k_base').count_text('hello world'))\n"
    )
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "empty"), "HOME": str(tmp_path), "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["2", "2"]
    assert not (tmp_path / "empty").exists()
