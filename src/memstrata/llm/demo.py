"""The demo model: a deterministic, rule-based stand-in for a chat model.

Selected by ``MEMSTRATA_LLM_BASE_URL=fake://`` (with any ``MEMSTRATA_LLM_MODEL``), it
lets the tutorial, the examples and tests run end to end with no model and no network.
It is a demo and test aid, not a model: it reads the prompts memstrata itself sends and
answers them from the text with a few fixed rules.

- **Extraction** (the long-term memory prompt): the user's lines of the conversation
  give facts and profile sections:
  ``I like / love / prefer / enjoy X`` -> ``User likes X`` (preference);
  ``I don't like / dislike / hate X`` -> ``User dislikes X``;
  ``I no longer like X`` (or ``... anymore``) -> ``User no longer likes X``, superseding
  the remembered ``User likes X``; ``my name is X`` / ``call me X`` -> ``User's name is X``
  (superseding an older name); ``I work as X`` / ``I'm a X at Y`` -> the workContext
  profile; ``I live in X`` -> personalContext;
  ``I always / usually / often / never X`` -> ``User always Xs`` (preference);
  ``I'm allergic to X`` -> ``User is allergic to X``; ``my X is Y`` -> ``User's X is Y``
  (superseding an older value of the same X); ``(Please) remember (that) X`` -> X as
  those rules read it, else X itself in the third person; a line starting with ``No,``,
  ``Actually,``, ``That's wrong`` or ``Wrong`` after an assistant line -> a
  ``correction`` fact whose ``sourceError`` is that assistant line.
- **Compaction** (the rolling-summary prompt): the five sections from the turns: the
  first user request as the goal, the users' statements of fact as the facts, the last
  assistant line as the state, unanswered questions as open issues, the last user line
  as the next step; merged with the previous summary.
- **Anything else** (chat): a short reply that names the question and what the system
  messages say is remembered, e.g. ``(demo model) You asked: ... I remember: ...``.

Every answer is a pure function of the messages: same input, same bytes.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEMO_SCHEME", "DemoLLM", "answer", "is_demo_url"]

DEMO_SCHEME = "fake://"

_CONVERSATION = re.compile(r"<conversation>\n(.*?)\n</conversation>", re.S)
_FACT_LINE = re.compile(r"^- \[(\w+) \| (\w+) \| [0-9.]+\] (?:\[MANUAL\] )?(.*)$", re.M)
_TURNS = re.compile(r"<new-turns>\n(.*?)\n</new-turns>", re.S)
_PREVIOUS = re.compile(r"<previous-summary>\n(.*?)\n</previous-summary>", re.S)
_CLAUSE_END = r"(?=[.!?;\n]|,? (?:but|and I|so)\b|$)"

_NO_LONGER = re.compile(
    r"\bI (?:no longer|don't|do not) (?:like|love|enjoy|prefer) (.+?)(?: any ?more)?" + _CLAUSE_END,
    re.I,
)
_ANYMORE = re.compile(r"\bany ?more\b|\bno longer\b", re.I)
_DISLIKE = re.compile(r"\bI (?:dislike|hate|can't stand) (.+?)" + _CLAUSE_END, re.I)
_LIKE = re.compile(r"\bI (?:really )?(?:like|love|prefer|enjoy) (.+?)" + _CLAUSE_END, re.I)
_NAME = re.compile(r"\b(?i:my name is|call me) ([A-Z][\w'-]*(?: [A-Z][\w'-]*)?)")
_WORK = re.compile(r"\bI work as (.+?)" + _CLAUSE_END, re.I)
_LIVE = re.compile(r"\bI live in (.+?)" + _CLAUSE_END, re.I)
_HABIT = re.compile(r"\bI (always|usually|often|never) (\w+)(.*?)" + _CLAUSE_END, re.I)
_ALLERGY = re.compile(r"\bI(?:'m| am) (?:very |severely )?allergic to (.+?)" + _CLAUSE_END, re.I)
# "my X is Y" for any X of up to three words but the name (its own rule, above).
_MY_IS = re.compile(r"\bmy ((?!name\b)[\w'-]+(?: [\w'-]+){0,2}) is (.+?)" + _CLAUSE_END, re.I)
_REMEMBER = re.compile(r"^(?:please,? )?(?:do )?remember(?: that|:|,)? (.+?)[.!]?$", re.I)
_CORRECTION = re.compile(r"^(?:no,|actually,|that's wrong|that is wrong|wrong)", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MEMORY = re.compile(r"<memory>\n(.*?)\n</memory>", re.S)


def is_demo_url(base_url: str | None) -> bool:
    return bool(base_url) and str(base_url).lower().startswith(DEMO_SCHEME)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _clean(thing: str) -> str:
    return " ".join(thing.strip().strip("\"'").split())


# -- extraction -------------------------------------------------------------------------------


# The time a turn was said, before its speaker (``[2026-03-05 14:30 UTC] User: ...``).
_STAMP = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\] ")


def _turns(block: str) -> list[tuple[str, str]]:
    """(role, text) of the conversation block: ``User: ...`` / ``Assistant: ...`` paragraphs."""
    turns: list[tuple[str, str]] = []
    for part in html.unescape(block).split("\n\n"):
        role, _, text = _STAMP.sub("", part, count=1).partition(": ")
        if role in ("User", "Assistant"):
            turns.append((role.lower(), " ".join(text.split())))
        elif turns:  # a turn that itself held a blank line
            turns[-1] = (turns[-1][0], turns[-1][1] + " " + " ".join(part.split()))
    return turns


def _superseded(known: dict[str, str], suffix: str) -> list[str]:
    return sorted(a for a, c in known.items() if c.lower().endswith(suffix.lower()))


def _user_facts(text: str, known: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    facts: list[dict[str, Any]] = []
    profile: dict[str, str] = {}
    for m in _NO_LONGER.finditer(text):
        thing = _clean(m.group(1))
        old = _superseded(known, f"likes {thing}")
        if not old and not _ANYMORE.search(m.group(0)):
            facts.append(_fact(f"User dislikes {thing}", "preference", 0.9))
            continue
        fact = _fact(f"User no longer likes {thing}", "preference", 0.9)
        if old:
            fact.update(supersedes=old, reason="the user changed their mind")
        facts.append(fact)
    rest = _NO_LONGER.sub(" ", text)
    facts += [
        _fact(f"User dislikes {_clean(m.group(1))}", "preference", 0.9)
        for m in _DISLIKE.finditer(rest)
    ]
    facts += [
        _fact(f"User likes {_clean(m.group(1))}", "preference", 0.95) for m in _LIKE.finditer(rest)
    ]
    for m in _NAME.finditer(text):
        fact = _fact(f"User's name is {m.group(1)}", "context", 0.95)
        old = [a for a in _superseded(known, "") if known[a].startswith("User's name is ")]
        old = [a for a in old if known[a] != fact["content"]]
        if old:
            fact.update(supersedes=old, reason="the user gave another name")
        facts.append(fact)
    facts += _habits(text, known)
    for m in _WORK.finditer(text):
        profile["workContext"] = f"Works as {_clean(m.group(1))}."
    for m in _LIVE.finditer(text):
        profile["personalContext"] = f"Lives in {_clean(m.group(1))}."
    return facts, profile


def _third_person(verb: str) -> str:
    """``want`` -> ``wants``: enough English for the demo's habit lines."""
    low = verb.lower()
    if low in ("have", "am", "do", "go"):
        return {"have": "has", "am": "is", "do": "does", "go": "goes"}[low]
    if low.endswith(("s", "sh", "ch", "x", "z")):
        return verb + "es"
    if low.endswith("y") and low[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ies"
    return verb + "s"


def _habits(text: str, known: dict[str, str]) -> list[dict[str, Any]]:
    """``I always / usually / never X``, ``I'm allergic to X`` and ``my X is Y`` lines."""
    facts = []
    for m in _HABIT.finditer(text):
        said = " ".join([m.group(1).lower(), _third_person(m.group(2)), _clean(m.group(3))])
        facts.append(_fact(f"User {said.strip()}", "preference", 0.9))
    facts += [
        _fact(f"User is allergic to {_clean(m.group(1))}", "context", 0.95)
        for m in _ALLERGY.finditer(text)
    ]
    for m in _MY_IS.finditer(text):
        what = _clean(m.group(1)).lower()
        fact = _fact(
            f"User's {what} is {_clean(m.group(2))}",
            "preference" if what.startswith(("favorite", "favourite")) else "context",
            0.9,
        )
        prefix = f"User's {what} is "
        old = [a for a, c in known.items() if c.startswith(prefix) and c != fact["content"]]
        if old:
            fact.update(supersedes=sorted(old), reason=f"the user gave another {what}")
        facts.append(fact)
    return facts


def _remembered(text: str, known: dict[str, str]) -> list[dict[str, Any]]:
    """``(Please) remember (that) X``: X as the rules read it, else as it was said (in the
    third person where it speaks of the user)."""
    facts: list[dict[str, Any]] = []
    for sentence in _SENTENCE.split(text):
        m = _REMEMBER.match(sentence.strip())
        if m is None:
            continue
        clause = _clean(m.group(1))
        found, sections = _user_facts(clause, known)
        if found or sections:
            facts += found
            continue
        said = re.sub(r"^I(?:'m| am)\b", "User is", clause)
        said = re.sub(r"^I (\w+)", lambda v: f"User {_third_person(v.group(1))}", said)
        said = re.sub(r"\bmy\b", "the user's", said, flags=re.I)
        content = said if said.startswith("User ") else f"User asked to remember: {said}"
        facts.append(_fact(content, "context", 0.9))
    return facts


def _fact(content: str, category: str, confidence: float) -> dict[str, Any]:
    return {"content": content, "category": category, "confidence": confidence}


def extraction_answer(prompt: str) -> str:
    """The JSON answer to memstrata's long-term extraction prompt."""
    block = _CONVERSATION.search(prompt)
    known = {m.group(1): html.unescape(m.group(3)) for m in _FACT_LINE.finditer(prompt)}
    facts: list[dict[str, Any]] = []
    profile: dict[str, str] = {}
    previous_assistant: str | None = None
    for role, text in _turns(block.group(1) if block else ""):
        if role == "assistant":
            previous_assistant = text
            continue
        if previous_assistant and _CORRECTION.match(text):
            facts.append(
                {
                    **_fact(f"User corrected the assistant: {text}", "correction", 0.9),
                    "sourceError": previous_assistant[:200],
                }
            )
        found, sections = _user_facts(text, known)
        facts += found + _remembered(text, known)
        profile.update(sections)
    unique: dict[str, dict[str, Any]] = {}
    remembered = set(known.values())
    for fact in facts:
        if fact["content"] not in remembered:
            unique.setdefault(fact["content"], fact)
    return json.dumps(
        {"profile": profile, "newFacts": list(unique.values()), "factsToRemove": []},
        ensure_ascii=False,
    )


# -- compaction -------------------------------------------------------------------------------


def _bullets(items: Sequence[str], limit: int = 5) -> list[str]:
    return [f"- {i}" for i in list(dict.fromkeys(items))[-limit:]] or ["None."]


def _previous_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("### "):
            current = line[4:].strip()
            sections[current] = []
        elif current and line.startswith("- "):
            sections[current].append(line[2:].strip())
    return sections


def summary_answer(prompt: str) -> str:
    """The five-section rolling summary for memstrata's compaction prompt."""
    turns_block = _TURNS.search(prompt)
    previous = _PREVIOUS.search(prompt)
    before = _previous_sections(previous.group(1)) if previous else {}
    user: list[str] = []
    assistant: list[str] = []
    for line in (turns_block.group(1) if turns_block else "").splitlines():
        role, _, text = line.partition("]: ")
        (user if role == "[user" else assistant if role == "[assistant" else []).append(text)
    sentences = [s for u in user for s in _SENTENCE.split(u) if s]
    statements = [s for s in sentences if not s.endswith("?")]
    questions = [s for s in sentences if s.endswith("?")]
    goal = before.get("Goal") or ([_SENTENCE.split(user[0])[0]] if user else [])
    facts = [*before.get("Important facts and decisions", []), *statements]
    sections = {
        "Goal": _bullets(goal, 1),
        "Important facts and decisions": _bullets(facts),
        "Current state": _bullets(assistant[-1:] or before.get("Current state", [])),
        "Open issues or blockers": _bullets(questions[-3:] if not assistant else questions[-1:]),
        "Likely next step": _bullets(user[-1:] or before.get("Likely next step", [])),
    }
    return "\n".join(line for name, body in sections.items() for line in (f"### {name}", *body))


# -- chat -------------------------------------------------------------------------------------


def chat_answer(messages: Sequence[Mapping[str, Any]]) -> str:
    question = next(
        (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    remembered = [
        line.split("] ", 1)[-1]
        for m in messages
        if m.get("role") == "system"
        for block in _MEMORY.findall(_text(m.get("content")))
        for line in block.splitlines()
        if line.startswith("[") and "] " in line
    ]
    reply = f"(demo model) You asked: {' '.join(question.split())}"
    if remembered:
        reply += " I remember: " + "; ".join(remembered) + "."
    return reply


def answer(messages: Sequence[Mapping[str, Any]]) -> str:
    """The demo model's reply to ``messages`` (OpenAI-shaped chat messages)."""
    system = _text(messages[0].get("content")) if messages else ""
    last = _text(messages[-1].get("content")) if messages else ""
    if system.startswith("You maintain the long-term memory"):
        # A repair request repeats the prompt before it: answer the original prompt.
        prompt = next(
            (
                _text(m.get("content"))
                for m in messages
                if "<conversation>\n" in _text(m.get("content"))
            ),
            last,
        )
        return extraction_answer(prompt)
    if system.startswith("You maintain a rolling summary"):
        return summary_answer(last)
    return chat_answer(messages)


class DemoLLM:
    """The demo model behind the ``LLM`` port (``MEMSTRATA_LLM_BASE_URL=fake://``)."""

    def __init__(self, model: str = "demo") -> None:
        self.model = model

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        return answer(messages)

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        return answer(messages)

    def __repr__(self) -> str:
        return f"DemoLLM(model={self.model!r})"
