"""The encoder graph with fused operators (``embeddings._fuse``) gives the plain graph's
vectors bit for bit: the shipped int8 copy against the int8 graph it was fused from,
and the float32 graph of a weights folder, in padded batches and one text at a time. A
graph of another shape is refused and left as it was."""

from __future__ import annotations

import importlib.util
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memstrata.embeddings._bert import BertConfig, build_onnx, quantize_int8, read_safetensors
from memstrata.embeddings.bundled import MODEL_FILE, REVISION_FILE, bundled_dir
from memstrata.embeddings.minilm import MAX_TOKENS, MiniLMEmbedder, locate_model
from memstrata.errors import ConfigurationError, MissingDependency
from support import tiny_bert

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime", "tokenizers")),
    reason="needs onnx, onnxruntime and tokenizers",
)

WORDS = [
    "the",
    "ferry",
    "leaves",
    "at",
    "seven",
    "pack",
    "the",
    "tent",
    "and",
    "stove",
    "our",
    "team",
    "moved",
    "the",
    "billing",
    "service",
    "to",
    "a",
    "new",
    "queue",
    "after",
    "the",
    "outage",
    "which",
    "database",
    "does",
    "the",
    "reporting",
    "job",
    "read",
    "from",
    "soldering",
    "schematics",
    "battery",
    "storage",
    "émigré",
    "naïve",
    "🚲",
    "3.14159",
]


@pytest.fixture(scope="module")
def weights_dir() -> Path:
    try:
        return locate_model()[0]
    except MissingDependency as exc:
        pytest.skip(exc.message)


@pytest.fixture(scope="module")
def graphs(weights_dir: Path) -> dict[str, bytes]:
    """The float32 graph, its int8 quantization (as the build script makes it) and the
    shipped int8 graph."""
    model = build_onnx(
        read_safetensors(weights_dir / "model.safetensors"),
        BertConfig.from_json(weights_dir / "config.json"),
    )
    plain = quantize_int8(model)
    shipped = bundled_dir()
    assert shipped is not None
    return {
        "fp32": model.SerializeToString(),
        "int8": plain,
        "shipped": (shipped / MODEL_FILE).read_bytes(),
    }


def batches(count: int = 48, size: int = 8) -> list[tuple[Any, Any]]:
    """Padded batches of token ids of texts from 1 to 300 words (some truncated)."""
    from tokenizers import Tokenizer

    shipped = bundled_dir()
    assert shipped is not None
    tok = Tokenizer.from_file(str(shipped / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    rng = random.Random(7)
    texts = [" ".join(rng.choices(WORDS, k=rng.choice((1, 3, 12, 40, 300)))) for _ in range(count)]
    encoded = [e.ids for e in tok.encode_batch(texts)]
    out = []
    for start in range(0, count, size):
        group = encoded[start : start + size]
        width = max(map(len, group))
        ids = np.zeros((len(group), width), dtype=np.int64)
        mask = np.zeros((len(group), width), dtype=np.float32)
        for row, tokens in enumerate(group):
            ids[row, : len(tokens)], mask[row, : len(tokens)] = tokens, 1.0
        out.append((ids, mask))
        out.extend(
            (ids[i : i + 1, : len(t)], mask[i : i + 1, : len(t)]) for i, t in enumerate(group)
        )
    return out


def vectors(graph: bytes, threads: int) -> list[Any]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])
    return [
        session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        for ids, mask in batches()
    ]


def ops(graph: bytes) -> Counter[str]:
    import onnx

    return Counter(n.op_type for n in onnx.load_from_string(graph).graph.node)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_shipped_fused_graph_gives_the_int8_graphs_vectors_bit_for_bit(
    graphs: dict[str, bytes], threads: int
) -> None:
    fused = ops(graphs["shipped"])
    assert (fused["MultiHeadAttention"], fused["Gelu"], fused["Softmax"], fused["Erf"]) == (
        6,
        6,
        0,
        0,
    )
    assert fused["MatMulInteger"] == ops(graphs["int8"])["MatMulInteger"] - 12  # q, k, v as one
    for a, b in zip(
        vectors(graphs["int8"], threads), vectors(graphs["shipped"], threads), strict=True
    ):
        assert np.array_equal(a, b)


