"""Token counting with no network.

The o200k_base and cl100k_base BPE tables ship inside this package (``tokens_data/``,
xz-compressed, checked against the published SHA-256 of each table), and tiktoken
is handed them directly, so it never looks for its download cache or the
network. Models we cannot map fall back to a character estimate.

One counting rule serves history, context reports and benchmarks::

    tokens(message) = tokens(content) + tokens(tool calls) + tokens(files) + 4

A file counts as what the model is sent for it. An image is priced by OpenAI's
published vision rule: ``detail="low"`` is 85 tokens; ``high`` (the default, as in
Dify) and ``auto`` are 85 + 170 per 512-pixel tile once the image is scaled to fit
2048 x 2048 and then its shortest side to 768 — with the size unknown, a 1024 x 1024
image is assumed (765 tokens). Any other file is rendered as a text placeholder
(``[document: report.pdf]``) and counts as that text.
"""

from __future__ import annotations

import hashlib
import lzma
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Protocol

from memstrata.errors import Corruption, InvalidInput

if TYPE_CHECKING:
    import tiktoken

    from memstrata.types import FileRef, ToolCall

__all__ = [
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD",
    "Encoding",
    "Tokenizer",
    "encoding_for_model",
    "estimate_tokens",
    "get_tokenizer",
    "image_tokens",
]

DEFAULT_ENCODING = "o200k_base"
MESSAGE_OVERHEAD = 4
ESTIMATE = "estimate"

# SHA-256 of the plain-text tables as published with tiktoken.
_TABLES = {
    "o200k_base": (
        "o200k_base.tiktoken.xz",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "cl100k_base.tiktoken.xz",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

_PATTERNS = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}

_SPECIALS = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}

# Longest prefix wins; names are matched lowercased with any "org/" prefix removed.
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def encoding_for_model(model: str | None) -> str:
    """Map a model name to an encoding name; unknown models get ``"estimate"``.

    ``None`` gives the default encoding; an encoding name maps to itself.
    """
    if model is None:
        return DEFAULT_ENCODING
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name in _TABLES or name == ESTIMATE:
        return name
    best = ""
    found = ESTIMATE
    for prefix, enc in _MODEL_PREFIXES:
        if (name == prefix or name.startswith((prefix + "-", prefix + ".", prefix + ":"))) and len(
            prefix
        ) > len(best):
            best, found = prefix, enc
    return found


IMAGE_BASE_TOKENS = 85
IMAGE_TILE_TOKENS = 170
#: The size assumed for an image whose size is not known.
DEFAULT_IMAGE_SIZE = (1024, 1024)


def image_tokens(
    detail: str | None = "high", width: int | None = None, height: int | None = None
) -> int:
    """What an image costs a model (OpenAI's vision pricing, see the module docstring)."""
    if detail == "low":
        return IMAGE_BASE_TOKENS
    size = (width, height) if width and height else DEFAULT_IMAGE_SIZE
    w, h = float(size[0]), float(size[1])
    scale = min(1.0, 2048 / max(w, h))  # fit within 2048 x 2048
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))  # then the shortest side to 768
    w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * tiles


def estimate_tokens(text: str) -> int:
    """Character estimate: CJK characters count 1/2 token each, others 1/4."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    other = len(text) - cjk
    return (other + 3) // 4 + (cjk + 1) // 2


class Encoding(Protocol):
    """What a tokenizer needs from an encoding: the number of tokens in a text."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class _Estimate:
    name: str = ESTIMATE

    def count(self, text: str) -> int:
        return estimate_tokens(text)


class _Bpe:
    def __init__(self, name: str, enc: tiktoken.Encoding) -> None:
        self.name = name
        self._enc = enc

    def count(self, text: str) -> int:
        if not text:
            return 0
        # Special-token text inside a message is content, not a control token.
        return len(self._enc.encode_ordinary(text))


_load_lock = threading.Lock()
_encodings: dict[str, Encoding] = {}


def _read_table(name: str) -> dict[bytes, int]:
    import base64

    filename, expected = _TABLES[name]
    raw = lzma.decompress(
        resources.files("memstrata").joinpath("tokens_data", filename).read_bytes()
    )
    if hashlib.sha256(raw).hexdigest() != expected:
        raise Corruption(f"bundled token table {filename} fails its checksum; reinstall memstrata")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _load(name: str) -> Encoding:
    if name == ESTIMATE:
        return _Estimate()
    if name not in _TABLES:
        raise InvalidInput(f"unknown encoding {name!r}", field="model")
    import tiktoken

    enc = tiktoken.Encoding(
        name=f"memstrata-{name}",
        pat_str=_PATTERNS[name],
        mergeable_ranks=_read_table(name),
        special_tokens=_SPECIALS[name],
    )
    return _Bpe(name, enc)


def get_encoding(name: str) -> Encoding:
    """Return the (process-wide, lazily loaded) encoding called ``name``."""
    enc = _encodings.get(name)
    if enc is None:
        with _load_lock:
            enc = _encodings.get(name)
            if enc is None:
                enc = _encodings[name] = _load(name)
    return enc


class Tokenizer:
    """Counts message tokens in one encoding, caching counts per text.

    The cache is an LRU bounded by ``cache_size`` entries, keyed by the text
    itself, so the same message content is tokenized once per encoding.
    """

    def __init__(self, encoding: Encoding, cache_size: int = 50_000) -> None:
        self.encoding = encoding
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.encoding.name

    def count_text(self, text: str) -> int:
        if len(text) < 16:  # short texts are cheaper to count than to cache
            return self.encoding.count(text)
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        n = self.encoding.count(text)
        with self._lock:
            self._cache[text] = n
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return n

    def count_message(
        self, content: str, tool_calls: Sequence[ToolCall] = (), files: Sequence[FileRef] = ()
    ) -> int:
        """The shared rule: content + each tool call's name and arguments + each file + 4."""
        n = self.count_text(content) + MESSAGE_OVERHEAD
        for call in tool_calls:
            n += self.count_text(call.function.name) + self.count_text(call.function.arguments)
        for ref in files:
            n += self.count_file(ref)
        return n

    def count_file(self, ref: FileRef) -> int:
        """An image by the vision rule; any other file as its text placeholder."""
        if ref.type == "image":
            return image_tokens(ref.detail, ref.width, ref.height)
        from memstrata.types import file_placeholder

        return self.count_text(file_placeholder(ref))


_tokenizers: dict[str, Tokenizer] = {}


def get_tokenizer(model: str | None = None) -> Tokenizer:
    """The shared tokenizer for ``model`` (an OpenAI model name or an encoding name)."""
    name = encoding_for_model(model)
    tok = _tokenizers.get(name)
    if tok is None:
        tok = _tokenizers.setdefault(name, Tokenizer(get_encoding(name)))
    return tok
