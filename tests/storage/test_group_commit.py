"""Group commit on both backends: batching, a failed batch failing only its own rows, cancelled waiters."""

from __future__ import annotations

import asyncio

import pytest

from ragsvc.errors import DatabaseUnavailable
from ragsvc.storage.backend import Backend
from ragsvc.storage.group_commit import GroupCommitter

INSERT = "INSERT INTO users (id, email) VALUES (?, ?)"


async def ids(database: Backend) -> list[str]:
    return [row["id"] for row in await database.fetch_all("SELECT id FROM users ORDER BY id")]


async def test_a_failed_batch_fails_its_own_rows_only(database: Backend) -> None:
    rows = GroupCommitter(database, INSERT)
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
    rows = GroupCommitter(database, INSERT)
    waiter = asyncio.ensure_future(rows.commit(("u1", "a@example.com")))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await rows.drain()
    assert await ids(database) == ["u1"]


async def test_enqueued_rows_are_committed_by_drain_and_failures_only_logged(database: Backend, caplog) -> None:
    rows = GroupCommitter(database, INSERT, what="directory")
    rows.enqueue(("u1", "a@example.com"))
    rows.enqueue(("u1", "again@example.com"))  # the same key in the same batch: the batch fails
    await rows.drain()
    assert await ids(database) == []
    assert "the directory lost 2 rows" in caplog.text
    rows.enqueue(("u2", "b@example.com"))
    await rows.drain()
    assert await ids(database) == ["u2"]
