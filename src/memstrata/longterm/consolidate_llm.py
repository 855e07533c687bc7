"""What the model is asked when it plans a consolidation, and how its answer is read.

The prompt shows the active facts under short aliases (``f1``, ``f2``, ...) and the
candidates the deterministic checks found; the model answers one JSON object::

    {"merges": [{"facts": ["f1", "f4"], "content": "...", "category": "...", "reason": "..."}],
     "supersede": [{"old": ["f2"], "by": "f7", "reason": "..."}]}

The parser is lenient (code fences, prose around the object, a single alias for a
list, ``supersedes`` for ``supersede``); what it cannot read becomes a note, and
:func:`memstrata.longterm.consolidate.validate` applies the plan rules afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memstrata.longterm.consolidate import Proposal, ProposedChange
from memstrata.longterm.model import Fact

__all__ = ["ConsolidationParseError", "build_messages", "parse_proposal"]

_SYSTEM = """You maintain a user's long-term memory: a list of facts about the user.
Clean it without losing information:
- merge facts that say the same thing into one fact whose content keeps every detail;
- when two facts contradict each other, the newer one (higher alias number is newer)
  usually replaces the older; only say so when the contradiction is real.
Never invent information. Leave facts alone when unsure.
Answer with one JSON object and nothing else:
{"merges": [{"facts": ["f1", "f2"], "content": "merged fact", "category": "<category>", "reason": "why"}],
 "supersede": [{"old": ["f3"], "by": "f5", "reason": "why"}]}
Use empty lists when nothing should change."""


class ConsolidationParseError(ValueError):
    """The model's answer holds no usable JSON object."""


def build_messages(
    facts: Sequence[Fact], aliases: Sequence[str], hints: Sequence[str]
) -> list[dict[str, str]]:
    lines = [
        f"{a} [{f.category}, confidence {f.confidence:.2f}] {f.content}"
        for a, f in zip(aliases, facts, strict=True)
    ]
    user = "Facts (oldest first):\n" + "\n".join(lines)
    if hints:
        user += "\n\nCandidates found by simple checks (verify them):\n" + "\n".join(hints)
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _first_object(text: str) -> dict[str, Any]:
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict) and ({"merges", "supersede", "supersedes"} & value.keys()):
            return value
        start = text.find("{", start + 1)
    raise ConsolidationParseError("no JSON object with merges or supersede")


def _aliases(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value.strip(),)
    if isinstance(value, list):
        return tuple(v.strip() for v in value if isinstance(v, str))
    return ()


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) and value.strip() else None


def parse_proposal(text: str) -> Proposal:
    """The changes the model proposes (not yet checked against the facts)."""
    doc = _first_object(text if isinstance(text, str) else "")
    notes: list[str] = []
    changes: list[ProposedChange] = []
    merges = doc.get("merges") or []
    supersede = doc.get("supersede", doc.get("supersedes")) or []
    if not isinstance(merges, list) or not isinstance(supersede, list):
        raise ConsolidationParseError("merges and supersede must be lists")
    for n, entry in enumerate(merges):
        if not isinstance(entry, dict):
            notes.append(f"merges[{n}]: not an object, ignored")
            continue
        changes.append(
            ProposedChange(
                "merge",
                _aliases(entry.get("facts")),
                content=_text(entry, "content"),
                category=_text(entry, "category"),
                reason=_text(entry, "reason"),
            )
        )
    for n, entry in enumerate(supersede):
        if not isinstance(entry, dict):
            notes.append(f"supersede[{n}]: not an object, ignored")
            continue
        by = _aliases(entry.get("by"))
        changes.append(
            ProposedChange(
                "supersede",
                _aliases(entry.get("old")),
                by=by[0] if by else None,
                reason=_text(entry, "reason"),
            )
        )
    return Proposal(tuple(changes), tuple(notes))
