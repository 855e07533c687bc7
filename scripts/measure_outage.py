"""Measure how `memstrata serve` on PostgreSQL answers an outage (issue 28, N2).

    python scripts/measure_outage.py [--db postgresql://postgres@127.0.0.1:5432/test] [--rounds 5]

The server's database connection runs through a local TCP proxy
(``memstrata.testing.tcpproxy``) on a fresh schema; each round cuts it (every open
connection dropped, new ones closed at once), then measures:

- ``readyz_outage_s``: how long ``GET /readyz`` takes to answer 503, and
  ``request_outage_s``: an authenticated ``GET /v1/conversations`` (503);
- ``recovery_s``: from restoring the line to the first ``POST .../messages`` answered
  201 (polled every 50 ms, after a /readyz of its own, as a load balancer would);
- ``sigterm_s`` (last round): from SIGTERM during an outage to the process's exit.

Prints one JSON object: every sample and their maxima. The schema is dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg

from memstrata.testing.tcpproxy import CuttableProxy

CLI = (sys.executable, "-m", "memstrata.cli")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(call) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    status = call().status_code
    return time.perf_counter() - start, status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--outage-s", type=float, default=3.0, help="how long each cut lasts")
    args = ap.parse_args()

    target = urlsplit(args.db)
    schema = f"outage_{secrets.token_hex(4)}"
    with psycopg.connect(args.db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    home = Path(tempfile.mkdtemp(prefix="memstrata-outage-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    env |= {"MEMSTRATA_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    proc = None
    try:
        with CuttableProxy(target.hostname or "127.0.0.1", target.port or 5432) as proxy:
            netloc = target.netloc.replace(
                f"{target.hostname}:{target.port or 5432}", f"127.0.0.1:{proxy.port}"
            )
            sep = "&" if target.query else "?"
            url = target._replace(netloc=netloc).geturl() + f"{sep}options=-csearch_path%3D{schema}"
            key = subprocess.run(
                [*CLI, "keys", "create", "--tenant", "bench", "--user", "u", "--db", url],
                capture_output=True, text=True, check=True, env=env,
            ).stdout.strip()  # fmt: skip
            port = _free_port()
            log = (home / "serve.log").open("w")
            proc = subprocess.Popen(
                [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--db", url],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
            h = {"Authorization": f"Bearer {key}"}
            samples: dict[str, list[float]] = {
                "readyz_outage_s": [], "request_outage_s": [], "recovery_s": []
            }  # fmt: skip
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", timeout=120, trust_env=False
            ) as c:
                for _ in range(600):
                    try:
                        if c.get("/readyz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.1)
                cid = c.post("/v1/conversations", json={}, headers=h).json()["id"]
                append = f"/v1/conversations/{cid}/messages"
                for _ in range(args.rounds):
                    proxy.cut()
                    took, status = _timed(lambda: c.get("/readyz"))
                    assert status == 503, status
                    samples["readyz_outage_s"].append(round(took, 4))
                    took, status = _timed(lambda: c.get("/v1/conversations", headers=h))
                    assert status == 503, status
                    samples["request_outage_s"].append(round(took, 4))
                    time.sleep(args.outage_s)
                    proxy.restore()
                    back = time.perf_counter()
                    while True:
                        c.get("/readyz")
                        r = c.post(append, json={"role": "user", "content": "back"}, headers=h)
                        if r.status_code == 201:
                            break
                        time.sleep(0.05)
                    samples["recovery_s"].append(round(time.perf_counter() - back, 4))
                proxy.cut()
                assert c.get("/readyz").status_code == 503
                start = time.perf_counter()
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
                sigterm = round(time.perf_counter() - start, 4)
            out = {
                "samples": samples,
                "max": {k: max(v) for k, v in samples.items()},
                "sigterm_s": sigterm,
            }
            print(json.dumps(out, indent=2))
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        with psycopg.connect(args.db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
