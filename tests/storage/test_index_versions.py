"""Each tenant's index version on both backends, and on SQLite read on the event loop's thread while the connection
is free, through the worker thread while it is busy."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from ragsvc.storage.backend import Backend
from ragsvc.storage.index_versions import IndexVersions
from ragsvc.storage.sqlite import SQLiteDatabase


async def test_a_tenant_starts_at_0_and_each_change_raises_its_version_alone(database: Backend) -> None:
    versions = IndexVersions(database)

    assert await versions.current("acme") == "0"
    await versions.bump("acme")
    await versions.bump("acme")
    await versions.bump("globex")

    assert (await versions.current("acme"), await versions.current("globex"), await versions.current("initech")) == (
        "2",
        "1",
        "0",
    )


async def test_on_sqlite_the_version_is_read_at_once_or_after_the_connections_work_in_a_worker(tmp_path: Path) -> None:
    path = tmp_path / "records.sqlite3"
    database = SQLiteDatabase.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        versions = IndexVersions(database)
        await versions.bump("acme")
        assert database.fetch_all_now("SELECT version FROM index_versions WHERE tenant_id = ?", ("acme",)) == [{"version": 1}], (
            "the connection is free: read on this thread"
        )

        other.execute("BEGIN IMMEDIATE")  # holds the write lock: the next bump waits for it in a worker thread
        bump = asyncio.ensure_future(versions.bump("acme"))
        await asyncio.sleep(0.2)
        assert database.fetch_all_now("SELECT 1") is None, "the connection is busy in the worker: nothing done"
        reading = asyncio.ensure_future(versions.current("acme"))
        await asyncio.sleep(0.1)
        assert not reading.done(), "it waits for the worker, not on the event loop's thread"
        other.execute("COMMIT")

        await bump
        assert await reading == "2", "read once the bump, which held the connection, was done"
    finally:
        other.close()
        await database.aclose()
