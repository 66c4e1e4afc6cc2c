"""Group commit on both backends: batching, a failed batch failing only its own rows, cancelled waiters; and on
SQLite, rows written at once on the event loop's thread while no transaction is in flight."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.backend import Backend
from ragsvc.storage.group_commit import GroupCommitter
from ragsvc.storage.sqlite import CHECKPOINT_EVERY, SQLiteDatabase

INSERT = "INSERT INTO users (id, email) VALUES (?, ?)"


async def ids(database: Backend) -> list[str]:
    return [row["id"] for row in await database.fetch_all("SELECT id FROM users ORDER BY id")]


async def test_a_failed_batch_fails_its_own_rows_only(database: Backend) -> None:
    rows = GroupCommitter(database, INSERT, at_once=False)
    await rows.commit(("u0", "a@example.com"))
    # In flight: u1. Then, in the next batch together: u2 and a second u0 (taken), which fails that batch.
    first = asyncio.ensure_future(rows.commit(("u1", "b@example.com")))
    await asyncio.sleep(0)
    doomed = [asyncio.ensure_future(rows.commit(row)) for row in (("u2", "c@example.com"), ("u0", "d@example.com"))]
    await first
    for waiter in doomed:
        with pytest.raises(DatabaseUnavailable):
            await waiter
    await rows.commit(("u3", "e@example.com"))
    assert await ids(database) == ["u0", "u1", "u3"]
    assert rows.transactions == 4


async def test_a_cancelled_waiter_leaves_its_row_to_be_committed(database: Backend) -> None:
    rows = GroupCommitter(database, INSERT, at_once=False)
    waiter = asyncio.ensure_future(rows.commit(("u1", "a@example.com")))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await rows.drain()
    assert await ids(database) == ["u1"]


async def test_enqueued_rows_are_committed_by_drain_and_failures_only_logged(database: Backend, caplog) -> None:
    rows = GroupCommitter(database, INSERT, what="directory", at_once=False)
    rows.enqueue(("u1", "a@example.com"))
    rows.enqueue(("u1", "again@example.com"))  # the same key in the same batch: the batch fails
    await rows.drain()
    assert await ids(database) == []
    assert "the directory lost 2 rows" in caplog.text
    rows.enqueue(("u2", "b@example.com"))
    await rows.drain()
    assert await ids(database) == ["u2"]


def committed(path: Path) -> list[str]:
    """The ids committed in the SQLite file at `path`, read by a connection of this test's own, synchronously."""
    with sqlite3.connect(path) as reader:
        return [row[0] for row in reader.execute("SELECT id FROM users ORDER BY id")]


async def test_on_sqlite_a_row_is_committed_before_commit_or_enqueue_returns(tmp_path: Path, caplog) -> None:
    path = tmp_path / "records.sqlite3"
    database = SQLiteDatabase.open(path)
    try:
        rows = GroupCommitter(database, INSERT, what="directory")
        rows.enqueue(("u1", "a@example.com"))
        assert committed(path) == ["u1"], "committed with no await in between"
        await rows.commit(("u2", "b@example.com"))
        with pytest.raises(DatabaseUnavailable):
            await rows.commit(("u2", "again@example.com"))  # alone in its transaction: it fails alone
        assert committed(path) == ["u1", "u2"] and rows.transactions == 3
        assert "the directory lost 1 rows" in caplog.text
    finally:
        await database.aclose()


async def test_on_sqlite_a_row_waits_in_a_worker_thread_while_another_connection_writes(tmp_path: Path) -> None:
    path = tmp_path / "records.sqlite3"
    database = SQLiteDatabase.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        rows = GroupCommitter(database, INSERT)
        other.execute("BEGIN IMMEDIATE")  # holds the write lock
        waiter = asyncio.ensure_future(rows.commit(("u1", "a@example.com")))
        await asyncio.sleep(0.2)  # the event loop runs meanwhile: nothing waits for the lock on its thread
        assert not waiter.done()
        other.execute("COMMIT")
        await waiter
        assert committed(path) == ["u1"]
    finally:
        other.close()
        await database.aclose()


async def test_on_sqlite_every_checkpoint_is_made_in_a_worker_thread(tmp_path: Path) -> None:
    database = SQLiteDatabase.open(tmp_path / "records.sqlite3")
    try:
        written = [database.execute_many_now(INSERT, [(f"u{n}", "a@example.com")]) for n in range(CHECKPOINT_EVERY)]
        assert all(written)
        assert not database.execute_many_now(INSERT, [("late", "a@example.com")]), "due a checkpoint: declined"
        await database.execute_many(INSERT, [("late", "a@example.com")])  # written, then the checkpoint
        assert database.execute_many_now(INSERT, [("next", "a@example.com")])
        # The WAL was checkpointed whole, so the last write started it over: a few frames, not hundreds.
        [wal] = await database.fetch_all("PRAGMA wal_checkpoint(PASSIVE)")
        assert wal["busy"] == 0 and wal["log"] < 10, wal
    finally:
        await database.aclose()
