"""Tables for people in the terminal: stored content shown as it is, ids kept whole.

Every cell is plain text: content such as ``[/INST]`` or ``[b]`` is shown, never read as
rich markup (which would fail or restyle it). Id columns never wrap or shorten: an id is
what the next command takes, so it must survive a copy from an 80-column terminal; the
other columns fold to make room.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import copy
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
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
    """A rich table whose string cells are text, never markup.

    Too wide for the terminal (ids are kept whole), it leaves columns out rather than
    squeeze every column to a letter or two: first the ids after the first one, then the
    short columns from the right; never the first column nor the last (the text). The
    caption names what was left out; ``--json`` has it all."""

    def add_row(self, *renderables: Any, **options: Any) -> None:
        super().add_row(*(cell(v) for v in renderables), **options)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fitted = self._fitted(options.max_width)
        if fitted is self:
            yield from super().__rich_console__(console, options)
        else:
            yield fitted

    def _fitted(self, width: int) -> Table:
        kept = list(self.columns)
        if _needed(kept) <= width or len(kept) <= 2:
            return self
        ids = [c for c in kept if c.no_wrap]
        order = ids[1:] + [c for c in reversed(kept[1:-1]) if not c.no_wrap]
        dropped: list[str] = []
        for column in order:
            if _needed(kept) <= width:
                break
            kept.remove(column)
            dropped.append(str(column.header))
        table = Table(
            *(copy(c) for c in kept),
            box=self.box,
            caption=f"left out to fit: {', '.join(dropped)} (--json has them)",
            caption_justify="left",
        )
        table.rows = list(self.rows)
        return table


def _needed(columns: list[Column]) -> int:
    """The width these columns need: ids whole, the text (last) a few words, the others
    a short word; plus padding."""
    total = 0
    for i, c in enumerate(columns):
        longest = max((len(str(v)) for v in c.cells), default=0)
        longest = max(longest, len(str(c.header)))
        room = 24 if i == len(columns) - 1 else 9
        total += (longest if c.no_wrap else min(longest, room)) + 2
    return total + 2


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
