"""Ids: UUIDv7 text in its canonical form, strictly increasing within a process."""

from __future__ import annotations

import uuid

from memstrata.ids import new_id, parse_id


def test_new_ids_are_canonical_uuid7_text_in_creation_order() -> None:
    made = [new_id() for _ in range(5000)]
    for text in made:
        value = uuid.UUID(text)
        assert str(value) == text
        assert parse_id(text) == text
        assert value.version == 7
        assert value.variant == uuid.RFC_4122
    assert made == sorted(made)
    assert len(set(made)) == len(made)
