"""Retention as a periodic job: session messages, audit rows and finished long-running operations older than
their retention are deleted, and the text of audit rows older than the text's retention is erased (their metadata
stays until the rows go), every `interval_s`, not only at start.

A retention of None or 0 days keeps those records (or that text) forever. A purge that fails (the database is
down) is logged and tried again at the next interval; the job never stops on an error. Replicas sharing one database may all run
the job: a DELETE by age is idempotent, so overlapping purges only repeat work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from ragsvc.errors import RagError
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import utc_now
from ragsvc.storage.operations import OperationStore
from ragsvc.storage.sessions import SessionStore

DEFAULT_INTERVAL_S = 3600.0
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Purged:
    """Rows deleted by one purge."""

    session_messages: int = 0
    audit_rows: int = 0
    audit_texts: int = 0  # rows whose text was erased (the rows stay)
    operations: int = 0


class RetentionJob:
    """`start()` purges at once and then every `interval_s`; `stop()` ends the job (awaiting a purge in flight).
    `clock` gives "now" for the cutoffs and `sleep` waits between purges: tests inject both."""

    def __init__(
        self,
        *,
        sessions: SessionStore | None = None,
        session_retention_days: float | None = None,
        answers: AnswerLog | None = None,
        audit_retention_days: float | None = None,
        audit_text_retention_days: float | None = None,
        operations: OperationStore | None = None,
        operation_retention_days: float | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"the retention interval must be positive, not {interval_s}")
        self._sessions = sessions if session_retention_days else None
        self._session_days = session_retention_days or 0.0
        self._answers = answers if audit_retention_days else None
        self._audit_days = audit_retention_days or 0.0
        self._answer_texts = answers if audit_text_retention_days else None
        self._audit_text_days = audit_text_retention_days or 0.0
        self._operations = operations if operation_retention_days else None
        self._operation_days = operation_retention_days or 0.0
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self.runs = 0  # purges attempted, failed ones included
        self.last: Purged | None = None  # the last purge that succeeded

    async def purge_once(self) -> Purged:
        """Delete what is past retention now; DatabaseUnavailable when the database cannot be reached."""
        now = self._clock()
        purged = Purged(
            session_messages=await self._sessions.purge(retention_days=self._session_days, now=now)
            if self._sessions is not None else 0,
            audit_rows=await self._answers.purge(retention_days=self._audit_days, now=now)
            if self._answers is not None else 0,
            audit_texts=await self._answer_texts.purge_text(retention_days=self._audit_text_days, now=now)
            if self._answer_texts is not None else 0,
            operations=await self._operations.purge(retention_days=self._operation_days, now=now)
            if self._operations is not None else 0,
        )  # fmt: skip
        self.last = purged
        return purged

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="retention purge")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task})  # the job's own CancelledError stays in it; a cancel of stop() propagates

    async def _run(self) -> None:
        while True:
            self.runs += 1
            try:
                purged = await self.purge_once()
            except RagError as exc:
                _log.warning("retention purge failed, retrying in %g s: %s", self.interval_s, exc)
            else:
                if purged.session_messages or purged.audit_rows or purged.audit_texts or purged.operations:
                    _log.info("retention purge: %d session messages, %d audit rows, the text of %d audit rows, "
                              "%d operations", purged.session_messages, purged.audit_rows, purged.audit_texts,
                              purged.operations)  # fmt: skip
            await self._sleep(self.interval_s)
