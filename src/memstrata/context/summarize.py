"""Rolling-summary text: the prompt for a model, an offline extractive summarizer, and the
check that keeps an empty or degenerate summary from ever replacing a good one.

A summary has five sections (the n8n compaction format): goal, facts and decisions,
current state, open issues, next step. The model gets the previous summary plus the
newly covered turns and returns an updated summary in that shape.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from memstrata.types import Message, Role

__all__ = [
    "SECTIONS",
    "build_prompt",
    "extractive_summary",
    "summary_problem",
    "turn_lines",
]

SECTIONS = (
    "Goal",
    "Important facts and decisions",
    "Current state",
    "Open issues or blockers",
    "Likely next step",
)

_SYSTEM = """You maintain a rolling summary of a conversation between a user and an AI assistant.
You get the previous summary (if any) and a batch of newly covered turns; return the updated summary.

Return exactly these five sections, each starting with its header line, and nothing else:
### Goal
### Important facts and decisions
### Current state
### Open issues or blockers
### Likely next step

Rules:
- One to five short bullet points per section ("None." when a section has nothing).
- Keep names, ids, numbers, file names and error messages exactly as written.
- Leave out bulky tool output and raw data; keep only what came of it.
- Merge with the previous summary: update sections instead of appending duplicates.
- When a decision was reversed or an issue resolved, state where things stand now."""

MAX_SUMMARY_CHARS = 12_000
_MIN_BODY_CHARS = 20


def _text(message: Message) -> str:
    return " ".join(message.content.split())


def turn_lines(messages: Sequence[Message]) -> list[str]:
    """High-signal lines: user and assistant text only (tool payloads and files left out)."""
    return [
        f"[{m.role.value}]: {_text(m)}"
        for m in messages
        if m.role in (Role.USER, Role.ASSISTANT) and m.content.strip()
    ]


def build_prompt(previous: str | None, messages: Sequence[Message]) -> list[dict[str, Any]]:
    parts = []
    if previous:
        parts.append(f"<previous-summary>\n{previous}\n</previous-summary>")
    parts.append("<new-turns>\n" + "\n".join(turn_lines(messages)) + "\n</new-turns>")
    parts.append("Produce the updated summary now. Return only the five sections, nothing else.")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        head = re.match(r"^\s*#{1,4}\s*(.+?)\s*$", line)
        if head and head.group(1) in SECTIONS:
            current = head.group(1)
            found[current] = []
        elif current is not None and line.strip():
            found[current].append(line.strip())
    return found


def summary_problem(text: str | None) -> str | None:
    """Why ``text`` must not be stored as a summary, or None when it is fine."""
    if text is None or not text.strip():
        return "empty summary"
    if len(text) > MAX_SUMMARY_CHARS:
        return f"summary over {MAX_SUMMARY_CHARS} characters"
    sections = _sections(text)
    missing = [s for s in SECTIONS if s not in sections]
    if missing:
        return f"summary lacks sections: {', '.join(missing)}"
    empty = [s for s in SECTIONS if not sections[s]]
    if empty:
        return f"summary has empty sections: {', '.join(empty)}"
    body = " ".join(" ".join(v) for v in sections.values())
    if len(body) < _MIN_BODY_CHARS:
        return "summary too short to carry anything"
    if len(set(body.split())) < 4:
        return "summary is degenerate (a few words repeated)"
    return None


# -- the offline summarizer ------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9_\-./:]{3,}")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "you",
        "that",
        "this",
        "with",
        "are",
        "was",
        "have",
        "not",
        "but",
        "can",
        "will",
        "your",
        "from",
        "they",
        "what",
        "there",
        "about",
        "would",
        "just",
        "like",
        "been",
        "all",
        "one",
        "has",
        "had",
        "which",
        "when",
        "their",
        "then",
        "them",
        "into",
        "could",
        "also",
        "some",
        "more",
        "than",
        "its",
        "our",
        "out",
        "any",
        "may",
        "should",
    ]
)
_ISSUE = re.compile(r"\b(error|fail\w*|bug|broken|issue|problem|blocked|cannot|can't)\b", re.I)
_DECISION = re.compile(
    r"\b(decide\w*|agree\w*|prefer\w*|use|choose|chose|always|never|must|will)\b", re.I
)
_BULLETS = 5
_BULLET_CHARS = 240


def _sentences(messages: Sequence[Message], role: Role | None = None) -> list[str]:
    out: list[str] = []
    for m in messages:
        if m.role not in (Role.USER, Role.ASSISTANT) or (role is not None and m.role is not role):
            continue
        out.extend(s.strip() for s in _SENTENCE.split(_text(m)) if len(s.strip()) > 3)
    return out


def _clip(sentence: str) -> str:
    return sentence if len(sentence) <= _BULLET_CHARS else sentence[: _BULLET_CHARS - 1] + "…"


def _salient(sentences: list[str], k: int) -> list[str]:
    """The ``k`` sentences with the most frequent content words, in their original order."""
    words = Counter(
        w.lower() for s in sentences for w in _WORD.findall(s) if w.lower() not in _STOP
    )

    def score(item: tuple[int, str]) -> tuple[float, int]:
        i, s = item
        terms = [w.lower() for w in _WORD.findall(s) if w.lower() not in _STOP]
        base = sum(words[t] for t in set(terms)) / (1 + len(terms)) ** 0.5
        bonus = 2.0 if _DECISION.search(s) or re.search(r"\d", s) else 0.0
        return (-(base + bonus), i)  # ties: earlier first, so the result is deterministic

    chosen = sorted(sorted(enumerate(sentences), key=score)[:k])
    return [s for _, s in chosen]


def _merge(old: list[str], new: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in [*new, *old]:  # newest first: a rolling summary keeps what is current
        body = line.lstrip("-* ").strip()
        if body and body.lower() not in seen and body != "None.":
            seen.add(body.lower())
            out.append(body)
    return out[:_BULLETS]


def extractive_summary(previous: str | None, messages: Sequence[Message]) -> str:
    """A deterministic five-section summary built from salient sentences (no model)."""
    old = _sections(previous or "")
    user = _sentences(messages, Role.USER)
    every = _sentences(messages)
    assistant = _sentences(messages, Role.ASSISTANT)
    fresh = {
        "Goal": old.get("Goal") or user[:1],
        "Important facts and decisions": _salient(every, _BULLETS),
        "Current state": assistant[-1:],
        "Open issues or blockers": [s for s in every if _ISSUE.search(s)][-2:],
        "Likely next step": user[-1:],
    }
    lines: list[str] = []
    for name in SECTIONS:
        keep_old = name in ("Goal", "Important facts and decisions", "Open issues or blockers")
        items = _merge(old.get(name, []) if keep_old else [], fresh[name])
        if name == "Goal":
            items = items[:1]
        lines.append(f"### {name}")
        if items:
            lines.extend(f"- {_clip(s)}" for s in items)
        else:
            lines.append("None.")
        lines.append("")
    return "\n".join(lines).strip()
