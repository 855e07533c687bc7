"""The documented doors, run as written: the install and quick-start commands of README.md,
docs/typescript.md and docs/integrations.md, extracted from the pages themselves and run in
a fresh copy of the repository (its tracked files, as a clone has them), a fresh virtual
environment and a fresh npm project.

What is not taken verbatim, and why: the port (the server listens where MEMSTRATA_PORT
says, so a busy 8700 on the test machine cannot fail the run; the pages' ``8700`` is read as
that port), the key (``KEY=msk_...`` is the key the first start printed), the path of the
TypeScript package (``npm install /path/to/...`` installs the tarball ``npm pack`` made, in
an empty project) and ``memstrata`` in ``pip install 'memstrata[...]'`` (the copy, not
PyPI). ``make test`` is this suite. Installs come from the machine's pip and npm caches
(``prefer-offline``): nothing here needs the network when they are warm.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support import SERVER_WAIT_SECONDS, free_port

ROOT = Path(__file__).resolve().parent.parent
STEP_TIMEOUT_S = 900

pytestmark = [pytest.mark.slow, pytest.mark.server]


def section(page: str, heading: str) -> str:
    """The text under ``## heading`` (or ``### heading``) of a page, to the next heading
    of that level."""
    text = (ROOT / page).read_text(encoding="utf-8")
    match = re.search(rf"^(#+) {re.escape(heading)}\n(.*?)(?=^\1 |\Z)", text, re.S | re.M)
    assert match, f"{page} has no section {heading!r}"
    return match.group(2)


def blocks(page: str, heading: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(page, heading), re.S)


def commands(block: str) -> list[str]:
    """The commands of a shell block: comments and blank lines left out, continuations joined."""
    joined = block.replace("\\\n", " ")
    lines = (line.split("#", 1)[0].strip() for line in joined.splitlines())
    return [line for line in lines if line]


def sh(command: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-ec", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, (
        f"{command!r} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTRATA_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix)
    )
    env |= {"npm_config_prefer_offline": "true", "npm_config_audit": "false"}
    env |= {"npm_config_fund": "false", "npm_config_update_notifier": "false"}
    return env | {"PYTHONUNBUFFERED": "1"} | extra


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's tracked files in a fresh directory: what a clone holds."""
    target = tmp_path_factory.mktemp("clone") / "memstrata"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def served(clone: Path) -> Iterator[tuple[str, str]]:
    """README's quick start: ``make run`` in the fresh copy. Yields (base URL, the key the
    first start printed)."""
    (run,) = [c for c in commands(blocks("README.md", "Quick start", "bash")[0]) if "run" in c]
    assert run == "make run"
    port = free_port()
    log = clone / "make-run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-ec", run],
            cwd=clone,
            env=clean_env(MEMSTRATA_PORT=str(port)),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # make and the server it starts: one group to stop
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STEP_TIMEOUT_S + SERVER_WAIT_SECONDS
        ready = False
        with httpx.Client(base_url=base, trust_env=False, timeout=5) as c:
            while not ready and proc.poll() is None and time.monotonic() < deadline:
                try:
                    ready = c.get("/readyz").status_code == 200
                except httpx.TransportError:
                    time.sleep(0.5)
        output = log.read_text()
        assert ready, f"make run did not serve:\n{output[-4000:]}"
        assert f"on http://127.0.0.1:{port}" in output  # the address actually bound
        key = re.search(r"^\s+(msk_\S+)$", output, re.M)
        assert key, output
        yield base, key.group(1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def at_port(text: str, base: str) -> str:
    port = base.rsplit(":", 1)[1]
    return text.replace(":8700", f":{port}")


def test_readme_quick_start_runs_as_written(served: tuple[str, str], clone: Path) -> None:
    base, key = served
    block = blocks("README.md", "Quick start", "bash")[1]
    script = "\n".join(
        f"KEY={key}" if c.startswith("KEY=") else at_port(c, base) for c in commands(block)
    )
    made = json.loads(sh(script, clone, clean_env()))
    assert made["title"] == "first"


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs node and npm")
def test_typescript_install_and_quick_start_run_as_written(
    served: tuple[str, str], clone: Path, tmp_path: Path
) -> None:
    base, key = served
    build, install = commands(blocks("docs/typescript.md", "Install", "bash")[0])
    assert build == "cd clients/typescript && npm ci && npm run build"
    sh(build, clone, clean_env())  # no build tools needed: no install scripts run
    package = clone / "clients" / "typescript"
    assert (package / "dist" / "index.d.ts").is_file()
    # "npm install <the package>" in a project of one's own: the packed tarball, so only
    # what the package publishes is there.
    assert install.startswith("npm install ")
    tarball = sh("npm pack --silent", package, clean_env()).strip().splitlines()[-1]
    project = tmp_path / "app"
    project.mkdir()
    sh("npm init -y >/dev/null", project, clean_env())
    sh(f"npm install {package / tarball}", project, clean_env())
    (code,) = blocks("docs/typescript.md", "Quick start", "ts")
    (project / "quick.mts").write_text(at_port(code, base))
    tsc = package / "node_modules" / "typescript" / "bin" / "tsc"
    types = package / "node_modules" / "@types"
    sh(
        f"node {tsc} --strict --module nodenext --target es2022 --skipLibCheck "
        f"--typeRoots {types} --types node quick.mts",
        project,
        clean_env(),
    )
    out = sh("node quick.mjs", project, clean_env(MEMSTRATA_KEY=key))
    assert "user My order is late." in out
    assert "assistant Sorry! Which order?" in out


def test_langchain_install_and_example_run_as_written(clone: Path, tmp_path: Path) -> None:
    body = section("docs/integrations.md", "LangChain")
    installs = re.findall(r"`(pip install '[^`]+')`", body)
    assert installs == ["pip install 'memstrata[langchain]'"]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{clean_env()['PATH']}")
    sh(installs[0].replace("'memstrata[", f"'{clone}["), tmp_path, env)
    (code,) = re.findall(r"```python\n(.*?)```", body, re.S)[:1]
    (tmp_path / "example.py").write_text(code)
    out = sh("python example.py", tmp_path, env)
    assert "agent: Your name is Ada." in out
