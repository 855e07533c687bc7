"""Turn a model's extraction answer into a validated :class:`ProposedUpdate`.

Models wrap JSON in prose and code fences, run out of tokens half-way, and fill fields
with the wrong types. The answer is therefore searched for the first JSON object that
looks like an update; a truncated one is repaired by cutting it back to its last
complete element. Each field is then checked on its own: a bad profile section or an
unknown alias is dropped with a note, a fact without usable content or confidence is
*malformed*.

One rule is not a matter of dropping: removals and supersessions are only safe when the
new facts that replace them arrived intact. If any new fact is malformed while the
answer removes or supersedes anything, the whole answer is refused, so a broken answer
can never delete memory and leave nothing in its place.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from datetime import datetime
from typing import Any, TypeGuard

from memstrata.longterm.clocks import parse_loose_date
from memstrata.longterm.model import (
    CATEGORIES,
    PROFILE_SECTIONS,
    ProposedFact,
    ProposedUpdate,
    Removal,
    UpdateParseError,
)

__all__ = [
    "MAX_CONTENT",
    "MAX_FACTS",
    "MAX_REMOVALS",
    "MAX_SECTION",
    "parse_update",
]

MAX_SECTION = 2000
MAX_CONTENT = 1000
MAX_FACTS = 50
MAX_REMOVALS = 50
_MAX_NOTE_VALUE = 60
# Places where decoding an object is attempted.
_MAX_DECODE_TRIES = 256
# A truncated answer is cut back at most this many times before giving up.
_MAX_REPAIR_TRIES = 32
# An update object is a few levels deep; anything far deeper is not worth repairing.
_MAX_REPAIR_DEPTH = 32

_KEYS = ("newFacts", "profile", "factsToRemove")
_DEERFLOW_GROUPS = ("user", "history")
_FENCE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)
_OBJECT_START = re.compile(r"\{\s*\"")


class _Malformed(Exception):
    """A new-fact entry that cannot be used (the message says why)."""


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_NOTE_VALUE else text[: _MAX_NOTE_VALUE - 3] + "..."


def _squash(text: str) -> str:
    return " ".join(text.split())


# -- finding the object ------------------------------------------------------------------


def _looks_like_update(value: object) -> TypeGuard[dict[str, Any]]:
    if not isinstance(value, dict):
        return False
    if any(key in value for key in _KEYS):
        return True
    return any(isinstance(value.get(group), dict) for group in _DEERFLOW_GROUPS)


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> object:
    try:
        return decoder.raw_decode(text, start)[0]
    except (ValueError, RecursionError):
        return None


def _first_update(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    # Only where an object with a key can start, and a bounded number of them: a failed
    # decode costs time proportional to its offset, so garbage full of braces must not
    # turn into quadratic work.
    for tries, match in enumerate(_OBJECT_START.finditer(text)):
        if tries >= _MAX_DECODE_TRIES:
            break
        value = _decode_at(decoder, text, match.start())
        if _looks_like_update(value):
            return value
    return None


def _closers(stack: tuple[str, ...]) -> str:
    return "".join("}" if opener == "{" else "]" for opener in reversed(stack))


def _whole(stack: tuple[str, ...]) -> bool:
    """Whether a cut here leaves no list element half-built: an object that is an
    element of a list (a fact, a removal) must be complete or absent."""
    return "[{" not in "".join(stack)


def _cuts(text: str, start: int) -> tuple[int, list[tuple[int, tuple[str, ...]]] | None]:
    """Scan the object at ``start``: where the scan stopped, and if the object runs to
    the end of ``text`` unclosed, its clean cut points as ``(end, open brackets)``
    pairs, last first. No cut points if the object closes (then it was not truncated,
    just invalid), brackets do not match, or it nests implausibly deep."""
    stack: list[str] = []
    cuts: list[tuple[int, tuple[str, ...]]] = []
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
            if len(stack) > _MAX_REPAIR_DEPTH:
                return index, None
            cuts.append((index + 1, tuple(stack)))
        elif char in "}]":
            if not stack or (stack.pop() == "{") != (char == "}") or not stack:
                return index, None
            cuts.append((index + 1, tuple(stack)))
        elif char == ",":
            cuts.append((index, tuple(stack)))
    return len(text), [cut for cut in reversed(cuts) if _whole(cut[1])]


def _repair(text: str) -> dict[str, Any] | None:
    """A truncated update object, cut back to its last complete element and closed."""
    resume = 0
    for match in _OBJECT_START.finditer(text):
        start = match.start()
        # Objects inside one that already closed (or failed) are not the truncated one.
        if start < resume:
            continue
        resume, cuts = _cuts(text, start)
        if cuts is None:
            continue
        for end, stack in cuts[:_MAX_REPAIR_TRIES]:
            try:
                value = json.loads(text[start:end] + _closers(stack))
            except (ValueError, RecursionError):
                continue
            if _looks_like_update(value):
                return value
        return None
    return None


def _extract(text: str, notes: list[str]) -> dict[str, Any]:
    cleaned = _FENCE.sub("", text)
    found = _first_update(cleaned)
    if found is not None:
        return found
    found = _repair(cleaned)
    if found is not None:
        notes.append("answer was truncated: its incomplete tail was dropped")
        return found
    raise UpdateParseError("no JSON update object found in the answer", raw=text)


# -- profile -----------------------------------------------------------------------------


def _deerflow_profile(doc: dict[str, Any], notes: list[str]) -> dict[str, object]:
    """Sections from DeerFlow's ``user``/``history`` groups: only those marked
    ``shouldUpdate`` with a non-empty summary."""
    sections: dict[str, object] = {}
    for group in _DEERFLOW_GROUPS:
        entries = doc.get(group)
        if entries is None:
            continue
        if not isinstance(entries, dict):
            notes.append(f"{group}: not an object, ignored")
            continue
        for name, entry in entries.items():
            if not isinstance(entry, dict):
                notes.append(f"{group}.{name}: not an object, ignored")
            elif entry.get("shouldUpdate") is True and entry.get("summary"):
                sections[name] = entry["summary"]
    return sections


def _profile(doc: dict[str, Any], notes: list[str]) -> dict[str, str]:
    raw = _deerflow_profile(doc, notes)
    given = doc.get("profile")
    if isinstance(given, dict):
        raw.update(given)
    elif given is not None:
        notes.append("profile: not an object, ignored")
    profile: dict[str, str] = {}
    for name, value in raw.items():
        if name not in PROFILE_SECTIONS:
            notes.append(f"profile.{_short(name)}: unknown section, dropped")
            continue
        if not isinstance(value, str) or not value.strip():
            notes.append(f"profile.{name}: not a non-empty string, dropped")
            continue
        text = value.strip()
        if len(text) > MAX_SECTION:
            notes.append(f"profile.{name}: longer than {MAX_SECTION} characters, truncated")
            text = text[:MAX_SECTION].rstrip()
        profile[name] = text
    return profile


# -- new facts ---------------------------------------------------------------------------


def _content(entry: dict[str, Any], where: str, notes: list[str]) -> str:
    value = entry.get("content")
    if not isinstance(value, str) or not value.strip():
        raise _Malformed("content is missing or empty")
    text = _squash(value)
    if len(text) > MAX_CONTENT:
        notes.append(f"{where}: content longer than {MAX_CONTENT} characters, truncated")
        text = text[:MAX_CONTENT].rstrip()
    return text


def _category(entry: dict[str, Any], where: str, notes: list[str]) -> str:
    value = entry.get("category")
    if value is None:
        return "context"
    category = value.strip().lower() if isinstance(value, str) else ""
    if category in CATEGORIES:
        return category
    notes.append(f"{where}: unknown category {_short(value)}, stored as context")
    return "context"


def _confidence(entry: dict[str, Any], where: str, notes: list[str]) -> float:
    value = entry.get("confidence")
    if value is None:
        return 0.5
    if isinstance(value, bool):
        raise _Malformed("confidence is a boolean")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _Malformed(f"confidence {_short(value)} is not a number") from None
    if not isinstance(value, int | float):
        raise _Malformed(f"confidence {_short(value)} is not a number")
    try:
        number = float(value)
    except OverflowError:
        raise _Malformed("confidence is not finite") from None
    if not math.isfinite(number):
        raise _Malformed("confidence is not finite")
    clamped = min(1.0, max(0.0, number))
    if clamped != number:
        notes.append(f"{where}: confidence {number} clamped to {clamped}")
    return clamped


def _supersedes(
    entry: dict[str, Any], where: str, aliases: Collection[str], notes: list[str]
) -> tuple[str, ...]:
    value = entry.get("supersedes")
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        notes.append(f"{where}: supersedes is not a list, ignored")
        return ()
    kept: list[str] = []
    for alias in value:
        if not isinstance(alias, str) or alias.strip() not in aliases:
            notes.append(f"{where}: supersedes unknown fact {_short(alias)}, dropped")
        elif alias.strip() not in kept:
            kept.append(alias.strip())
    return tuple(kept)


def _optional_text(entry: dict[str, Any], key: str, where: str, notes: list[str]) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        notes.append(f"{where}: {key} is not a string, ignored")
        return None
    text = _squash(value)[:MAX_CONTENT]
    return text or None


_FROM_KEYS = ("validFrom", "valid_from", "since")
_TO_KEYS = ("validTo", "valid_to", "until")


def _when(
    entry: dict[str, Any], keys: tuple[str, ...], where: str, notes: list[str]
) -> datetime | None:
    """An optional date under any of ``keys``; one that cannot be read is noted and
    ignored (the extraction's own time stands), never a reason to drop the fact."""
    for key in keys:
        value = entry.get(key)
        if value is None or value == "":
            continue
        found = parse_loose_date(value)
        if found is None:
            notes.append(f"{where}: {key} {_short(value)} is not a date, ignored")
        return found
    return None


def _fact(entry: object, where: str, aliases: Collection[str], notes: list[str]) -> ProposedFact:
    if not isinstance(entry, dict):
        raise _Malformed("not an object")
    since = _when(entry, _FROM_KEYS, where, notes)
    until = _when(entry, _TO_KEYS, where, notes)
    if since is not None and until is not None and until < since:
        notes.append(f"{where}: validTo before validFrom, ignored")
        until = None
    return ProposedFact(
        content=_content(entry, where, notes),
        confidence=_confidence(entry, where, notes),
        category=_category(entry, where, notes),
        source_error=_optional_text(entry, "sourceError", where, notes),
        supersedes=_supersedes(entry, where, aliases, notes),
        reason=_optional_text(entry, "reason", where, notes),
        valid_from=since,
        valid_to=until,
    )


def _new_facts(
    doc: dict[str, Any], aliases: Collection[str], notes: list[str]
) -> tuple[list[ProposedFact], int]:
    """The usable new facts and how many entries were malformed."""
    entries = doc.get("newFacts")
    if entries is None:
        return [], 0
    if not isinstance(entries, list):
        notes.append("newFacts: not a list, dropped")
        return [], 1
    facts: list[ProposedFact] = []
    seen: set[str] = set()
    malformed = 0
    for index, entry in enumerate(entries):
        where = f"newFacts[{index}]"
        try:
            fact = _fact(entry, where, aliases, notes)
        except _Malformed as exc:
            notes.append(f"{where}: malformed ({exc}), dropped")
            malformed += 1
            continue
        key = fact.content.casefold()
        if key in seen:
            notes.append(f"{where}: repeats an earlier new fact, dropped")
            continue
        seen.add(key)
        facts.append(fact)
    if len(facts) > MAX_FACTS:
        notes.append(f"newFacts: {len(facts)} facts, only the first {MAX_FACTS} kept")
        del facts[MAX_FACTS:]
    return facts, malformed


# -- removals ----------------------------------------------------------------------------


def _removal(
    entry: object, where: str, aliases: Collection[str], notes: list[str]
) -> Removal | None:
    # DeerFlow's older answers list bare ids; a removal without a reason is not accepted.
    alias, reason = (entry, "") if isinstance(entry, str) else (None, None)
    if isinstance(entry, dict):
        alias, reason = entry.get("id"), entry.get("reason")
    if not isinstance(alias, str) or alias.strip() not in aliases:
        notes.append(f"{where}: unknown fact {_short(alias)}, dropped")
        return None
    if not isinstance(reason, str) or not reason.strip():
        notes.append(f"{where}: removal of {alias.strip()} without a reason, dropped")
        return None
    return Removal(alias=alias.strip(), reason=_squash(reason)[:MAX_CONTENT])


def _removals(doc: dict[str, Any], aliases: Collection[str], notes: list[str]) -> list[Removal]:
    entries = doc.get("factsToRemove")
    if entries is None:
        return []
    if not isinstance(entries, list):
        notes.append("factsToRemove: not a list, ignored")
        return []
    removals: list[Removal] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        removal = _removal(entry, f"factsToRemove[{index}]", aliases, notes)
        if removal is not None and removal.alias not in seen:
            seen.add(removal.alias)
            removals.append(removal)
    if len(removals) > MAX_REMOVALS:
        notes.append(f"factsToRemove: {len(removals)} removals, only the first {MAX_REMOVALS} kept")
        del removals[MAX_REMOVALS:]
    return removals


# -- entry point -------------------------------------------------------------------------


def parse_update(text: str, aliases: Collection[str]) -> ProposedUpdate:
    """The update in a model's answer ``text``; ``aliases`` are those the prompt showed.

    Raises :class:`UpdateParseError` (with the answer in ``raw``) when no update object
    can be found, or when it would remove or supersede facts while some of its new
    facts are malformed.
    """
    known = frozenset(aliases)
    notes: list[str] = []
    doc = _extract(text, notes)
    profile = _profile(doc, notes)
    facts, malformed = _new_facts(doc, known, notes)
    removals = _removals(doc, known, notes)
    if malformed and (removals or any(fact.supersedes for fact in facts)):
        raise UpdateParseError(
            f"unsafe partial update: {malformed} malformed new fact(s) in an answer that "
            "removes or supersedes facts",
            raw=text,
        )
    return ProposedUpdate(
        profile=profile,
        new_facts=tuple(facts),
        removals=tuple(removals),
        notes=tuple(notes),
    )
