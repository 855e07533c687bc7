"""Generate the sync facade from the async one: ``python scripts/unasync.py [--check]``.

Every ``src/memstrata/**/_async*.py`` becomes the ``_sync*.py`` beside it. The
rewrite is deliberately small: ``async``/``await`` go away, the names in ``NAMES``
(``arun`` → ``run``, ...) are renamed, ``Async``-prefixed names lose the prefix,
``_async*`` module names become ``_sync*``, and the async context-manager methods
become their sync forms; lines between ``# unasync: async-only`` and ``# unasync: end``
are left out, and so is a line ending in ``# unasync: async-only line``. Add a name
to ``NAMES`` when an async method's sync twin has another name.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [
    (src, src.with_name(src.name.replace("_async", "_sync", 1)))
    for src in sorted((ROOT / "src/memstrata").rglob("_async*.py"))
]

NAMES = {
    "arun": "run",
    "arun_pending": "run_pending",
    "acheck": "check",
    "amigrate": "migrate",
    "aschema_version": "schema_version",
    "acomplete": "complete",
    "aembed": "embed",
    "avector_index": "vector_index",
    "ajob_queued": "job_queued",
    "aflush_usage": "flush_usage",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
    "aget": "get",
    "aput": "put",
    "alist_prefix": "list_prefix",
    "aerase": "erase",
}


def _docstring_end(lines: list[str]) -> int:
    if not lines[0].startswith('"""'):
        return 0
    for i, line in enumerate(lines):
        if line.rstrip().endswith('"""') and (i > 0 or line.count('"""') == 2):
            return i + 1
    return 0


def render(src: Path) -> str:
    header = f'"""Generated from ``{src.name}`` by ``scripts/unasync.py``: do not edit."""\n'
    lines = src.read_text().splitlines(keepends=True)
    body = lines[_docstring_end(lines) :]
    text = "".join(body)
    # Code only the async facade has (e.g. ``__await__``) sits between these markers.
    text = re.sub(r"\n *# unasync: async-only\n.*?# unasync: end\n", "\n", text, flags=re.S)
    # A single line only the async code needs (an import its async-only code uses).
    text = re.sub(r"^.*# unasync: async-only line\n", "", text, flags=re.M)
    text = re.sub(r"\bawait\s+", "", text)
    text = re.sub(r"\basync\s+(def|with|for)\b", r"\1", text)
    names = "|".join(sorted(map(re.escape, NAMES), key=len, reverse=True))
    text = re.sub(rf"\b({names})\b", lambda m: NAMES[m.group(1)], text)
    text = re.sub(r"\b_async(\w*)\b", r"_sync\1", text)
    text = re.sub(r"\bAsync([A-Z]\w*)", r"\1", text)
    return header + text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for src, dst in PAIRS:
        want = render(src)
        if check:
            if not dst.exists() or dst.read_text() != want:
                stale.append(dst)
        else:
            dst.write_text(want)
    for path in stale:
        print(f"{path.relative_to(ROOT)} is stale: run python scripts/unasync.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
