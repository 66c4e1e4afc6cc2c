"""The LLM server's parallel slots, taken in turn: answers first, side calls after.

A llama.cpp server decodes as many requests at once as it has slots (`total_slots` in its `GET /props`; one by
default) and queues the rest. A side call around an answer (classifying the question, the model's self-score,
follow-up questions) that reaches a one-slot server while an answer waits would run first and delay that answer's
first token by a whole generation. So a generator whose server reports its slots sends no more requests at once
than it has, and hands a freed slot to a waiting answer before any waiting side call; a server that reports none
(vLLM, Ollama, OpenAI) gets every request at once, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class SlotGate:
    """`size` slots; `held` waits for one (answers before side calls, each in arrival order) and frees it after."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a server has at least one slot")
        self.size = size
        self._free = size
        self._answers: deque[asyncio.Future[None]] = deque()
        self._side_calls: deque[asyncio.Future[None]] = deque()

    @contextlib.asynccontextmanager
    async def held(self, *, side_call: bool) -> AsyncIterator[None]:
        await self._take(side_call)
        try:
            yield
        finally:
            self._give_back()

    async def _take(self, side_call: bool) -> None:
        if self._free and not self._answers and (not side_call or not self._side_calls):
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        queue = self._side_calls if side_call else self._answers
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # the slot was handed over as the waiter left: pass it on
                self._give_back()
            else:
                with contextlib.suppress(ValueError):  # a slot handed out meanwhile skipped it already
                    queue.remove(waiter)
            raise

    def _give_back(self) -> None:
        for queue in (self._answers, self._side_calls):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._free += 1


__all__ = ["SlotGate"]
