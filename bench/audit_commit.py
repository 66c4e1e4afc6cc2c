"""What committing the audit row before the answer costs: the latency `AnswerLog.recorded` adds to each answer.

For each backend (a SQLite file in WAL mode with synchronous=NORMAL, as shipped; PostgreSQL 18 from the test
wheel on loopback with its durable defaults, fsync and synchronous commit on; and the same PostgreSQL with fsync
off, as the tests run it), one request is a short event stream (three deltas 2 ms apart, as from a fast model,
and the final Answer) consumed through `recorded`. The added latency is the time of that consumption minus the
same stream consumed bare; the commit wait is that time minus the former way (the row built and handed over
without waiting for it). Measured
- alone: one request after the other;
- under load: 32 concurrent requesters in a closed loop, with group commit (rows that arrive while a transaction
  is in flight share the next one), and, for reference, with one transaction per row (what group commit saves).

`python -m bench.audit_commit [--requests N]`; results in bench/results/audit_commit-<date>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.stats import summary, write_result
from ragsvc.domain import Answer, Event, TextDelta
from ragsvc.storage.answers import _INSERT, AnswerLog, outcome_of
from ragsvc.storage.backend import Backend
from ragsvc.storage.database import open_database
from tests.storage.samples import answer, question
from tests.support.postgres_server import PostgresServer

CONCURRENCY = 32
FINAL = answer()
# The generator's pace: each delta arrives after this pause (a fast streaming model), so that concurrent
# requests interleave in every variant and the differences between variants are the audit log's own.
DELTA_PAUSE_S = 0.002


async def _events() -> AsyncIterator[Event]:
    for n in range(3):
        await asyncio.sleep(DELTA_PAUSE_S)
        yield TextDelta(f"part {n} ")
    yield FINAL


async def _bare(n: int) -> None:
    async for _ in _events():
        pass


def _recorded(log: AnswerLog) -> Callable[[int], Awaitable[None]]:
    async def ask(n: int) -> None:
        async for _ in log.recorded(question(request_id=f"r{n}"), _events()):
            pass

    return ask


def _queued(log: AnswerLog) -> Callable[[int], Awaitable[None]]:
    """The reference of the former audit log: the row built and handed over, never waited for."""

    async def ask(n: int) -> None:
        asked = question(request_id=f"r{n}")
        async for event in _events():
            if isinstance(event, Answer):
                log._rows.enqueue(log._row(asked, outcome_of(asked, event), answer=event.text))

    return ask


def _row_per_transaction(log: AnswerLog, database: Backend) -> Callable[[int], Awaitable[None]]:
    """The reference without group commit: each request commits its own row (the row the audit log would
    write) in a transaction of its own."""

    async def ask(n: int) -> None:
        asked = question(request_id=f"r{n}")
        async for event in _events():
            if isinstance(event, Answer):
                row = log._row(asked, outcome_of(asked, event), answer=event.text)
                await database.execute_many(_INSERT, [row])

    return ask


async def _timed(ask: Callable[[int], Awaitable[None]], requests: int, concurrency: int) -> tuple[list[float], float]:
    """Per-request milliseconds and requests per second, `concurrency` requesters in a closed loop."""
    latencies: list[float] = []
    numbers = iter(range(requests))

    async def requester() -> None:
        for n in numbers:
            began = time.perf_counter()
            await ask(n)
            latencies.append((time.perf_counter() - began) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(requester() for _ in range(concurrency)))
    return latencies, requests / (time.perf_counter() - began)


def _p50(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def _measure(database: Backend, requests: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for label, concurrency in (("alone", 1), (f"concurrent_{CONCURRENCY}", CONCURRENCY)):
        await _timed(_bare, 50, concurrency)
        bare, _ = await _timed(_bare, requests, concurrency)
        log = AnswerLog(database)
        await _timed(_recorded(log), 50, concurrency)  # warm-up (prepared statements, pool)
        before = log.transactions
        recorded, throughput = await _timed(_recorded(log), requests, concurrency)
        transactions = log.transactions - before
        queued, _ = await _timed(_queued(log), requests, concurrency)
        await log.drain()
        base, before_commit = _p50(bare), _p50(queued)
        entry: dict[str, Any] = {
            "bare_p50_ms": round(base, 3),
            "queued_not_awaited_p50_ms": round(before_commit, 3),
            "recorded": summary(recorded),
            "added_p50_ms": round(_p50(recorded) - base, 3),
            "commit_wait_p50_ms": round(_p50(recorded) - before_commit, 3),
            "answers_per_s": round(throughput),
            "rows_per_transaction": round(requests / max(transactions, 1), 1),
        }
        if concurrency > 1:
            single, single_throughput = await _timed(_row_per_transaction(log, database), requests, concurrency)
            entry["row_per_transaction"] = {**summary(single), "answers_per_s": round(single_throughput)}
        result[label] = entry
    return result


async def _run(requests: int) -> dict[str, Any]:
    results: dict[str, Any] = {"requests_per_case": requests, "concurrency": CONCURRENCY}
    with tempfile.TemporaryDirectory() as directory:
        database = await open_database(Path(directory) / "audit.sqlite3")
        results["sqlite"] = await _measure(database, requests)
        await database.aclose()
    for label, durable in (("postgresql_durable", True), ("postgresql_fsync_off", False)):
        with PostgresServer(durable=durable) as server:
            database = await open_database(server.url, pool_max_size=10)
            results[label] = await _measure(database, requests)
            await database.aclose()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per case")
    args = parser.parse_args(argv)
    write_result("audit_commit", asyncio.run(_run(args.requests)))


if __name__ == "__main__":
    main()
