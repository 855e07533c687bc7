"""A rule-based stand-in for the extraction model, for long-term memory tests.

It reads the conversation block of the extraction prompt and answers with the JSON a
model would: ``I like X`` / ``I prefer X`` / ``I love X`` become preference facts,
``I no longer like X`` supersedes the fact about X, ``I work as X`` updates the work
profile. Everything else is ignored, like a model that finds nothing durable.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

_BLOCK = re.compile(r"<conversation>\n(.*?)\n</conversation>", re.S)
_FACT_LINE = re.compile(r"^- \[(f\d+) \| (\w+) \| [0-9.]+\] (?:\[MANUAL\] )?(.*)$", re.M)
_LIKE = re.compile(r"\bI (?:like|prefer|love) ([^.!?\n]+)", re.I)
_UNLIKE = re.compile(r"\bI no longer (?:like|prefer|love) ([^.!?\n]+)", re.I)
# The time each turn was said, before its speaker.
_STAMP = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\] ")
_WORK = re.compile(r"\bI work as ([^.!?\n]+)", re.I)


def conversation_of(messages: list[dict[str, Any]]) -> str:
    found = _BLOCK.search(messages[-1]["content"])
    return "" if found is None else html.unescape(found.group(1))


def known_facts(messages: list[dict[str, Any]]) -> dict[str, str]:
    """alias -> content of the facts shown in the prompt."""
    return {
        m.group(1): html.unescape(m.group(3)) for m in _FACT_LINE.finditer(messages[-1]["content"])
    }


def rule_extractor(messages: list[dict[str, Any]]) -> str:
    text = conversation_of(messages)
    facts = known_facts(messages)
    lines = [_STAMP.sub("", line) for line in text.split("\n")]
    user_lines = [line[6:] for line in lines if line.startswith("User: ")]
    new: list[dict[str, Any]] = []
    profile: dict[str, str] = {}
    for line in user_lines:
        for m in _UNLIKE.finditer(line):
            thing = m.group(1).strip()
            old = [a for a, c in facts.items() if c.endswith(f"likes {thing}")]
            new.append(
                {
                    "content": f"User no longer likes {thing}",
                    "category": "preference",
                    "confidence": 0.9,
                    "supersedes": old,
                    "reason": "the user changed their mind",
                }
            )
        if _UNLIKE.search(line):
            continue
        for m in _LIKE.finditer(line):
            new.append(
                {
                    "content": f"User likes {m.group(1).strip()}",
                    "category": "preference",
                    "confidence": 0.95,
                }
            )
        for m in _WORK.finditer(line):
            profile["workContext"] = f"Works as {m.group(1).strip()}."
    return json.dumps({"profile": profile, "newFacts": new, "factsToRemove": []})