def test_fusing_the_float32_graph_keeps_its_vectors_bit_for_bit(graphs: dict[str, bytes]) -> None:
    import onnx

    from memstrata.embeddings._fuse import fuse

    fused = fuse(onnx.load_from_string(graphs["fp32"])).SerializeToString()
    assert ops(fused)["MultiHeadAttention"] == 6
    for a, b in zip(vectors(graphs["fp32"], 1), vectors(fused, 1), strict=True):
        assert np.array_equal(a, b)


def test_the_identity_names_the_graph_before_fusing(graphs: dict[str, bytes]) -> None:
    import hashlib

    revision = hashlib.sha256(graphs["int8"]).hexdigest()[:12]
    assert MiniLMEmbedder().identity == f"all-minilm-l6-v2@int8-{revision}:384"


def test_a_graph_of_another_shape_is_refused_and_left_as_it_was(graphs: dict[str, bytes]) -> None:
    import onnx

    from memstrata.embeddings._fuse import fuse

    fused = onnx.load_from_string(graphs["shipped"])
    with pytest.raises(ValueError, match="not an unfused encoder graph"):
        fuse(fused)
    assert fused.SerializeToString() == graphs["shipped"]
    # One layer's GELU halves another value: refused, nothing rewritten.
    plain = onnx.load_from_string(graphs["fp32"])
    halves = [n for n in plain.graph.node if n.op_type == "Mul" and "half" in n.input]
    halves[3].input[0] = "attention_mask"
    before = plain.SerializeToString()
    with pytest.raises(ValueError, match="halves"):
        fuse(plain)
    assert plain.SerializeToString() == before


def test_a_damaged_revision_file_stops_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from memstrata.embeddings import minilm

    shipped = bundled_dir()
    assert shipped is not None
    copy = tmp_path / "data"
    shutil.copytree(shipped, copy)
    (copy / REVISION_FILE).write_text("not a digest\n")
    monkeypatch.setattr(minilm, "bundled_dir", lambda: copy)
    with pytest.raises(ConfigurationError, match="does not hold a revision"):
        MiniLMEmbedder().identity  # noqa: B018


def test_a_weights_folder_the_fusion_does_not_know_runs_unfused_with_a_warning(
    weights_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from memstrata.embeddings import minilm

    def refuse(graph: Any) -> Any:
        raise ValueError("the graph has no encoder layers of the expected shape")

    minilm.clear_cache()
    monkeypatch.setattr(minilm, "fuse", refuse)
    try:
        plain = MiniLMEmbedder(model_dir=weights_dir, backend="onnxruntime", threads=1)
        with caplog.at_level("WARNING", logger="memstrata.embeddings"):
            got = plain.embed_array(["I moved to Berlin in 2019.", "ok"])
        assert "runs without fused operators" in caplog.text
        monkeypatch.undo()
        minilm.clear_cache()
        fused = MiniLMEmbedder(model_dir=weights_dir, backend="onnxruntime", threads=1)
        assert np.array_equal(got, fused.embed_array(["I moved to Berlin in 2019.", "ok"]))
    finally:
        minilm.clear_cache()


@pytest.mark.parametrize(("hidden", "heads", "layers"), [(64, 4, 2), (48, 3, 3)])
def test_another_bert_shape_fuses_to_the_same_vectors(hidden: int, heads: int, layers: int) -> None:
    import onnx
    import onnxruntime as ort

    from memstrata.embeddings._fuse import fuse

    weights, config = tiny_bert(
        5, hidden=hidden, heads=heads, layers=layers, inner=4 * hidden, vocab=97, positions=64
    )
    model = build_onnx(weights, config)
    int8 = quantize_int8(model)
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 97, size=(4, 19)).astype(np.int64)
    mask = np.ones((4, 19), dtype=np.float32)
    mask[1, 7:], mask[2, 12:], mask[3, 1:] = 0.0, 0.0, 0.0
    for plain in (model.SerializeToString(), int8):
        fused = fuse(onnx.load_from_string(plain)).SerializeToString()
        assert ops(fused)["MultiHeadAttention"] == layers
        got = []
        for graph in (plain, fused):
            session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
            got.append(session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0])
        assert np.array_equal(got[0], got[1])
