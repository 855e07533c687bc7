"""The keyword index's tokens: the words SQLite's FTS5 ``unicode61 remove_diacritics 2``
tokenizer finds, stemmed by Porter (the algorithm of FTS5's ``porter``), behind their
owner's prefix, or hashed with the owner's term key when sealing. Both are made from the
same words and stems, so turning encryption on does not change which messages a query's
words match."""

from __future__ import annotations

import sqlite3

import pytest

from memstrata import sealing

WORDS = tuple(
    " ".join(
        "hiking hikes hiked hiker running runs ran adopted adopting adoption puppies puppy "
        "conferences conference painting paintings painted gardening gardens volunteering "
        "volunteered relational generalization happiness hopefully organising organization "
        "classes class bonus analysis caresses ponies ties caress cats feed agreed plastered "
        "motoring sing conflated troubled sized hopping tanned falling hissing fizzed failing "
        "filing happy sky an is at to 2023 v2 x86 matérn café naïve"
    ).split()
)


def _fts5_stems(words: tuple[str, ...]) -> dict[str, str]:
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE f USING fts5(b, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.executemany("INSERT INTO f (rowid, b) VALUES (?, ?)", list(enumerate(words, 1)))
    rows = db.execute("SELECT f.b, v.term FROM v JOIN f ON f.rowid = v.doc").fetchall()
    return {b: t for b, t in rows}


def test_the_sealed_index_stems_words_as_fts5_porter_does() -> None:
    expected = _fts5_stems(WORDS)
    got = {w: sealing.stem(sealing.fold(w.casefold())) for w in WORDS}
    assert got == expected


def test_words_fts5_leaves_alone_are_left_alone() -> None:
    assert sealing.stem("is") == "is"
    assert sealing.stem("x" * 65 + "ing") == "x" * 65 + "ing"


def _fts5_words(text: str) -> list[str]:
    """The words FTS5's ``unicode61 remove_diacritics 2`` tokenizer finds in ``text``, in
    order (no stemming)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(b, tokenize = 'unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.execute("INSERT INTO f (rowid, b) VALUES (1, ?)", (text,))
    return [t for (t,) in db.execute("SELECT term FROM v ORDER BY offset")]


TEXTS = (
    "Hiking with my dog, Pixel (a Maine Coon? no: a cat!) -- 3 times/week.",
    "snake_case and kebab-case, e-mail a@b.c; x86_64 v2.0 C++ #tags 100% $5 ~tilde",
    "Tabs\tand\nnewlines\r\nand   spaces, 'quotes' \"double\" [brackets] {braces} <angle>",
    "MIXED case WORDS Running RUNS ran",
    # Not ASCII: the other path. (Case folding makes "ß" "ss", where FTS5 keeps "ß"; the
    # sealed index folds its queries alike, so it only differs from a plain index there.)
    "Un café naïve à São Paulo, Ærø and Zoë",
    "a word too long to index " + "x" * 65 + " and one just short enough " + "y" * 64,
)


@pytest.mark.parametrize("text", TEXTS)
def test_the_sealed_index_hashes_the_words_fts5_finds(text: str) -> None:
    sealer = sealing.Sealer(lambda tenant, user: ("k1", b"\x01" * 32), lambda key_id: None)
    words = [w for w in _fts5_words(text) if len(w) <= 64]
    expected = " ".join(sealer.terms("t", "u", words))
    assert sealer.index_text("t", "u", text) == expected
    assert sealer.index_text("t", "u", text) == expected  # again, from what it remembers
    # Another owner's key hashes the same words to other tokens.
    other = sealing.Sealer(lambda tenant, user: ("k2", b"\x02" * 32), lambda key_id: None)
    assert not set(other.index_text("t", "v", text).split()) & set(expected.split())


@pytest.mark.parametrize("text", TEXTS)
def test_the_plain_index_stems_the_words_fts5_finds_behind_the_owner(text: str) -> None:
    prefix = sealing.owner_prefix("t", "u")
    words = [w for w in _fts5_words(text) if len(w) <= 64]
    expected = [prefix + sealing.stem(w) for w in words]
    assert sealing.plain_index_terms("t", "u", text).split() == expected
    assert sealing.plain_index_terms("t", "u", text).split() == expected  # remembered
    # A query's words meet them; another owner's tokens are others.
    assert set(sealing.query_terms("t", "u", words, owner_tokens=True)) <= set(expected)
    # An index that tokenizes and stems itself (PostgreSQL's) gets the text as is.
    assert sealing.index_terms("t", "u", text) == text
    assert sealing.query_terms("t", "u", words) == words
    assert not set(sealing.plain_index_terms("t", "v", text).split()) & set(expected)


def test_a_folded_word_never_splits_its_token() -> None:
    # "⑴" folds to "(1)": the token keeps letters and digits alone, one token still.
    (token,) = sealing.plain_index_terms("t", "u", "⑴").split()
    assert token.isalnum()
    assert sealing.query_terms("t", "u", ["⑴"], owner_tokens=True) == [token]


def test_the_owner_prefix_is_fixed_length_letters_and_digits() -> None:
    prefixes = {sealing.owner_prefix("t", f"user {i}") for i in range(500)}
    assert len(prefixes) == 500
    assert {len(p) for p in prefixes} == {13}
    assert all(p.isalnum() and p.isascii() and p == p.lower() for p in prefixes)
