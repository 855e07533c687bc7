"""What recall indexes for a message, and what it reads from a query (pure functions).

Nothing here knows a data set: the rules are about English question words, time
expressions and a speaker name a client may put in a message's metadata.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memstrata.types import Message, Role

__all__ = [
    "INDEXED_ROLES",
    "QueryInfo",
    "analyse_query",
    "document_text",
    "mentions_time",
    "speaker_of",
]

#: System prompts are instructions, not conversation: they are not recalled.
INDEXED_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL})

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Function words that carry no topic; keeping them in a keyword query only adds noise
# (every message matches "what" or "did").
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "ve",
        "ll",
        "re",
        "d",
        "m",
        "let",
        "lets",
        "also",
        "ever",
        "kind",
        "sort",
        "thing",
        "things",
        "way",
        "much",
        "many",
        "get",
        "got",
    ]
)

# Question forms that ask for a point or span in time.
_TIME_QUESTION = re.compile(
    r"\b(when|what (?:year|month|day|date|time|week|weekend)|which (?:year|month|day|date|week)"
    r"|how long|how many (?:days|weeks|months|years|times)|how often|since when|until when"
    r"|what date|date of|ago|first time|last time)\b",
    re.IGNORECASE,
)

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# Expressions that place an event in time: a date, a weekday, a relative phrase.
_TIME_MENTION = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS}|yesterday|today|tonight|tomorrow|ago|recently|lately"
    r"|(?:last|next|this|past|coming|previous) (?:week|weekend|month|year|night|summer|winter"
    rf"|spring|fall|autumn|time|few|couple|{_DAYS})"
    r"|(?:19|20)\d\d|\d+(?:st|nd|rd|th)"
    r"|(?:a|one|two|three|four|five|six|few|couple of|several) (?:days?|weeks?|months?|years?)"
    r"|the other day|earlier this|since)\b",
    re.IGNORECASE,
)


def speaker_of(message: Message) -> str | None:
    """The speaker a client named in metadata (``speaker`` or ``name``), if any."""
    for key in ("speaker", "name"):
        value = message.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return None


def document_text(message: Message) -> str:
    """The text indexed for a message: its content, after the speaker's name when known
    (questions name people: "what did Anna say about ..."), plus tool-call names."""
    parts = [message.content]
    parts.extend(call.function.name for call in message.tool_calls)
    body = " ".join(p for p in parts if p).strip()
    speaker = speaker_of(message)
    return f"{speaker}: {body}" if speaker and body else body


#: The same expressions, case-sensitive, for lowercased ASCII text: the same answer there
#: (no ASCII letter folds to anything but its own other case) at a quarter of the cost.
_TIME_MENTION_LOWER = re.compile(_TIME_MENTION.pattern)


#: Texts up to this long have their answer kept (:func:`mentions_time`), the most recent
#: :data:`_MENTIONS_KEPT` of them: a time question's candidates are mostly the same messages
#: of the same user from one question to the next, and the search costs more than the
#: lookup; a longer text is searched every time, so the cache stays small.
_MENTIONS_CACHED_CHARS = 1000
_MENTIONS_KEPT = 4096


def mentions_time(text: str) -> bool:
    """Whether ``text`` places something in time (a date, a weekday, a relative phrase)."""
    if len(text) > _MENTIONS_CACHED_CHARS:
        return _mentions_time(text)
    return _mentions_time_kept(text)


def _mentions_time(text: str) -> bool:
    if text.isascii():
        return _TIME_MENTION_LOWER.search(text.lower()) is not None
    return _TIME_MENTION.search(text) is not None


_mentions_time_kept = functools.lru_cache(maxsize=_MENTIONS_KEPT)(_mentions_time)


@dataclass(frozen=True, slots=True)
class QueryInfo:
    """What a search reads from its query: keyword terms, whether it asks about time, and
    whether it speaks in the first person (asks about the user's own life or work)."""

    text: str
    terms: tuple[str, ...]
    temporal: bool
    personal: bool = False


#: A query in the first person ("What breed is my dog?", "Which framework powers
#: our API?") is about the user's own life or work, which their own past messages
#: answer; English forms only (other languages get the general gate).
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|us|ourselves)\b",
    re.IGNORECASE,
)
#: "me" as the object of a request ("Give me a recipe", "Can you tell me what a
#: black hole is?") asks for help, not about the user: alone it does not make a query
#: personal. "What did the doctor tell me?" (a question about the user's past) does.
_REQUEST_ME = re.compile(
    r"(?:^|[.!?;:]\s*|\b(?:can|could|would|will)\s+you\s+)(?:please\s+)?"
    r"(?:give|tell|show|help|teach|send|find|get|make|write|recommend|suggest|explain\s+to)"
    r"\s+me\b",
    re.IGNORECASE,
)


def _first_person(text: str) -> bool:
    """Whether ``text`` speaks of the user: a first-person word that is neither "US"
    (the country, in capitals) nor a request's "me"."""
    requests: set[int] | None = None  # where a request's "me" ends, found once if needed
    for m in _FIRST_PERSON.finditer(text):
        word = m.group()
        if word == "US":
            continue
        if word.casefold() == "me":
            if requests is None:
                requests = {r.end() for r in _REQUEST_ME.finditer(text)}
            if m.end() in requests:
                continue
        return True
    return False


def analyse_query(text: str, *, max_terms: int = 32) -> QueryInfo:
    words = [w.casefold() for w in _WORD.findall(text)]
    terms: list[str] = []
    for w in words:
        if w in STOPWORDS or w in terms or len(w) > 64:
            continue
        terms.append(w)
    if not terms:  # a query of function words only: search them rather than nothing
        terms = list(dict.fromkeys(w for w in words if len(w) <= 64))
    return QueryInfo(
        text,
        tuple(terms[:max_terms]),
        _TIME_QUESTION.search(text) is not None,
        _first_person(text),
    )
