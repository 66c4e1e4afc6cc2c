"""Time limits of one request: each stage ends by the earliest of its own budget, the request's total budget
and the caller's deadline, with an error that says which limit it hit."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ragsvc.errors import LLMTimeout, StageTimeout

# Work for a call ends this long before the caller's deadline, so that what the server says (a stage's
# DEADLINE_EXCEEDED naming the stage, WaitOperation's answer) reaches the caller before the caller gives up on its
# own. 50 ms lost that race on a loaded 2-core machine: closing the upstream stream and the event loop's lag took longer.
DEADLINE_MARGIN_S = 0.2


@dataclass(frozen=True, slots=True)
class StageDeadline:
    """When a stage must end (event loop time); `limit` says which limit set it, for the error."""

    stage: str
    at: float
    limit: str

    def expired(self) -> StageTimeout:
        message = f"the {self.stage} stage ran out of time: {self.limit}"
        return LLMTimeout(self.stage, message) if self.stage == "generation" else StageTimeout(self.stage, message)

    @contextlib.asynccontextmanager
    async def bound(self) -> AsyncIterator[None]:
        """The block, cut off at this deadline with `expired()`."""
        try:
            async with asyncio.timeout_at(self.at):
                yield
        except TimeoutError as exc:
            raise self.expired() from exc


@dataclass(frozen=True, slots=True)
class RequestBudget:
    """The request's total budget and the caller's deadline, from which each stage's deadline is set."""

    total_at: float
    caller_deadline: float | None

    @classmethod
    def start(cls, total_s: float, caller_deadline: float | None) -> RequestBudget:
        return cls(asyncio.get_running_loop().time() + total_s, caller_deadline)

    def stage(self, stage: str, budget_s: float, setting: str) -> StageDeadline:
        limits = [
            (asyncio.get_running_loop().time() + budget_s, f"its {budget_s:g} s budget ({setting})"),
            (self.total_at, "the request's total budget (RAG_TOTAL_TIMEOUT_SECONDS)"),
        ]
        if self.caller_deadline is not None:
            limits.append((self.caller_deadline - DEADLINE_MARGIN_S, "the caller's deadline"))
        at, limit = min(limits)
        return StageDeadline(stage, at, limit)


class Clock:
    """Milliseconds since start, and since the previous lap."""

    def __init__(self) -> None:
        self._start = self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = (now - self._last) * 1000, now
        return elapsed

    def total(self) -> float:
        return (time.perf_counter() - self._start) * 1000
