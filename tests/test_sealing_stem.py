"""The sealed keyword index stems as the plain one does: the sealer hashes Porter stems, the
same algorithm SQLite's FTS5 ``porter`` tokenizer applies, so turning encryption on does
not change which messages a query's words match."""

from __future__ import annotations

import sqlite3

import pytest

from memstrata import sealing

pytest.importorskip("snowballstemmer")

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
