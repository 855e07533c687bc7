"""Generate the sync facade from the async one: ``python scripts/unasync.py [--check]``.

The rewrite is deliberately small: ``async``/``await`` go away,
``arun`` becomes ``run``, ``Async``-prefixed names lose the prefix, and the async
context-manager methods become their sync forms.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [(ROOT / "src/memstrata/api/_async.py", ROOT / "src/memstrata/api/_sync.py")]

NAMES = {
    "arun": "run",
    "arun_pending": "run_pending",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
}
HEADER = '"""Generated from ``_async.py`` by ``scripts/unasync.py``: do not edit."""\n'


def _docstring_end(lines: list[str]) -> int:
    if not lines[0].startswith('"""'):
        return 0
    for i, line in enumerate(lines):
        if line.rstrip().endswith('"""') and (i > 0 or line.count('"""') == 2):
            return i + 1
    return 0


def render(src: Path) -> str:
    lines = src.read_text().splitlines(keepends=True)
    body = lines[_docstring_end(lines) :]
    text = "".join(body)
    text = re.sub(r"\bawait\s+", "", text)
    text = re.sub(r"\basync\s+(def|with|for)\b", r"\1", text)
    text = re.sub(
        r"\b(arun_pending|arun|__aenter__|__aexit__|aclose)\b", lambda m: NAMES[m.group(1)], text
    )
    text = re.sub(r"\bAsync([A-Z]\w*)", r"\1", text)
    return HEADER + text


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
