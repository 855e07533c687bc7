"""Checks on a node turn before it is buffered, and the test for a repeated one (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.errors import InvalidInput
from memstrata.nodes.layout import Turn, check_id
from memstrata.storage.records import check_text
from memstrata.types import FileRef

__all__ = ["FileLike", "TurnInput", "check_turn", "held_turn"]

FileLike = FileRef | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A turn's fields once checked (no id or timestamp yet)."""

    message_id: str
    parent_message_id: str | None
    user_content: str
    user_files: tuple[FileRef, ...]
    assistant_content: str
    assistant_files: tuple[FileRef, ...]


def _files(files: Sequence[FileLike] | None, field: str, belongs_to: str) -> tuple[FileRef, ...]:
    out = []
    for f in files or ():
        if isinstance(f, FileRef):
            # The list says whose file it is unless the reference says so itself.
            explicit = "belongs_to" in f.model_fields_set
            out.append(f if explicit else f.model_copy(update={"belongs_to": belongs_to}))
            continue
        try:
            out.append(FileRef.model_validate({"belongs_to": belongs_to, **dict(f)}))
        except ValueError as exc:
            raise InvalidInput(f"{field}: {exc}", field=field) from None
    return tuple(out)


def check_turn(
    *,
    message_id: str,
    parent_message_id: str | None,
    user_content: str,
    user_files: Sequence[FileLike] | None,
    assistant_content: str,
    assistant_files: Sequence[FileLike] | None,
    max_content_bytes: int,
) -> TurnInput:
    """The turn's fields, or InvalidInput naming the first bad one."""
    check_id(message_id, "message_id")
    if parent_message_id is not None and parent_message_id != "":
        check_id(parent_message_id, "parent_message_id")
    for name, text in (
        ("user_content", user_content),
        ("assistant_content", assistant_content),
    ):
        if not isinstance(text, str):
            raise InvalidInput(f"{name} must be a string", field=name)
        check_text(text, name)
        if len(text.encode()) > max_content_bytes:
            raise InvalidInput(f"{name} is over the content size limit", field=name)
    ufiles = _files(user_files, "user_files", "user")
    afiles = _files(assistant_files, "assistant_files", "assistant")
    if not user_content and not ufiles:
        raise InvalidInput("a turn needs user_content or user_files", field="user_content")
    return TurnInput(
        message_id, parent_message_id or None, user_content, ufiles, assistant_content, afiles
    )


def held_turn(buffer: Iterable[Turn], new: TurnInput) -> Turn | None:
    """The buffered turn ``new`` repeats (a retried call adds nothing), or None."""
    for held in buffer:
        if (
            held.message_id == new.message_id
            and held.parent_message_id == new.parent_message_id
            and held.user_content == new.user_content
            and held.user_files == new.user_files
            and held.assistant_content == new.assistant_content
            and held.assistant_files == new.assistant_files
        ):
            return held
    return None
