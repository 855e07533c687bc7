"""``mentions_time`` answers ASCII text from a lowercased copy: the same answers as the
case-insensitive expressions, whatever the case, and non-ASCII text takes those."""

from __future__ import annotations

import pytest

from memstrata.recall.text import _TIME_MENTION, _mentions_time_kept, mentions_time

SAMPLES = [
    "We met LAST SUMMER in Lisbon.",
    "back in 2019",
    "On the 3RD we left",
    "Yesterday was long",
    "a couple of Weeks later",
    "Since then nothing",
    "The other day I saw it",
    "Nothing to see here",
    "Sundays are quiet",  # "sunday" is not a whole word here
    "TODAY",
    "It was MAY, not June",
    "Ich war im März dort",  # non-ASCII: the case-insensitive expressions decide
    "ſince when",  # long s: folds to 's' only case-insensitively
    "Kelvin: \u212ago",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_same_answer_as_the_case_insensitive_expressions(text: str) -> None:
    assert mentions_time(text) is (_TIME_MENTION.search(text) is not None)


def test_upper_and_lower_case_alike() -> None:
    assert mentions_time("NEXT WEEKEND")
    assert mentions_time("next weekend")
    assert not mentions_time("NOTHING HERE")
    assert not mentions_time("nothing here")


def test_a_kept_answer_is_the_searched_one_and_long_texts_are_not_kept() -> None:
    for text in SAMPLES:
        first, again = mentions_time(text), mentions_time(text)
        assert first is again is (_TIME_MENTION.search(text) is not None)
    long = "word " * 300 + "yesterday"
    before = _mentions_time_kept.cache_info().currsize
    assert mentions_time(long) is True
    assert mentions_time(long[:-9]) is False
    assert _mentions_time_kept.cache_info().currsize == before
