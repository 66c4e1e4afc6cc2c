from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from ragsvc.domain import Action, Answer, Event, RefusalReason, TextDelta
from ragsvc.errors import DatabaseUnavailable, FieldViolation, InvalidRequest, LLMUnavailable
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import Backend
from ragsvc.storage.group_commit import WritesNow
from tests.storage.samples import CHUNK, answer, consumed, events, question


async def test_every_outcome_is_recorded(database: Backend) -> None:
    log = AnswerLog(database)
    await log.record_answer(question(), answer())
    await log.record_answer(question(), answer(action=Action.ROUTE))
    await log.record_answer(question(), answer(grounded=False, refusal=RefusalReason.SCORE_GATE, action=Action.ROUTE))
    await log.record_answer(question(dry_run=True), answer(text=""))
    log.record_failure(question(), LLMUnavailable("down"))
    log.record_failure(question(query=""), InvalidRequest([FieldViolation("query", "empty")]))
    log.record_failure(question(), KeyError("boom"))
    log.record_failure(question(), LLMUnavailable("x"), cancelled=True)
    rows = await log.recent("acme")
    assert [r["outcome"] for r in reversed(rows)] == [
        "answered",
        "routed",
        "refused",
        "dry_run",
        "failed",
        "failed",
        "failed",
        "cancelled",
    ]
    assert [r["error_reason"] for r in reversed(rows)][4:] == [
        "LLM_UNAVAILABLE",
        "VALIDATION_ERROR",
        "INTERNAL",
        "CANCELLED",
    ]
    first = rows[-1]
    assert first["answer"] == "Up to 180 euros [#1]." and first["grounded"] is True
    assert first["citations"] == [{"marker": 1, "source_id": "guide:2", "relevance_score": 0.7}]
    assert first["confidence"]["overall"] == 81.0 and first["timings"]["total_ms"] == 12.5
    assert first["model"] == "extractive" and first["template_version"] == "rag-v1" and first["request_id"] == "r1"
    assert rows[-3]["refusal_reason"] == "score_gate"


async def test_packed_chunks_are_kept_only_when_explaining(database: Backend) -> None:
    log = AnswerLog(database)
    await log.record_answer(question(), answer())
    await log.record_answer(question(explain=True), answer())
    explained, plain = await log.recent("acme")
    assert plain["packed_chunks"] is None
    assert explained["packed_chunks"][0]["marker"] == 1
    assert explained["packed_chunks"][0]["text"] == CHUNK.text


async def test_rows_are_per_tenant(database: Backend) -> None:
    log = AnswerLog(database)
    await log.record_answer(question(tenant_id="other"), answer())
    assert await log.recent("acme") == []


async def test_the_answer_is_passed_on_only_once_its_row_is_committed(database: Backend) -> None:
    log = AnswerLog(database)
    seen = []
    async for event in log.recorded(question(request_id="r-final"), events(answer())):
        if isinstance(event, Answer):
            # Read straight from the database (no drain): the row is there before the caller gets the answer.
            rows = await database.fetch_all("SELECT request_id, outcome FROM answers")
            assert rows == [{"request_id": "r-final", "outcome": "answered"}]
        seen.append(event)
    assert isinstance(seen[-1], Answer) and len(seen) == 2


async def test_not_before_answer_the_answer_goes_out_and_its_row_is_committed_next(database: Backend) -> None:
    log = AnswerLog(database, before_answer=False)
    seen = []
    async for event in log.recorded(question(request_id="r-next"), events(answer())):
        if isinstance(event, Answer):
            # SQLite wrote it at once, on this thread (see storage/group_commit.py); nothing else waits.
            assert log.transactions == int(isinstance(database, WritesNow)), "the answer did not wait"
        seen.append(event)
    assert isinstance(seen[-1], Answer) and len(seen) == 2
    await log.drain()
    rows = await database.fetch_all("SELECT request_id, outcome, answer FROM answers")
    assert rows == [{"request_id": "r-next", "outcome": "answered", "answer": "Up to 180 euros [#1]."}]
    assert log.transactions == 1


