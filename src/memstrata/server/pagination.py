"""Cursor pagination: ``?limit=&cursor=`` in, ``{items, next_cursor}`` out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Query

from memstrata.types import Page

__all__ = ["Cursor", "Limit", "page_body"]

T = TypeVar("T")

Limit = Annotated[
    int | None,
    Query(ge=1, description="Items per page (default 50, at most 500)."),
]
Cursor = Annotated[
    str | None,
    Query(description="The `next_cursor` of the previous page; omit for the first page."),
]


def page_body(page: Page[T], render: Callable[[T], dict[str, Any]]) -> dict[str, Any]:
    return {"items": [render(item) for item in page.items], "next_cursor": page.next_cursor}
