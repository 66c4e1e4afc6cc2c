"""Waiting for a condition the test can observe but not be told of (a file appearing, a counter reaching zero),
polled, with a deadline: never a fixed sleep standing in for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(condition: Callable[[], object], *, within_s: float, every_s: float = 0.01) -> float:
    """Seconds until `condition()` is true, checked every `every_s`; AssertionError after `within_s`."""
    started = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - started
        if time.monotonic() - started >= within_s:
            raise AssertionError(f"{getattr(condition, '__name__', condition)} did not hold within {within_s} s")
        await asyncio.sleep(every_s)
