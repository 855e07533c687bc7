"""Each framework's documented example runs after its documented install: every module
the example in docs/integrations.md imports comes with ``memstrata[<extra>]``."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _extra(name: str) -> set[str]:
    """The distributions ``memstrata[name]`` installs (its extras followed, and theirs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["optional-dependencies"][name]]
    todo += [Requirement(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        dist = canonicalize_name(req.name)
        if dist in seen:
            continue
        seen.add(dist)
        try:
            found = requires(req.name) or []
        except PackageNotFoundError:
            continue
        for text in found:
            dep = Requirement(text)
            extras = dep.marker is not None and "extra" in str(dep.marker)
            if not extras or any(dep.marker.evaluate({"extra": e}) for e in req.extras):  # type: ignore[union-attr]
                todo.append(dep)
    return seen


def _example_imports(section: str) -> set[str]:
    """Top-level modules imported by the first Python block after ``## section``."""
    text = (ROOT / "docs" / "integrations.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1]
    code = re.search(r"```python\n(.*?)```", body, re.S)
    assert code is not None
    tree = ast.parse(code.group(1))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {
        n.module
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and not n.level
    }
    return {n.split(".")[0] for n in names} - {"__future__", "warnings", "typing", "memstrata"}


def test_the_langchain_extra_brings_what_its_example_imports():
    assert "pip install 'memstrata[langchain]'" in (ROOT / "docs" / "integrations.md").read_text()
    installed = _extra("langchain")
    owners = packages_distributions()
    imported = _example_imports("LangChain")
    assert {"langchain", "langchain_core"} <= imported
    for module in imported:
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        assert dists & installed, f"{module} comes with none of memstrata[langchain]"
