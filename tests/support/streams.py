"""Reading async streams in tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import TypeVar

T = TypeVar("T")


async def collect_into(items: list[T], stream: AsyncGenerator[T, None]) -> None:
    """Append each item of `stream` to `items`, closing the stream however it ends: what arrived before a failure
    stays in `items` (so that one statement can sit in `pytest.raises`)."""
    async with contextlib.aclosing(stream):
        async for item in stream:
            items.append(item)
