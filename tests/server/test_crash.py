"""kill -9 of a real `ragsvc serve` in the middle of a load run (16 clients asking without pause, killed once they
hold 100 answers): every answer a client received has its audit row, on the embedded SQLite default and on
PostgreSQL. The row is committed before the final message is sent, so no crash can separate the two; rows of
answers that were in flight at the kill (committed, never delivered) may be there too. The numbers are printed
(run with -s to see them).

At the 30-60 answers a second two busy cores serve, few answers are between their commit and their delivery at
the moment of a kill, so this end-to-end check alone would rarely catch a row written after its answer; the same
property at thousands of answers a second, which fails at once when rows are only queued, is
tests/storage/test_crash.py."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from ragsvc.storage.database import open_database
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.polling import eventually
from tests.support.servers import connected, serve_process

CLIENTS = 16
ANSWERS_BEFORE_THE_KILL = 100  # the load runs until clients have this many answers, then the process is killed
QUESTIONS = ("What happens on SIGTERM?", "How are documents chunked?", "What is the confidence score?",
             "Which status code does a rate-limited call get?", "Who won the football world cup in 1954?")  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_every_answer_received_before_a_kill_9_has_its_audit_row(
    backend: str, tmp_path: Path, demo_index: Callable[[Path], Path], request: pytest.FixtureRequest
) -> None:
    data_dir = demo_index(tmp_path / "data")
    records = str(data_dir / "ragsvc.sqlite3") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    env = {"RAG_CACHE_MAX_ENTRIES": "0", "RAG_API_RATE_LIMIT": "0", "RAG_MAX_CONCURRENT_REQUESTS": str(2 * CLIENTS)}
    if backend == "postgresql":
        env["RAG_DATABASE_URL"] = records
    received: set[str] = set()
    failed: Counter[str] = Counter()
    killed = asyncio.Event()

    async with serve_process(data_dir, env) as served, connected(served.address) as stubs:

        async def client(n: int) -> None:
            for asked in range(n, 1_000_000):
                try:
                    reply = await stubs.rag.Ask(pb.AskRequest(query=QUESTIONS[asked % len(QUESTIONS)]), timeout=30)
                except grpc.aio.AioRpcError as exc:
                    failed[f"{'after' if killed.is_set() else 'before'} the kill: {exc.code().name}"] += 1
                    return
                received.add(reply.answer.request_id)

        clients = [asyncio.ensure_future(client(n)) for n in range(CLIENTS)]
        started = time.monotonic()
        await eventually(lambda: len(received) >= ANSWERS_BEFORE_THE_KILL or failed, within_s=90, every_s=0.005)
        load_s = time.monotonic() - started
        served.process.send_signal(signal.SIGKILL)  # the clients keep asking: calls are in flight
        killed.set()
        await served.exited()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*clients), 30)

    database = await open_database(records)
    rows = {row["request_id"] for row in await database.fetch_all("SELECT request_id FROM answers")}
    await database.aclose()
    print(f"\n{backend}: kill -9 after {load_s:.1f} s of {CLIENTS} clients: {len(received)} answers received, "
          f"{len(rows)} audit rows, {len(received - rows)} answers without a row, {len(rows - received)} rows of "
          f"answers not received (in flight at the kill); calls that failed: {dict(failed)}")  # fmt: skip
    assert not [reason for reason in failed if reason.startswith("before")], failed
    assert len(received) >= ANSWERS_BEFORE_THE_KILL
    assert received <= rows, f"answers a client received without an audit row: {sorted(received - rows)[:5]}"
