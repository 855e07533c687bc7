"""Relevance signals of ``mem.recall.search``'s candidates on development sets, for
fitting and checking a calibrated relevance (see ``scripts/relevance_fit.py``).

For every question it runs the current search (keyword and vector candidates fused by
``memstrata.recall.fusion``, the first ``--k``) and writes one JSON line per question:
its set, whether its answer lives in the searched scope (``own``), and per candidate the
signals a relevance judgement can use without a new model: cosine similarity to the
query (the default embedder), keyword coverage (the share of the query's idf mass the
message matches, scope-local), fused rank and score, length in tokens, and its label
(the message holds the answer / is an evidence turn).

Sets (each read from the path given, never copied):

- ``--natural FILE``: first-person statements over several conversations, each answered
  by a short acknowledgement; related questions (labels: the statements holding an
  answer string) and unrelated ones (no label anywhere).
- ``--locomo FILE``: LoCoMo conversations ingested turn by turn as ``bench locomo``
  does; each question is searched in its own conversation's scope (labels: its evidence
  turns) and, as "another user", in the next conversation's scope (no label).

Usage: ``python scripts/relevance_features.py --natural N.json --locomo L.json --out F.jsonl``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from memstrata import Memory, Scope
from memstrata.bench.locomo import append_turn
from memstrata.bench.locomo import load as load_locomo
from memstrata.config import Settings
from memstrata.recall.fusion import fuse
from memstrata.recall.keyed import MessageKey
from memstrata.recall.search import SEARCH_TERM_CAP, candidates_op
from memstrata.recall.service import RecallEngine
from memstrata.recall.text import document_text
from memstrata.storage.plan import read
from memstrata.types import Message

#: Acknowledgements that answer each statement (the set gives none of its own).
ACKS = ("Got it, I'll remember that.", "Noted!", "Thanks for telling me.", "Okay, noted.")


class Searcher:
    """The current search's first ``k`` candidates with their signals, in one scope."""

    def __init__(self, mem: Memory, k: int) -> None:
        self.mem, self.k = mem, k
        self.recall = mem.core.recall
        emb = self.recall.embedder
        if emb is None:
            raise SystemExit("the default embedder is needed: pip install 'memstrata[embed]'")
        self.emb = emb
        self._vec: dict[tuple[MessageKey, bool], np.ndarray] = {}
        self.checked: dict[Scope, int] = {}

    def settle(self, scope: Scope) -> None:
        """Embed what waits and write the waiting full-text rows (a public search does
        the latter first; the replica below reads the index as it stands)."""
        self.mem.recall.flush(scope)
        self.mem.recall.search(scope, "settle", k=1)

    def _vectors(self, messages: Sequence[Message], indexed: bool = True) -> list[np.ndarray]:
        """Each message's vector: of the text the index embeds (the speaker's name before
        the content), or with ``indexed=False`` of the content alone."""
        missing = [m for m in messages if ((m.conversation_id, m.id), indexed) not in self._vec]
        if missing:
            texts = [document_text(m) if indexed else m.content for m in missing]
            for m, v in zip(missing, self.emb.embed(texts), strict=True):
                self._vec[((m.conversation_id, m.id), indexed)] = np.asarray(v, dtype=np.float32)
        return [self._vec[((m.conversation_id, m.id), indexed)] for m in messages]

    def candidates(self, scope: Scope, query: str) -> list[dict[str, Any]]:
        info = RecallEngine.analyse(query)
        qvec = np.asarray(self.emb.embed([query])[0], dtype=np.float32)
        vectors = self.recall.vector_index()
        found = self.mem.core.engine.run(
            read(
                partial(
                    candidates_op,
                    self.recall.dialect,
                    vectors,
                    scope,
                    info,
                    qvec.tolist(),
                    # as mem.recall.search(k=50) asks: max(100, 5k) of each ranker
                    n=min(max(100, 5 * self.k), 1000),
                    conversation_id=None,
                    excluded=frozenset(),
                    rule=None,
                    cap=SEARCH_TERM_CAP,
                    fusion=self.recall.params,
                )
            )
        )
        ranked = fuse(found.candidates, temporal=info.temporal, params=self.recall.params)
        ranked = ranked[: self.k]
        if self.checked.get(scope, 0) < 3:  # the replica must rank as the public search does
            public = [h.message.id for h in self.mem.recall.search(scope, query, k=self.k)]
            if public != [c.id for c in ranked]:
                raise SystemExit(f"replica differs from mem.recall.search for {query!r}")
            self.checked[scope] = self.checked.get(scope, 0) + 1
        messages = [found.messages[(c.conversation_id, c.id)] for c in ranked]
        cosines = [float(v @ qvec) for v in self._vectors(messages)]
        plain = [float(v @ qvec) for v in self._vectors(messages, indexed=False)]
        return [
            {
                "id": m.id,
                "conversation": m.conversation_id,
                "rank": n,
                "fused": c.score,
                "cos": cos,
                "cos_content": content_cos,
                "cov": found.coverage.get((m.conversation_id, m.id), 0.0),
                "kw_rank": c.keyword_rank,
                "vec_rank": c.vector_rank,
                "tokens": self.mem.core.rt.tokenizer.count_text(m.content),
                "role": m.role.value,
                "text": m.content,
            }
            for n, (c, m, cos, content_cos) in enumerate(
                zip(ranked, messages, cosines, plain, strict=True), start=1
            )
        ]


