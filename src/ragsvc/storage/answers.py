"""The audit log: one `answers` row per request, whatever its outcome (answered, refused, routed, failed,
cancelled, dry run).

Rows are written behind the answers: recording a request queues its row, and one writer task commits whatever
is queued in a single transaction, so no caller waits for the disk (that wait cost each answer ~0.5 ms). A row
is queued before the final Answer is passed on and committed about 20 ms later, with the rows queued meanwhile.
`recent` reads every row queued before it; `drain` (at shutdown) waits for the last ones. A failed write is
logged with the number of rows it lost; it never fails a request."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from typing import Any

from ragsvc.domain import Action, Answer, Event, Question, RefusalReason, ScoredChunk
from ragsvc.errors import RagError
from ragsvc.storage.database import Database


class Outcome(enum.Enum):
    ANSWERED = "answered"
    ROUTED = "routed"
    REFUSED = "refused"
    DRY_RUN = "dry_run"
    FAILED = "failed"
    CANCELLED = "cancelled"


def outcome_of(question: Question, answer: Answer) -> Outcome:
    if question.dry_run:
        return Outcome.DRY_RUN
    if answer.refusal is not RefusalReason.NONE:
        return Outcome.REFUSED
    return Outcome.ROUTED if answer.action is Action.ROUTE else Outcome.ANSWERED


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _chunks(packed: tuple[ScoredChunk, ...]) -> str:
    return _json([{"marker": n, "score": s.score, **dataclasses.asdict(s.chunk)} for n, s in enumerate(packed, 1)])


_log = logging.getLogger(__name__)


class AnswerLog:
    def __init__(self, database: Database, *, default_tenant: str = "") -> None:
        self._db = database
        self._default_tenant = default_tenant
        self._queued: list[list[Any]] = []
        self._writer: asyncio.Task[None] | None = None

    async def recorded(self, question: Question, events: AsyncIterator[Event]) -> AsyncGenerator[Event, None]:
        """`events` passed through, with the request's row queued: before the final Answer is passed on (a
        unary caller stops reading there), or when the stream fails, or when the caller cancels it."""
        answered = False
        try:
            async for event in events:
                if isinstance(event, Answer):
                    self.record_answer(question, event)
                    answered = True
                yield event
        except (asyncio.CancelledError, GeneratorExit) as exc:
            if not answered:
                self.record_failure(question, exc, cancelled=True)
            raise
        except Exception as exc:
            self.record_failure(question, exc)
            raise

    async def drain(self) -> None:
        """Wait until every row queued so far is committed (or its loss logged)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    def record_answer(self, question: Question, answer: Answer) -> None:
        """Record a completed request: what was searched (a follow-up's standalone question), the answer (a
        refused one's draft beside its refusal); the packed chunks only when the question asked to `explain`."""
        packed = answer.explanation.packed if answer.explanation is not None and question.explain else None
        self._queue(
            question,
            outcome_of(question, answer),
            answer=answer.text,
            grounded=answer.grounded,
            refusal_reason=answer.refusal.value,
            action=answer.action.value,
            confidence=dataclasses.asdict(answer.confidence),
            citations=[
                {"marker": c.marker, "source_id": c.chunk.source_id, "relevance_score": c.relevance_score}
                for c in answer.citations
            ],
            flags=dataclasses.asdict(answer.flags),
            model=answer.model,
            template_version=answer.template_version,
            timings=dataclasses.asdict(answer.timings),
            packed_chunks=_chunks(packed) if packed is not None else None,
            search_query=answer.search.text if answer.search is not None else "",
            query_rewrite=answer.search.rewrite.value if answer.search is not None else "",
            draft=answer.draft,
        )

    def record_failure(self, question: Question, error: BaseException, *, cancelled: bool = False) -> None:
        """Record a request that ended in an error (or was cancelled by its caller)."""
        reason = error.reason if isinstance(error, RagError) else "INTERNAL"
        message = error.message if isinstance(error, RagError) else "internal error"
        self._queue(
            question,
            Outcome.CANCELLED if cancelled else Outcome.FAILED,
            error_reason="CANCELLED" if cancelled else reason,
            error_message="cancelled by the caller" if cancelled else message,
        )

    async def recent(self, tenant_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The tenant's latest rows, newest first, with JSON columns decoded (every row queued before included)."""
        await self.drain()
        rows = await self._db.fetch_all(
            "SELECT * FROM answers WHERE tenant_id = ? ORDER BY id DESC LIMIT ?", (tenant_id, limit)
        )
        decoded = []
        for row in rows:
            record = dict(row)
            for column in ("confidence", "citations", "flags", "timings", "packed_chunks"):
                if record[column] is not None:
                    record[column] = json.loads(record[column])
            record["grounded"] = bool(record["grounded"])
            decoded.append(record)
        return decoded

    def _queue(self, question: Question, outcome: Outcome, **fields: Any) -> None:
        row: dict[str, Any] = {
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": question.request_id,
            "tenant_id": question.tenant_id or self._default_tenant,
            "session_id": question.session_id,
            "query": question.query,
            "outcome": outcome.value,
            **_UNSET,
            **fields,
        }
        for column in ("confidence", "citations", "flags", "timings"):
            row[column] = _json(row[column])
        self._queued.append([int(row[c]) if isinstance(row[c], bool) else row[c] for c in _COLUMNS])
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        """After FLUSH_DELAY_S (the answers that queued the rows go out first, and more rows gather), commit
        what is queued, one transaction at a time, until nothing is."""
        await asyncio.sleep(FLUSH_DELAY_S)
        while self._queued:
            rows, self._queued = self._queued, []
            try:
                await self._db.execute_many(_INSERT, rows)
            except RagError as exc:
                _log.error("the audit log lost %d rows: %s", len(rows), exc)


FLUSH_DELAY_S = 0.02
# What a row holds when its request did not set it (a failure has no answer, an answer no error).
_UNSET: dict[str, Any] = {
    "answer": "",
    "grounded": False,
    "refusal_reason": RefusalReason.NONE.value,
    "action": "",
    "confidence": {},
    "citations": [],
    "flags": {},
    "model": "",
    "template_version": "",
    "timings": {},
    "error_reason": "",
    "error_message": "",
    "packed_chunks": None,
    "search_query": "",
    "query_rewrite": "",
    "draft": "",
}
_COLUMNS = ("created_at", "request_id", "tenant_id", "session_id", "query", "outcome", *_UNSET)
_INSERT = f"INSERT INTO answers ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"  # noqa: S608
