"""The owners' token caches stay within their bounds: by owners, by words in all, and
per owner; the most recently used owners stay."""

from __future__ import annotations

import threading
from functools import partial

from memstrata import sealing
from memstrata.sealing import TermCaches


def terms(made: list[str], owner: str) -> sealing._Terms:
    made.append(owner)
    return sealing._Terms(partial(str.upper))


def fill(t: sealing._Terms, n: int, tag: str) -> None:
    t.words(f"{tag}{i}" for i in range(n))


def test_the_least_recently_used_owner_goes_first() -> None:
    made: list[str] = []
    caches = TermCaches(owners=3, words=10_000, check_every=1_000)
    for owner in "abc":
        caches.get(owner, partial(terms, made, owner))
    caches.get("a", partial(terms, made, "a"))  # a is used again: b is now the oldest
    caches.get("d", partial(terms, made, "d"))
    assert len(caches) == 3
    assert made == ["a", "b", "c", "d"]
    caches.get("a", partial(terms, made, "a"))
    caches.get("c", partial(terms, made, "c"))
    assert made == ["a", "b", "c", "d"], "a and c were kept"
    caches.get("b", partial(terms, made, "b"))
    assert made[-1] == "b", "b had gone"


def test_words_in_all_are_bounded() -> None:
    made: list[str] = []
    caches = TermCaches(owners=100, words=1_000, check_every=1)
    for n in range(20):
        owner = f"o{n}"
        fill(caches.get(owner, partial(terms, made, owner)), 300, owner)
        # Checked at every use here: what the owners remember never passes the bound
        # by more than the newest owner's words.
        assert caches.size() <= 1_000 + 300
    assert len(caches) <= 4


def test_the_words_are_checked_between_new_owners_too() -> None:
    made: list[str] = []
    caches = TermCaches(owners=100, words=1_000, check_every=4)
    for owner in ("a", "b", "c"):
        fill(caches.get(owner, partial(terms, made, owner)), 600, owner)
    for _ in range(4):  # the same owner only: the check comes on the fourth use
        caches.get("c", partial(terms, made, "c"))
    assert caches.size() <= 1_000
    assert made == ["a", "b", "c"], "c, the newest, was kept"


def test_one_owner_starts_afresh_past_its_own_bound() -> None:
    made: list[str] = []
    caches = TermCaches()
    first = caches.get("a", partial(terms, made, "a"))
    fill(first, sealing._OWNER_WORDS + 1, "w")
    again = caches.get("a", partial(terms, made, "a"))
    assert again is not first
    assert again.size() == 0
    assert made == ["a", "a"]


def test_a_discarded_owner_is_made_again() -> None:
    made: list[str] = []
    caches = TermCaches()
    caches.get("a", partial(terms, made, "a"))
    caches.discard("a")
    caches.discard("nobody")
    caches.get("a", partial(terms, made, "a"))
    assert made == ["a", "a"]


def test_many_threads_keep_the_bound() -> None:
    caches = TermCaches(owners=8, words=5_000, check_every=16)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for n in range(300):
                owner = f"o{(n * 7 + k) % 40}"
                fill(caches.get(owner, partial(sealing._Terms, str.upper)), 20, owner)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(caches) <= 8


def test_plain_tokens_are_the_same_from_a_cache_made_afresh() -> None:
    before = sealing.plain_index_terms("t", "u", "Running runners ran")
    sealing._PLAIN.discard(("t", "u"))
    assert sealing.plain_index_terms("t", "u", "Running runners ran") == before
