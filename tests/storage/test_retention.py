"""The retention job on both backends, with an injected clock and sleep: no test waits for real."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from ragsvc.access import Evidence
from ragsvc.domain import ChatMessage, Role
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.backend import Backend, utc_now
from ragsvc.storage.operations import OperationKind, OperationState, OperationStore
from ragsvc.storage.retention import Purged, RetentionJob
from ragsvc.storage.sessions import SessionKey, SessionStore
from tests.storage.samples import answer, question


class Ticks:
    """A sleep that returns only when the test lets it (`tick`), and records the intervals it was asked for."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self._allowed = asyncio.Semaphore(0)
        self._sleeping = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        self._sleeping.set()
        await self._allowed.acquire()

    async def tick(self) -> None:
        """Let one sleep end, and wait until the job sleeps again (it purged in between)."""
        self._sleeping.clear()
        self._allowed.release()
        await self._sleeping.wait()

    async def first(self) -> None:
        await self._sleeping.wait()


async def test_the_job_purges_at_start_and_every_interval(database: Backend) -> None:
    sessions, answers = SessionStore(database), AnswerLog(database)
    now = [utc_now()]
    ticks = Ticks()
    job = RetentionJob(sessions=sessions, session_retention_days=30, answers=answers, audit_retention_days=90,
                       interval_s=600, clock=lambda: now[0], sleep=ticks.sleep)  # fmt: skip
    await sessions.claim(SessionKey("acme", "s1"), "key:acme/a", ())
    await sessions.append(SessionKey("acme", "s1"), [ChatMessage(Role.USER, "q"), ChatMessage(Role.ASSISTANT, "a")],
                          Evidence())  # fmt: skip
    await answers.record_answer(question(), answer())
    job.start()
    await ticks.first()
    assert job.last == Purged(0, 0) and ticks.asked == [600]
    now[0] += timedelta(days=31)  # the messages are past 30 days, the audit row not past 90
    await ticks.tick()
    assert job.last == Purged(session_messages=2, audit_rows=0)
    assert await sessions.history(SessionKey("acme", "s1")) == ()
    assert await sessions.owner(SessionKey("acme", "s1")) is None, "a session left without messages is gone too"
    now[0] += timedelta(days=60)
    await ticks.tick()
    assert job.last == Purged(session_messages=0, audit_rows=1) and job.runs == 3
    assert await answers.recent("acme") == []
    await job.stop()
    assert job.runs == 3


async def test_the_job_purges_finished_operations_after_their_retention(database: Backend) -> None:
    operations = OperationStore(database)
    now = [utc_now()]
    ticks = Ticks()
    job = RetentionJob(operations=operations, operation_retention_days=7, interval_s=600, clock=lambda: now[0],
                       sleep=ticks.sleep)  # fmt: skip
    for name in ("operations/done", "operations/running"):
        await operations.create(name=name, kind=OperationKind.ASK, owner="peer:a", tenant_id="acme",
                                request_sha256="", lease_owner="r", lease_s=30)  # fmt: skip
    await operations.finish("operations/done", "r", OperationState.SUCCEEDED, response=b"")
    job.start()
    await ticks.first()
    assert job.last == Purged()
    now[0] += timedelta(days=8)
    await ticks.tick()
    assert job.last == Purged(operations=1)
    assert await operations.get("operations/done") is None
    assert await operations.get("operations/running") is not None, "an unfinished operation is never purged"
    await job.stop()


@pytest.mark.parametrize("days", [None, 0])
async def test_no_retention_keeps_records_forever(database: Backend, days: float | None) -> None:
    sessions, answers = SessionStore(database), AnswerLog(database)
    await sessions.append(SessionKey("acme", "s1"), [ChatMessage(Role.USER, "q")], Evidence())
    await answers.record_answer(question(), answer())
    far_future = utc_now() + timedelta(days=10_000)
    job = RetentionJob(sessions=sessions, session_retention_days=days, answers=answers, audit_retention_days=days,
                       clock=lambda: far_future)  # fmt: skip
    assert await job.purge_once() == Purged(0, 0)
    assert len(await sessions.history(SessionKey("acme", "s1"))) == 1 and len(await answers.recent("acme")) == 1


async def test_a_failed_purge_is_retried_at_the_next_interval(database: Backend, caplog) -> None:
    ticks = Ticks()
    sessions = SessionStore(database)
    job = RetentionJob(sessions=sessions, session_retention_days=1, interval_s=5, sleep=ticks.sleep)
    await database.aclose()  # every purge now fails
    job.start()
    await ticks.first()
    await ticks.tick()
    assert job.runs == 2 and job.last is None
    assert caplog.text.count("retention purge failed, retrying in 5 s") == 2
    await job.stop()


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        RetentionJob(interval_s=0)


async def test_stop_before_start_and_twice_is_harmless() -> None:
    job = RetentionJob(clock=lambda: datetime.now())
    await job.stop()
    job.start()
    await job.stop()
    await job.stop()
