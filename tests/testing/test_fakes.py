"""The test kit's fakes: FakeLLM and FakeEmbedder."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from typing import Any

import anyio
import pytest

from memstrata import BackendUnavailable
from memstrata.testing import FakeEmbedder, FakeLLM, ScriptExhausted, Usage, cosine
from memstrata.tokens import get_tokenizer

CHAT = [
    {"role": "system", "content": "Summarise."},
    {"role": "user", "content": "The meeting moved to Thursday at 10."},
]

# -- FakeLLM ---------------------------------------------------------------------------------


def test_scripted_replies_in_order_then_exhausted() -> None:
    llm = FakeLLM(["one", "two"])
    assert llm.complete(CHAT) == "one"
    assert llm.complete(CHAT) == "two"
    with pytest.raises(ScriptExhausted, match="3 times"):
        llm.complete(CHAT)


def test_cycle_starts_over() -> None:
    llm = FakeLLM(["a", "b"], cycle=True)
    assert [llm.complete(CHAT) for _ in range(5)] == ["a", "b", "a", "b", "a"]


def test_callable_replies_see_the_messages() -> None:
    llm = FakeLLM(lambda msgs: f"{len(msgs)} messages, last: {msgs[-1]['content']}")
    assert llm.complete(CHAT) == "2 messages, last: The meeting moved to Thursday at 10."
    bad = FakeLLM(lambda msgs: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError):
        bad.complete(CHAT)


def test_default_reply_names_the_question() -> None:
    assert FakeLLM().complete(CHAT) == "fake reply to: The meeting moved to Thursday at 10."
    assert FakeLLM().complete([{"role": "system", "content": "x"}]) == "fake reply"


def test_one_string_is_not_a_script() -> None:
    with pytest.raises(TypeError):
        FakeLLM("hello")


def test_calls_are_recorded_as_sent() -> None:
    llm = FakeLLM(["ok", "ok"])
    messages: list[dict[str, Any]] = [dict(m) for m in CHAT]
    llm.complete(messages, purpose="compaction")
    messages[1]["content"] = "changed afterwards"
    llm.complete(messages, model="gpt-4o", purpose="extraction")
    first, second = llm.calls
    assert first.messages[1]["content"] == "The meeting moved to Thursday at 10."
    assert (first.model, first.purpose, first.reply, first.error) == (
        "fake-llm",
        "compaction",
        "ok",
        None,
    )
    assert (second.model, second.purpose) == ("gpt-4o", "extraction")
    assert second.messages[1]["content"] == "changed afterwards"
    assert [c.purpose for c in llm.calls_for("extraction")] == ["extraction"]


def test_failure_injection_for_retries() -> None:
    llm = FakeLLM(["summary"])
    llm.fail_next(2, TimeoutError)
    attempts = 0
    reply = None
    while reply is None:
        attempts += 1
        try:
            reply = llm.complete(CHAT)
        except TimeoutError:
            assert attempts <= 2
    assert (reply, attempts) == ("summary", 3)
    assert [type(c.error) for c in llm.calls] == [TimeoutError, TimeoutError, type(None)]
    assert [c.reply for c in llm.calls] == [None, None, "summary"]  # failures used no reply


def test_failure_with_an_instance_and_the_default() -> None:
    boom = RuntimeError("rate limited upstream")
    llm = FakeLLM(["x"])
    llm.fail_next(1, boom)
    with pytest.raises(RuntimeError) as caught:
        llm.complete(CHAT)
    assert caught.value is boom
    llm.fail_next()
    with pytest.raises(BackendUnavailable):
        llm.complete(CHAT)
    assert llm.complete(CHAT) == "x"
    with pytest.raises(ValueError, match="times"):
        llm.fail_next(-1)


def test_usage_uses_memstrata_counts() -> None:
    llm = FakeLLM(["Thursday, 10:00."])
    llm.complete(CHAT, model="gpt-4o")
    tok = get_tokenizer("gpt-4o")
    prompt = sum(tok.count_message(m["content"]) for m in CHAT)
    assert llm.calls[0].usage == Usage(prompt, tok.count_text("Thursday, 10:00."))
    assert llm.usage.total_tokens == prompt + tok.count_text("Thursday, 10:00.")
    llm.fail_next(1, TimeoutError)
    with pytest.raises(TimeoutError):
        llm.complete(CHAT)
    assert llm.usage.total_tokens == prompt + tok.count_text("Thursday, 10:00.")  # unchanged


def test_content_parts_are_counted() -> None:
    llm = FakeLLM(["seen"])
    parts = [
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "text", "text": "What is in this picture?"},
    ]
    llm.complete([{"role": "user", "content": parts}], model="gpt-4o")
    tok = get_tokenizer("gpt-4o")
    assert llm.calls[0].usage.prompt_tokens == tok.count_message("What is in this picture?")


def test_async_complete() -> None:
    llm = FakeLLM(["first", "second"])
    llm.fail_next(1, TimeoutError)

    async def main() -> list[str]:
        out = []
        for _ in range(3):
            try:
                out.append(await llm.acomplete(CHAT, purpose="async"))
            except TimeoutError:
                out.append("timeout")
        return out

    assert anyio.run(main) == ["timeout", "first", "second"]
    assert [c.purpose for c in llm.calls] == ["async"] * 3


# -- FakeEmbedder ----------------------------------------------------------------------------


def test_vectors_are_unit_length_and_sized() -> None:
    for dim in (2, 64, 300):
        emb = FakeEmbedder(dim)
        for vec in emb.embed(["hello world", "", "   ", "数据 😀", "a" * 1000]):
            assert len(vec) == dim
            assert math.isclose(math.sqrt(sum(x * x for x in vec)), 1.0, rel_tol=1e-9)
    with pytest.raises(ValueError, match="dim"):
        FakeEmbedder(1)


def test_deterministic_across_instances_and_processes() -> None:
    texts = ["the cat sat on the mat", "Привет, мир", ""]
    here = FakeEmbedder().embed(texts)
    assert FakeEmbedder().embed(texts) == here
    script = (
        "import json; from memstrata.testing import FakeEmbedder; "
        f"print(json.dumps(FakeEmbedder().embed({texts!r})))"
    )
    for seed in ("1", "2"):  # Python's own str hash is salted per process; ours must not be
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == here


def test_shared_words_rank_higher() -> None:
    emb = FakeEmbedder()
    query, close, far = emb.embed(
        ["Where is my flight booking?", "Your flight booking is confirmed.", "Bake the bread."]
    )
    assert cosine(query, close) > cosine(query, far)
    assert cosine(query, query) == pytest.approx(1.0)
    # Word pieces count too: "bookings" is near "booking" without sharing the word.
    one, plural, other = emb.embed(["booking", "bookings", "teapot"])
    assert cosine(one, plural) > cosine(one, other)


def test_more_overlap_more_similarity_on_average() -> None:
    """Hashing into 64 dimensions is noisy; on average, overlap must still rank."""
    rng = random.Random(7)
    vocab = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(3000)
    ]
    emb = FakeEmbedder()
    means = []
    wins = 0
    for shared in (0, 1, 2, 3, 4):
        sims = []
        for _ in range(150):
            words = rng.sample(vocab, 12)
            query = " ".join(words[:6])
            other = " ".join(words[:shared] + words[6 : 12 - shared])
            unrelated = " ".join(rng.sample(vocab, 6))
            q, o, u = emb.embed([query, other, unrelated])
            sims.append(cosine(q, o))
            wins += shared == 3 and cosine(q, o) > cosine(q, u)
        means.append(sum(sims) / len(sims))
    assert means == sorted(means)
    assert means[0] < 0.1 < 0.4 < means[3]
    assert wins >= 140  # 3 of 6 words shared beats an unrelated text nearly always


def test_identity_names_the_embedder() -> None:
    assert FakeEmbedder().identity == "fake-hash:64"
    assert FakeEmbedder(128, name="other").identity == "other:128"
    assert FakeEmbedder(64).identity != FakeEmbedder(65).identity


def test_embed_takes_a_list_and_records_calls() -> None:
    emb = FakeEmbedder()
    with pytest.raises(TypeError):
        emb.embed("one text")  # would otherwise embed each character
    assert emb.embed([]) == []
    emb.embed(["a", "b"])
    assert emb.calls == [[], ["a", "b"]]


def test_async_embed_matches() -> None:
    emb = FakeEmbedder(32)

    async def main() -> list[list[float]]:
        return await emb.aembed(["x y", "z"])

    assert anyio.run(main) == FakeEmbedder(32).embed(["x y", "z"])
