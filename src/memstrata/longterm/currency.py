"""Current truth at injection: of two facts that contradict, only the newer is injected
as current, whatever the extraction model did (a model may miss a supersession: "I like
sushi, especially salmon nigiri on Fridays" then "I no longer like sushi" can leave both
active).

Two active facts contradict (:func:`outdated`) when

* one says the opposite of the other: one is negated ("no longer", "not", "never",
  "doesn't", "dislikes", ...) and the other is not, and with the negation taken away they
  start with the same word (the verb: "likes") and the shorter one's words are all in
  the longer one ("likes sushi" and "likes sushi especially salmon nigiri fridays"); or
* they are a contradiction candidate of the memory health report
  (:func:`~memstrata.longterm.health.contradiction_pairs`: same category, same first
  word, most words shared, each saying something the other does not: "lives Berlin"
  and "lives Paris"), unless that word is a verb a user holds many of at once
  ("likes sushi" and "likes jazz" are both true; :data:`_MANY`).

The newer one (event time, then the time it was recorded) wins; the older is *outdated*.
The facts tier renders an outdated fact after every current one, marked
:data:`OUTDATED`; the recall tier leaves out a message whose facts are all superseded
or outdated (:func:`stale_messages`). The rules are lexical and pure; facts are compared
only within groups of the same first word, so the cost stays near linear in the facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache

from memstrata.longterm.branchfacts import BRANCH_ABANDONED
from memstrata.longterm.health import contradiction_pairs, duplicate_groups, words
from memstrata.longterm.model import Fact
from memstrata.longterm.store import true_facts
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import placeholders
from memstrata.types import Message, Scope

__all__ = ["OUTDATED", "outdated", "stale_messages"]

#: What an outdated fact's line ends with.
OUTDATED = "(outdated)"

_NEGATIONS = frozenset(
    [
        "no",
        "not",
        "never",
        "longer",
        "anymore",
        "nor",
        "don't",
        "doesn't",
        "dont",
        "doesnt",
        "isn't",
        "aren't",
        "wasn't",
        "won't",
        "can't",
        "cannot",
        "stopped",
        "quit",
    ]
)
#: Verbs that negate another ("dislikes" is "likes" negated), by stem.
_OPPOSITES = {"dislike": "like", "hate": "like"}
#: Verbs that say the same (so "loves X" and "no longer likes X" meet), by stem.
_SAME = {"love": "like", "enjoy": "like"}
#: Verbs a user holds many of at once ("likes sushi" and "likes jazz" are both true): their
#: facts contradict only by negation, never as a health-report candidate pair.
_MANY = frozenset(
    [
        "like",
        "want",
        "need",
        "have",
        "own",
        "play",
        "speak",
        "know",
        "use",
        "visited",
        "read",
        "watche",
        "listen",
        "eat",
        "drink",
        "collect",
        "follow",
        "plan",
        "study",
        "studie",
        "wear",
        "cook",
        "travel",
        "volunteer",
        "practice",
        "practise",
    ]
)


def _stem(word: str) -> str:
    """A word without its plural or third-person ``s`` ("likes" and "like" meet)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _polarity(fact: Fact) -> tuple[bool, tuple[str, ...]]:
    """Whether the fact is negated, and its (stemmed) words with the negation taken away."""
    negated = False
    core: list[str] = []
    for w in words(fact.content):
        if w in _NEGATIONS:
            negated = True
            continue
        stem = _stem(w)
        if stem in _OPPOSITES:
            negated = not negated
            core.append(_OPPOSITES[stem])
        else:
            core.append(_SAME.get(stem, stem))
    return negated, tuple(core)


def _age(fact: Fact) -> tuple[datetime, datetime, str]:
    return (fact.valid_from or fact.created_at, fact.created_at, fact.id)


def _opposite(a: tuple[bool, tuple[str, ...]], b: tuple[bool, tuple[str, ...]]) -> bool:
    (neg_a, core_a), (neg_b, core_b) = a, b
    if neg_a == neg_b or not core_a or not core_b or core_a[0] != core_b[0]:
        return False
    short, long = sorted((frozenset(core_a), frozenset(core_b)), key=len)
    return short <= long


def outdated(facts: Sequence[Fact]) -> dict[str, str]:
    """``{older fact id: the newer fact id that outdates it}`` among ``facts`` (pure; the
    answer for the same facts is remembered, since every context call asks)."""
    return dict(_outdated(tuple(facts)))


@lru_cache(maxsize=256)
def _outdated(facts: tuple[Fact, ...]) -> tuple[tuple[str, str], ...]:
    polar = {f.id: _polarity(f) for f in facts}
    groups: dict[str, list[Fact]] = {}
    for f in facts:
        core = polar[f.id][1]
        if core:
            groups.setdefault(core[0], []).append(f)
    out: dict[str, str] = {}
    by_id = {f.id: f for f in facts}

    def mark(a: Fact, b: Fact) -> None:
        old, new = sorted((a, b), key=_age)
        # The newest contradiction names the winner (an older one may have lost too).
        if old.id not in out or _age(new) > _age(by_id[out[old.id]]):
            out[old.id] = new.id

    for key, group in groups.items():
        if len(group) < 2:
            continue
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if _opposite(polar[a.id], polar[b.id]):
                    mark(a, b)
        if key in _MANY:
            continue
        for i, j, _ in contradiction_pairs(group, duplicate_groups(group)):
            mark(group[i], group[j])
    return tuple(sorted(out.items()))


def stale_messages(scope: Scope, messages: Sequence[Message], now: int) -> Op[set[tuple[str, str]]]:
    """The ``(conversation id, message id)`` of those ``messages`` whose facts are no
    longer current: each fact drawn from the message is superseded or removed (not
    withdrawn with its branch, not evicted by the cap: neither says it stopped being
    true) or outdated (:func:`outdated`), and at least one is. A message no fact came from,
    or one with a current fact (a merge's new fact carries its sources), is not stale."""
    if not messages:
        return set()
    convs = sorted({m.conversation_id for m in messages})
    ids = sorted({m.id for m in messages})
    rows = yield Query(
        "SELECT s.conversation_id, s.message_id, f.id, f.status, f.reason FROM fact_sources s "
        "JOIN facts f ON f.id = s.fact_id "
        f"WHERE s.conversation_id IN ({placeholders(len(convs))}) "
        f"AND s.message_id IN ({placeholders(len(ids))}) "
        "AND f.tenant_id = ? AND f.user_id = ? AND f.agent_id = ?",
        (*convs, *ids, scope.tenant, scope.user, scope.agent_key),
    )
    wanted = {(m.conversation_id, m.id) for m in messages}
    by_message: dict[tuple[str, str], list[tuple[str, str, str | None]]] = {}
    for cid, mid, fid, status, reason in rows:
        if (cid, mid) in wanted:
            by_message.setdefault((cid, mid), []).append((fid, status, reason))
    if not by_message:
        return set()
    old: set[str] = set()
    if any(status == "active" for found in by_message.values() for _, status, _ in found):
        old = set(outdated((yield from true_facts(scope, now))))
    stale: set[tuple[str, str]] = set()
    for key, found in by_message.items():
        current = any(status == "active" and fid not in old for fid, status, _ in found)
        gone = any(
            (status == "active" and fid in old)
            or (status in ("superseded", "removed") and reason != BRANCH_ABANDONED)
            for fid, status, reason in found
        )
        if gone and not current:
            stale.add(key)
    return stale