async def test_not_before_answer_a_row_that_cannot_be_committed_is_logged(database: Backend, caplog) -> None:
    log = AnswerLog(database, before_answer=False)
    await database.aclose()  # every write now fails with DatabaseUnavailable
    seen: list[Event] = []
    await consumed(log.recorded(question(), events(answer())), seen)
    assert isinstance(seen[-1], Answer), "the answer went out"
    await log.drain()
    assert "the audit log lost 1 rows" in caplog.text


async def test_concurrent_answers_share_transactions(database: Backend) -> None:
    log = AnswerLog(database)

    async def ask(n: int) -> None:
        async for event in log.recorded(question(request_id=f"r{n}"), events(answer())):
            if isinstance(event, Answer):
                rows = await database.fetch_all("SELECT 1 FROM answers WHERE request_id = ?", (f"r{n}",))
                assert len(rows) == 1, "committed before it was passed on"

    await asyncio.gather(*(ask(n) for n in range(32)))
    rows = await database.fetch_all("SELECT request_id FROM answers")
    assert sorted(r["request_id"] for r in rows) == sorted(f"r{n}" for n in range(32))
    # On SQLite a row is written at once, alone, unless the connection is busy (here: another ask's read).
    most = 32 if isinstance(database, WritesNow) else 2
    assert 1 <= log.transactions <= most, f"32 rows in {log.transactions} transactions"


async def test_rows_arriving_during_a_transaction_go_in_the_next_one(database: Backend) -> None:
    log = AnswerLog(database)
    first = asyncio.ensure_future(log.record_answer(question(request_id="first"), answer()))
    await asyncio.sleep(0)  # the first transaction is in flight (on SQLite: committed at once)
    rest = [asyncio.ensure_future(log.record_answer(question(request_id=f"r{n}"), answer())) for n in range(10)]
    await asyncio.gather(first, *rest)
    assert log.transactions == (11 if isinstance(database, WritesNow) else 2)


async def test_a_row_that_cannot_be_committed_fails_the_answer(database: Backend, caplog) -> None:
    log = AnswerLog(database)
    await database.aclose()  # every write now fails with DatabaseUnavailable
    seen: list[Event] = []
    with pytest.raises(DatabaseUnavailable):
        await consumed(log.recorded(question(), events(answer())), seen)
    assert seen and not any(isinstance(event, Answer) for event in seen), "the answer never went out"
    await log.drain()
    assert "the audit log lost 1 rows" in caplog.text


async def test_failures_and_cancellations_are_recorded_without_waiting(database: Backend) -> None:
    log = AnswerLog(database)

    async def failing() -> AsyncIterator[Event]:
        yield TextDelta("partial ")
        raise LLMUnavailable("down")

    with pytest.raises(LLMUnavailable):
        async for _ in log.recorded(question(request_id="failed"), failing()):
            pass
    stream = log.recorded(question(request_id="cancelled"), events(answer(), before=3))
    await anext(stream)
    await stream.aclose()  # the caller went away mid-stream
    rows = await log.recent("acme")
    assert [(r["request_id"], r["outcome"], r["error_reason"]) for r in rows] == [
        ("cancelled", "cancelled", "CANCELLED"), ("failed", "failed", "LLM_UNAVAILABLE"),
    ]  # fmt: skip


async def test_audit_rows_past_retention_are_purged(database: Backend) -> None:
    log = AnswerLog(database)
    await log.record_answer(question(), answer())
    assert await log.purge(retention_days=1) == 0
    assert await log.purge(retention_days=1, now=datetime.now(UTC) + timedelta(days=2)) == 1
    assert await log.recent("acme") == []


async def test_created_at_reads_back_as_an_aware_datetime(database: Backend) -> None:
    log = AnswerLog(database)
    before = datetime.now(UTC) - timedelta(seconds=1)
    await log.record_answer(question(), answer())
    [row] = await log.recent("acme")
    assert isinstance(row["created_at"], datetime) and row["created_at"].tzinfo is not None
    assert before <= row["created_at"] <= datetime.now(UTC)
