"""kill -9 in the middle of a load: every answer that left the process has its audit row (committed before the
answer was handed out), on SQLite and on PostgreSQL. The audit log alone, at thousands of answers a second, so that
many answers are in flight at the kill: it fails at once when rows are only queued (the same check through a real
`ragsvc serve` and gRPC clients: tests/server/test_crash.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from ragsvc.storage.database import open_database

RUN_S = 1.5


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_every_answer_handed_out_before_a_kill_has_its_row(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "audit.sqlite3") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    await (await open_database(target)).aclose()  # migrated before the writer starts, so that it only writes
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.storage.crash_writer", target,
        stdout=asyncio.subprocess.PIPE, cwd=Path(__file__).parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    assert process.stdout is not None
    assert (await asyncio.wait_for(process.stdout.readline(), 30)).strip() == b"ready"
    handed_out: set[str] = set()

    async def read() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            if line.strip():
                handed_out.add(line.strip().decode())

    reader = asyncio.ensure_future(read())
    await asyncio.sleep(RUN_S)
    process.send_signal(signal.SIGKILL)  # mid-run: requests in flight, rows being committed
    await process.wait()
    await asyncio.wait_for(reader, 10)  # to the end of the pipe: every answer that left before the kill
    database = await open_database(target)
    rows = {row["request_id"] for row in await database.fetch_all("SELECT request_id FROM answers")}
    await database.aclose()
    print(f"{backend}: {len(handed_out)} answers handed out, {len(rows)} rows, "
          f"{len(rows - handed_out)} rows of answers that never left")  # fmt: skip
    assert len(handed_out) > 100, "the load ran"
    assert handed_out <= rows, f"answers without a row: {sorted(handed_out - rows)[:5]}"
