"""The default embedder's files shipped inside the package (``embeddings/data/``).

``scripts/build_embedder.py`` writes them from the upstream all-MiniLM-L6-v2 weights:
an int8-quantized ONNX graph (stored with fused operators, see ``_fuse``), the revision
naming its vector space, the model's ``tokenizer.json`` and ``config.json``, and the
license notice. With them, ``pip install 'memstrata[embed]'`` is enough for
semantic recall: no weights package, no torch, nothing downloaded.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_DIR", "MODEL_FILE", "NOTICE_FILE", "REVISION_FILE", "bundled_dir"]

DATA_DIR = Path(__file__).resolve().parent / "data"
MODEL_FILE = "minilm-l6-v2-int8.onnx"
NOTICE_FILE = "NOTICE"
#: The first 12 hex digits of the SHA-256 of the quantized graph before its operators were
#: fused: the vector space's name (``int8-<digits>``), the same as before the graph was
#: stored fused, since the vectors are the same bit for bit.
REVISION_FILE = "minilm-l6-v2-int8.revision"
_REQUIRED = (MODEL_FILE, REVISION_FILE, "tokenizer.json", "config.json")


def bundled_dir() -> Path | None:
    """The shipped model's folder, or None when this installation lacks it."""
    if all((DATA_DIR / f).is_file() for f in _REQUIRED):
        return DATA_DIR
    return None
