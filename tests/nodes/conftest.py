"""Blob stores for the node memory tests: memory, local files and a real S3-compatible
server (moto, started once per test session as its own process on 127.0.0.1)."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.backends.registry import open_blob_store
from memstrata.blobs import BlobStore
from memstrata.config import Settings
from support import free_port

NEEDS_MOTO = "needs an S3 server (moto): pip install 'moto[s3]' flask"


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen[bytes]

    def bucket(self) -> str:
        name = f"b{secrets.token_hex(6)}"
        req = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(req, timeout=10).close()
        return name

    def settings(self, **extra: object) -> Settings:
        return Settings(
            s3_endpoint=self.endpoint,
            s3_access_key_id="test",
            s3_secret_access_key="test",
            s3_region="us-east-1",
            **extra,  # type: ignore[arg-type]
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def start_moto(port: int | None = None) -> S3Server:
    try:
        import flask  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        pytest.skip(NEEDS_MOTO)
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.skip(f"{NEEDS_MOTO} (the moto server did not start)")
            time.sleep(0.05)
    return S3Server(f"http://127.0.0.1:{port}", proc)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = start_moto()
    yield server
    server.stop()


STORES = ["memory", "file", "s3"]


def store_url(kind: str, tmp: Path, request: pytest.FixtureRequest) -> tuple[str, Settings]:
    if kind == "memory":
        return "memory://", Settings(home=tmp, worker="off")
    if kind == "file":
        return f"file://{(tmp / 'blobs').as_posix()}", Settings(home=tmp, worker="off")
    server: S3Server = request.getfixturevalue("s3_server")
    return f"s3://{server.bucket()}/pre", server.settings(home=tmp, worker="off")


@pytest.fixture(params=STORES)
def blob_store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    url, settings = store_url(request.param, tmp_path, request)
    return open_blob_store(url, settings)


@pytest.fixture(params=STORES)
def node_mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A memory on a SQLite file with its blobs on each store in turn."""
    url, settings = store_url(request.param, tmp_path, request)
    mem = Memory.open(f"sqlite:///{(tmp_path / 'm.db').as_posix()}", blobs=url, settings=settings)
    yield mem
    mem.close()