def natural(path: Path, searcher: Searcher) -> Iterator[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    mem = searcher.mem
    scope = Scope("natural", f"user-{int(time.time() * 1000)}")
    n = 0
    for statements in data["memories"]:
        c = mem.conversations.create(scope)
        for text in statements:
            mem.messages.append(scope, c.id, role="user", content=text)
            mem.messages.append(scope, c.id, role="assistant", content=ACKS[n % len(ACKS)])
            n += 1
    searcher.settle(scope)
    asked = [(r["q"], r["a"]) for r in data["related"]] + [(q, None) for q in data["unrelated"]]
    for qn, (question, answer) in enumerate(asked):
        answers = [] if answer is None else [answer] if isinstance(answer, str) else answer
        cands = searcher.candidates(scope, question)
        for cand in cands:
            text = cand["text"].casefold()
            cand["label"] = int(any(a.casefold() in text for a in answers))
        yield {
            "set": "natural",
            "qid": f"natural-{qn}",
            "query": question,
            "own": answer is not None,
            "candidates": cands,
        }


def locomo(path: Path, searcher: Searcher, limit: int | None) -> Iterator[dict[str, Any]]:
    mem = searcher.mem
    convs = load_locomo(path)[:limit]
    scopes: list[Scope] = []
    dia: dict[tuple[str, str], str] = {}  # (conversation, message id) -> dia id
    for conv in convs:
        scope = Scope("locomo", f"{conv.sample_id}-{int(time.time() * 1000)}")
        c = mem.conversations.create(scope, title=conv.sample_id)
        for t in conv.turns:
            msg = append_turn(mem, scope, c.id, t)
            dia[(c.id, msg.id)] = f"{conv.sample_id}/{t.dia_id}"
        searcher.settle(scope)
        scopes.append(scope)
        print(f"  {conv.sample_id}: {len(conv.turns)} turns", file=sys.stderr)
    for ci, conv in enumerate(convs):
        other = scopes[(ci + 1) % len(scopes)]
        for qn, q in enumerate(conv.questions):
            evidence = {f"{conv.sample_id}/{e}" for e in q.evidence}
            for own, scope in ((True, scopes[ci]), (False, other)):
                cands = searcher.candidates(scope, q.text)
                for cand in cands:
                    turn = dia.get((cand["conversation"], cand["id"]))
                    cand["label"] = int(own and turn in evidence)
                    cand["dia"] = turn
                yield {
                    "set": "locomo",
                    "qid": f"{conv.sample_id}-{qn}",
                    "query": q.text,
                    "category": q.category,
                    "evidence": sorted(evidence),
                    "own": own,
                    "candidates": cands,
                }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--natural", type=Path, required=True)
    ap.add_argument("--locomo", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one per question")
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--limit-conversations", type=int, default=None)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), worker="off", recall_embed="search")
        mem = Memory.open(f"sqlite:///{Path(tmp) / 'rel.db'}", settings=settings)
        try:
            searcher = Searcher(mem, args.k)
            with args.out.open("w", encoding="utf-8") as out:
                rows = 0
                for source in (
                    natural(args.natural, searcher),
                    locomo(args.locomo, searcher, args.limit_conversations),
                ):
                    for row in source:
                        out.write(json.dumps(row) + "\n")
                        rows += 1
        finally:
            mem.close()
    took = time.perf_counter() - start
    print(f"{rows} questions in {took:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
