"""Group commit: rows of one INSERT written in shared transactions, with no fixed delay.

A row handed over while no transaction is in flight is written at once, alone. Rows handed over while one is in
flight wait for it and then go, together, in the next one. So a lone writer pays one transaction, and N
concurrent writers pay about two transactions' time each while the database sees far fewer than N commits.

`commit(row)` returns once the row's transaction has committed and raises DatabaseUnavailable when it failed;
`enqueue(row)` hands a row over without waiting (a failure is then only logged). `drain()` waits for both.

On a database that can commit a short write at once on the event loop's thread (`WritesNow`: SQLite, see
storage/sqlite.py), a row handed over while no transaction is in flight is written that way, before `commit` or
`enqueue` returns: no task, no future, no worker thread. Rows then share transactions only while one is in flight
in a worker thread (when the database declined to write at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ragsvc.errors import RagError
from ragsvc.storage.backend import Backend

_log = logging.getLogger(__name__)


@runtime_checkable
class WritesNow(Protocol):
    def execute_many_now(self, sql: str, rows: Iterable[Sequence[Any]]) -> bool:
        """`execute_many` on the calling thread when it needs no waiting: False (nothing done) when it would."""
        ...


class GroupCommitter:
    def __init__(self, database: Backend, sql: str, *, what: str = "rows", at_once: bool = True) -> None:
        """`at_once`: write a row at once when the database can (`WritesNow`) and no transaction is in flight."""
        self._db = database
        self._now = database if at_once and isinstance(database, WritesNow) else None
        self._sql = sql
        self._what = what  # named in the log line of a failed transaction
        self._pending: list[Sequence[Any]] = []
        self._pending_done: asyncio.Future[None] | None = None  # resolved when the pending rows are committed
        self._writer: asyncio.Task[None] | None = None
        self.transactions = 0  # committed or failed; for tests and measurements

    async def commit(self, row: Sequence[Any]) -> None:
        """Write `row` and return once it is committed; DatabaseUnavailable when its transaction failed. A
        cancelled caller leaves the row to be committed all the same."""
        if not self._written_now(row):
            await asyncio.shield(self._add(row))

    def enqueue(self, row: Sequence[Any]) -> None:
        """Write `row` with the next transaction without waiting for it."""
        try:
            if self._written_now(row):
                return
        except RagError:
            return  # logged
        self._add(row)

    def _written_now(self, row: Sequence[Any]) -> bool:
        """Whether `row` was committed at once, alone (see the module's docstring); DatabaseUnavailable when that
        transaction failed (logged, as a failed batch is)."""
        if self._now is None or (self._writer is not None and not self._writer.done()):
            return False
        try:
            written = self._now.execute_many_now(self._sql, [row])
        except RagError as exc:
            self.transactions += 1
            _log.error("the %s lost 1 rows: %s", self._what, exc)
            raise
        self.transactions += written
        return written

    async def drain(self) -> None:
        """Wait until every row handed over so far is committed (or its failure logged)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    def _add(self, row: Sequence[Any]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if self._pending_done is None:
            self._pending_done = loop.create_future()
            # Marks a failure as seen, so that rows nobody waits for do not log "exception never retrieved".
            self._pending_done.add_done_callback(_retrieve)
        self._pending.append(row)
        done = self._pending_done
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write())
        return done

    async def _write(self) -> None:
        """One transaction per batch of pending rows, until none are pending."""
        while self._pending:
            rows, done = self._pending, self._pending_done
            self._pending, self._pending_done = [], None
            assert done is not None
            try:
                await self._db.execute_many(self._sql, rows)
            except Exception as exc:  # noqa: BLE001 - whatever failed the batch, its waiters must hear of it
                _log.error("the %s lost %d rows: %s", self._what, len(rows), exc,
                           exc_info=not isinstance(exc, RagError))  # fmt: skip
                done.set_exception(exc)
            except BaseException:  # cancelled (the loop is shutting down): the waiters must not hang
                done.set_exception(RuntimeError(f"the {self._what} writer was cancelled"))
                raise
            else:
                done.set_result(None)
            finally:
                self.transactions += 1


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
