"""Tables for people in the terminal: stored content shown as it is, ids kept whole.

Every cell is plain text: content such as ``[/INST]`` or ``[b]`` is shown, never read as
rich markup (which would fail or restyle it). Id columns never wrap or shorten: an id is
what the next command takes, so it must survive a copy from an 80-column terminal; the
other columns fold to make room.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Column, Table
from rich.text import Text

__all__ = ["ID_HEADERS", "PlainTable", "cell", "new_table"]

#: Headers of the columns that hold ids (whole, never wrapped).
ID_HEADERS = frozenset({"id", "leaf", "parent", "job", "conversation", "fact", "key"})


def cell(value: Any) -> RenderableType:
    """A cell: rich renderables as they are, anything else as plain text (no markup)."""
    if value is None:
        return Text("")
    if isinstance(value, str):
        return Text(value)
    if hasattr(value, "__rich_console__") or hasattr(value, "__rich__"):
        return value  # type: ignore[no-any-return]
    return Text(str(value))


class PlainTable(Table):
    """A rich table whose string cells are text, never markup."""

    def add_row(self, *renderables: Any, **options: Any) -> None:
        super().add_row(*(cell(v) for v in renderables), **options)


def new_table(*headers: str, ids: Iterable[str] | None = None, **options: Any) -> PlainTable:
    """A table whose id columns (``ids``, by default those named in ``ID_HEADERS``) never
    wrap, and whose other columns fold rather than end in "…"."""
    keep = ID_HEADERS if ids is None else frozenset(ids)
    columns = [
        Column(h, no_wrap=True, overflow="ignore", min_width=len(h))
        if h in keep
        else Column(h, overflow="fold")
        for h in headers
    ]
    options.setdefault("box", box.SIMPLE_HEAD)
    return PlainTable(*columns, **options)
