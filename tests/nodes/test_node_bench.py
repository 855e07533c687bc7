"""``memstrata bench nodes`` at tiny sizes: the envelope, both layouts, bytes counted."""

from __future__ import annotations

import json

from memstrata.bench import run_bench


def test_bench_nodes_smoke(tmp_path, monkeypatch):
    from memstrata.bench import nodes

    monkeypatch.setattr(nodes, "REPEATS", 3)
    out = tmp_path / "nodes.json"
    result = run_bench("nodes", out=out, sizes=[3, 40])
    doc = json.loads(out.read_text())
    assert doc == json.loads(json.dumps(result))
    assert set(doc) == {"name", "machine", "params", "headline", "rows", "baselines"}
    assert doc["name"] == "nodes"
    mine = doc["rows"]
    base = doc["baselines"]["whole-json rewrite"]
    stores = {r["store"] for r in mine}
    assert "file" in stores
    assert {(r["store"], r["turns"]) for r in mine} == {(r["store"], r["turns"]) for r in base}
    for r in mine:
        assert r["add_flush_bytes_read"] == 0  # a flush only writes
        assert r["add_flush_bytes_written"] > 0
        assert r["message_delete_ms"] > 0  # a deletion erasing its node turn, verified
        assert r["history_after_delete_p50_ms"] > 0
        assert r["message_delete_chunked_ms"] > 0  # the same, in a memory compacted as it grew
    # The whole-file design reads and rewrites everything: its bytes grow with the history.
    by = {(r["store"], r["turns"]): r for r in base}
    assert (
        by[("file", 40)]["add_flush_bytes_written"] > 5 * by[("file", 3)]["add_flush_bytes_written"]
    )
    own = {(r["store"], r["turns"]): r for r in mine}
    assert (
        own[("file", 40)]["add_flush_bytes_written"]
        < 2 * own[("file", 3)]["add_flush_bytes_written"]
    )
