"""An S3 outage: a flush fails with BackendUnavailable, keeps its buffer, and succeeds
once the store is back."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope
from memstrata.errors import BackendUnavailable

from .conftest import start_moto

S = Scope("t1", "alice")


def test_s3_outage_keeps_the_buffer_for_a_later_flush(tmp_path):
    server = start_moto()  # its own server: this test stops it
    port = int(server.endpoint.rsplit(":", 1)[1])
    bucket = server.bucket()
    settings = server.settings(home=tmp_path, worker="off", blob_retries=0, blob_timeout_s=3.0)
    mem = Memory.open(
        f"sqlite:///{(tmp_path / 'f.db').as_posix()}", blobs=f"s3://{bucket}/x", settings=settings
    )
    try:
        cid = mem.conversations.create(S).id
        node = mem.nodes.open(S, "app", cid, "n")
        node.add_turn("m1", None, "before the outage")
        node.flush()
        server.stop()
        node.add_turn("m2", "m1", "during the outage")
        with pytest.raises(BackendUnavailable):
            node.flush()
        assert [t.message_id for t in node.pending] == ["m2"]
        with pytest.raises(BackendUnavailable):
            mem.nodes.history(S, "app", cid, "n")
        # The store comes back (moto keeps nothing: make the bucket again) and the flush works.
        server = start_moto(port)
        import urllib.request

        urllib.request.urlopen(
            urllib.request.Request(f"{server.endpoint}/{bucket}", method="PUT"), timeout=10
        ).close()
        assert node.flush() == 1
        assert node.pending == []
        # (moto lost m1's object with its state; a real store keeps it.)
        h = mem.nodes.history(S, "app", cid, "n", current_message_id="m2")
        assert [m.content for m in h.messages] == ["during the outage"]
    finally:
        mem.close()
        if server.process.poll() is None:
            server.stop()
