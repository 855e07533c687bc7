"""The TypeScript client (clients/typescript) against a live ``memstrata serve``.

One server on a SQLite file, three keys (two users of one tenant, and the tenant's admin);
``npm test`` runs the package's node:test suite with the URL and keys in its environment.
The package must be installed (``make typescript`` runs ``npm ci`` and the build); without
node the test skips, and in CI (where ``make`` installs node) that skip is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import CLI, memstrata_serve, server_env

PACKAGE = Path(__file__).resolve().parent.parent / "clients" / "typescript"
SUITE_TIMEOUT_S = 300


def _key(db: str, env: dict[str, str], *who: str) -> str:
    out = subprocess.run(
        [*CLI, "keys", "create", "--db", db, "--init", "--tenant", "ts", *who],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs node and npm for the server test")
def test_typescript_suite_against_a_live_server(tmp_path: Path) -> None:
    if not (PACKAGE / "node_modules").is_dir() or not (PACKAGE / "dist" / "index.js").is_file():
        subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=PACKAGE, check=True
        )
        subprocess.run(["npm", "run", "build"], cwd=PACKAGE, check=True)
    db = f"sqlite:///{tmp_path / 'ts.db'}"
    env = server_env(home=str(tmp_path / "home"), log_level="WARNING")
    keys = {
        "MEMSTRATA_KEY_A": _key(db, env, "--user", "alice"),
        "MEMSTRATA_KEY_B": _key(db, env, "--user", "bob"),
        "MEMSTRATA_ADMIN_KEY": _key(db, env, "--admin"),
    }
    with memstrata_serve(db, env, tmp_path / "serve.log", 60) as (_proc, base):
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
        result = subprocess.run(
            ["npm", "test", "--silent"],
            cwd=PACKAGE,
            env=run_env | keys | {"MEMSTRATA_URL": base},
            capture_output=True,
            text=True,
            timeout=SUITE_TIMEOUT_S,
        )
    report = result.stdout[-20000:] + result.stderr[-5000:]
    assert result.returncode == 0, report
    assert "# fail 0" in result.stdout, report
    # Every scenario runs: a skip means a route an adapter needs is missing from the server.
    assert "# skipped 0" in result.stdout, report
