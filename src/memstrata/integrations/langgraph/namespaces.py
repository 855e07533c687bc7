"""How the LangGraph store maps namespaces to memstrata's memory (pure): which namespaces
are a user's facts or working memory, and how a prefix or match condition selects them."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import takewhile
from typing import Literal

from langgraph.store.base import MatchCondition

from memstrata.errors import InvalidInput

__all__ = [
    "SHAPES",
    "WORKING_KEY",
    "Target",
    "enumerable",
    "facts_namespace",
    "leading_labels",
    "matches_condition",
    "parse_namespace",
    "required_target",
    "working_namespace",
]

WORKING_KEY = "content"


def facts_namespace(user: str) -> tuple[str, ...]:
    """The namespace of a user's long-term facts."""
    return ("users", user, "facts")


def working_namespace(user: str, conversation_id: str | None = None) -> tuple[str, ...]:
    """The namespace of a user's working memory, or of one of their conversations'."""
    base = ("users", user, "working")
    return base if conversation_id is None else (*base, conversation_id)


# -- namespaces (pure) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One concrete namespace: a user's facts or one working-memory document."""

    user: str
    kind: Literal["facts", "working"]
    conversation_id: str | None = None

    @property
    def namespace(self) -> tuple[str, ...]:
        if self.kind == "facts":
            return facts_namespace(self.user)
        return working_namespace(self.user, self.conversation_id)


SHAPES = (
    '("users", user, "facts"), ("users", user, "working") '
    'or ("users", user, "working", conversation_id)'
)


def parse_namespace(namespace: tuple[str, ...]) -> Target | None:
    """The namespace as a target, or None when it is outside the mapping."""
    ns = tuple(namespace)
    if len(ns) == 3 and ns[0] == "users" and ns[2] == "facts":
        return Target(ns[1], "facts")
    if len(ns) in (3, 4) and ns[0] == "users" and ns[2] == "working":
        return Target(ns[1], "working", ns[3] if len(ns) == 4 else None)
    return None


def required_target(namespace: tuple[str, ...]) -> Target:
    target = parse_namespace(namespace)
    if target is None:
        raise InvalidInput(
            f"MemstrataStore cannot store under {tuple(namespace)!r}; namespaces are {SHAPES}",
            field="namespace",
        )
    return target


def enumerable(prefix: tuple[str, ...]) -> bool:
    """Whether some namespace of the mapping starts with ``prefix``."""
    if len(prefix) > 4 or (len(prefix) == 4 and prefix[2] != "working"):
        return False
    if prefix[:1] not in ((), ("users",)):
        return False
    return len(prefix) < 3 or prefix[2] in ("facts", "working")


def matches_condition(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True)) if path else True


def leading_labels(conditions: tuple[MatchCondition, ...]) -> tuple[str, ...]:
    """The concrete labels a listing's prefix condition starts with (up to a wildcard)."""
    for cond in conditions:
        if cond.match_type == "prefix":
            return tuple(takewhile(lambda label: label != "*", cond.path))
    return ()
