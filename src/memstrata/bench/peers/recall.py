"""The recall side of ``memstrata bench peers``: LoCoMo evidence retrieval through
memstrata and through mem0 OSS with ``infer=False``, with the same embedder.

Both ingest every turn as one memory of its conversation's own scope, then
search each question for 50 items and are scored by :func:`locomo.score_question`.

mem0 is configured as its documentation shows for a local setup (Qdrant in local
mode on disk, its SQLite history) with two changes, both to run it offline and on
equal terms: its embedder is memstrata's MiniLM (mem0 only accepts its listed
providers, so the adapter replaces ``Memory.embedding_model`` after construction),
and its LLM is never called (``infer=False``; a placeholder key satisfies its
constructor). memstrata stores the turn text with the speaker in metadata and indexes
"speaker: text"; mem0 embeds a memory's content only, so it is given that same
"speaker: text" as content. mem0's hybrid search adds BM25 (fastembed's ``Qdrant/bm25``, fetched
from the Hugging Face hub) and entity boosts (spaCy's ``en_core_web_sm``, fetched
from GitHub) when those are available; neither can be fetched here, so it runs
vector-only, as mem0 itself does when they are missing.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstrata.bench import locomo
from memstrata.bench.report import percentile

__all__ = ["run_mem0", "run_memstrata"]

K = 50
SCORE_THRESHOLD = 0.0  # mem0 drops results under 0.1 by default; keep all 50 for scoring


def _headline(
    agg: dict[str, dict[str, float]], search_ms: list[float], ingest: float
) -> dict[str, Any]:
    head = agg["cats1-4"]
    return {
        **{f"turn_recall@{k}": round(head[f"turn_recall@{k}"], 4) for k in (1, 5, 10, 20, 50)},
        "turn_all@10": round(head["turn_all@10"], 4),
        "ndcg@10": round(head["ndcg@10"], 4),
        "search_p50_ms": round(percentile(search_ms, 50), 2),
        "search_p95_ms": round(percentile(search_ms, 95), 2),
        "ingest_turns_per_s": round(ingest, 1),
    }


def run_memstrata(
    data: Path, progress: Callable[[str], None], limit_conversations: int | None = None
) -> dict[str, Any]:
    result = locomo.run(
        data=data, progress=progress, baselines=False, limit_conversations=limit_conversations
    )
    return {
        "headline": result["headline"],
        "rows": result["rows"],
        "embedder": result["params"]["embedder"],
        "questions": result["params"]["questions"],
    }


class _Embedder:
    """mem0's embedder interface over memstrata's MiniLM."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return [float(x) for x in self.inner.embed([text])[0]]

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        return [[float(x) for x in v] for v in self.inner.embed(texts)]


def _mem0(home: Path, dims: int) -> Any:
    from mem0 import Memory as Mem0

    config = {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "path": str(home / "qdrant"),
                "collection_name": "locomo",
                "embedding_model_dims": dims,
                "on_disk": True,
            },
        },
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": dims}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": str(home / "history.db"),
    }
    return Mem0.from_config(config)


def run_mem0(
    data: Path, progress: Callable[[str], None], limit_conversations: int | None = None
) -> dict[str, Any]:
    from memstrata.embeddings.minilm import MiniLMEmbedder
    from memstrata.tokens import get_tokenizer

    convs = locomo.load(data)[:limit_conversations]
    tokenizer = get_tokenizer("o200k_base")
    minilm = MiniLMEmbedder()
    per_q: list[tuple[locomo.Question, dict[str, float]]] = []
    search_ms: list[float] = []
    ingest_s = 0.0
    n_turns = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MEM0_DIR"] = str(Path(tmp) / "mem0")
        mem = _mem0(Path(tmp), minilm.dim)
        mem.embedding_model = _Embedder(minilm)
        for conv in convs:
            user = f"{conv.sample_id}-{int(time.time() * 1000)}"
            start = time.perf_counter()
            for t in conv.turns:
                # The text memstrata indexes for this turn (speaker, then text): mem0 embeds
                # content only, and the questions name the speakers.
                mem.add(
                    [{"role": "user", "content": f"{t.speaker}: {t.text}"}],
                    user_id=user,
                    metadata={"dia_id": t.dia_id, "session": t.session},
                    infer=False,
                )
            ingest_s += time.perf_counter() - start
            n_turns += len(conv.turns)
            tokens_of = {
                t.dia_id: tokenizer.count_text(f"{t.speaker}: {t.text}") for t in conv.turns
            }
            progress(
                f"mem0 {conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions"
            )
            for q in conv.questions:
                t0 = time.perf_counter()
                found = mem.search(
                    q.text, filters={"user_id": user}, top_k=K, threshold=SCORE_THRESHOLD
                )
                search_ms.append((time.perf_counter() - t0) * 1000)
                items = []
                for hit in found["results"]:
                    dia = (hit.get("metadata") or {}).get("dia_id")
                    items.append(([dia], tokens_of.get(dia, 0)) if dia else ([], 0))
                per_q.append((q, locomo.score_question(items, q.evidence)))
    agg = locomo.aggregate(per_q)
    return {
        "headline": _headline(agg, search_ms, n_turns / ingest_s),
        "rows": locomo.rows("mem0", agg),
        "embedder": minilm.identity,
        "questions": len(per_q),
    }
