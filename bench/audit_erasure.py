"""What erasing the audit log's text costs on a long log: one caller's rows (EraseCaller), and the text retention's
first purge after an upgrade, when every row of the log is past it at once.

For each backend (a SQLite file as shipped; PostgreSQL 18 from the test wheel on loopback, fsync off as the tests
run it), a log of `--rows` rows 60 days old (query 40 characters, answer 400), spread over `--callers` callers, is
written in bulk and analysed (a long-lived table has statistics). Then, timed:
- `erase_caller`: the rows of one caller blanked (through its index);
- `purge_text` at 30 days: every row's text blanked, in batches of `ERASE_BATCH` rows (each a transaction of its
  own); and, for reference, the same as one UPDATE statement (one transaction holding the write for all of it;
  on PostgreSQL bounded by RAG_DATABASE_COMMAND_TIMEOUT_SECONDS, 30 s by default).

`python -m bench.audit_erasure [--rows N] [--callers N]`; results in bench/results/audit_erasure-<date>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.stats import run_record, write_result
from ragsvc.storage.answers import _COLUMNS, _ERASED_TEXT, _INSERT, ERASE_BATCH, AnswerLog
from ragsvc.storage.backend import Backend, utc_now
from ragsvc.storage.database import open_database
from tests.support.postgres_server import PostgresServer

BULK = 5000  # rows a bulk insert writes at once


async def _fill(database: Backend, rows: int, callers: int) -> None:
    old = utc_now() - timedelta(days=60)
    base: dict[str, Any] = {
        **dict.fromkeys(_COLUMNS, ""),  # every text column, the ones added since included
        "created_at": old, "request_id": "r", "tenant_id": "acme", "session_id": "", "query": "q" * 40,
        "outcome": "answered", "answer": "a" * 400, "grounded": 1, "refusal_reason": "none", "action": "cite",
        "confidence": "{}", "citations": "[]", "flags": "{}", "model": "m", "template_version": "rag-v1",
        "timings": "{}", "error_reason": "", "error_message": "", "packed_chunks": None, "search_query": "q" * 40,
        "query_rewrite": "none", "draft": "",
    }  # fmt: skip
    for start in range(0, rows, BULK):
        batch = range(start, min(rows, start + BULK))
        await database.execute_many(_INSERT, [[{**base, "caller": f"key:acme/c{i % callers}"}[c] for c in _COLUMNS]
                                              for i in batch])  # fmt: skip
    await database.execute("ANALYZE answers")


async def _timed(work: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = await work
    return result, round((time.perf_counter() - started) * 1000, 1)


async def _measure(open_fresh: Any, rows: int, callers: int) -> dict[str, Any]:
    database: Backend = await open_fresh()
    await _fill(database, rows, callers)
    log = AnswerLog(database)
    erased, erase_ms = await _timed(log.erase_caller("key:acme/c0", "acme"))
    purged, purge_ms = await _timed(log.purge_text(retention_days=30))
    await database.aclose()
    database = await open_fresh()
    await _fill(database, rows, callers)
    one_statement = f"UPDATE answers SET {_ERASED_TEXT}, text_erased_at = ? WHERE created_at < ? AND text_erased_at IS NULL"  # noqa: S608
    whole, whole_ms = await _timed(database.execute(one_statement, (utc_now(), utc_now() - timedelta(days=30))))
    await database.aclose()
    batches = -(-purged // ERASE_BATCH)
    return {
        "erase_caller": {"rows": erased, "ms": erase_ms},
        "purge_text_in_batches": {"rows": purged, "ms": purge_ms, "batches": batches,
                                  "ms_per_batch": round(purge_ms / max(1, batches), 1)},
        "purge_text_one_statement": {"rows": whole, "ms": whole_ms},
    }  # fmt: skip


async def _run(rows: int, callers: int) -> dict[str, Any]:
    result: dict[str, Any] = {"rows": rows, "callers": callers, "erase_batch": ERASE_BATCH}
    with tempfile.TemporaryDirectory() as directory:
        files = iter(range(2))

        async def sqlite() -> Backend:
            return await open_database(Path(directory) / f"audit-{next(files)}.sqlite3")

        result["sqlite"] = await _measure(sqlite, rows, callers)
    with PostgresServer() as server:
        schemas = iter(range(2))

        async def postgres() -> Backend:
            return await open_database(server.create_schema(f"erasure_{next(schemas)}"))

        result["postgresql_fsync_off"] = await _measure(postgres, rows, callers)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows in the audit log")
    parser.add_argument("--callers", type=int, default=400, help="callers the rows are spread over")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    measured = asyncio.run(_run(args.rows, args.callers))
    write_result("audit_erasure", {**run_record(__name__ if __name__ != "__main__" else "bench.audit_erasure", load,
                                                {"rows": args.rows, "callers": args.callers}, argv), **measured})  # fmt: skip


if __name__ == "__main__":
    main()
