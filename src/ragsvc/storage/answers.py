"""The audit log: one `answers` row per request, whatever its outcome (answered, refused, routed, failed,
cancelled, dry run)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
from collections.abc import AsyncIterator
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
        self._pending: set[asyncio.Task[None]] = set()

    async def recorded(self, question: Question, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """`events` passed through, with the request's row written: before the final Answer is passed on (a
        unary caller stops reading there), or when the stream fails, or when the caller cancels it."""
        answered = False
        try:
            async for event in events:
                if isinstance(event, Answer):
                    await self.record_answer(question, event)
                    answered = True
                yield event
        except (asyncio.CancelledError, GeneratorExit) as exc:
            if not answered:  # written in the background: a cancelled call must not wait for the database
                task = asyncio.get_running_loop().create_task(self.record_failure(question, exc, cancelled=True))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
            raise
        except Exception as exc:
            await self.record_failure(question, exc)
            raise

    async def drain(self) -> None:
        """Wait for rows still being written in the background (at shutdown)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def record_answer(self, question: Question, answer: Answer) -> None:
        """Record a completed request; the packed chunks only when the question asked to `explain`."""
        packed = answer.explanation.packed if answer.explanation is not None and question.explain else None
        await self._insert(
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
        )

    async def record_failure(self, question: Question, error: BaseException, *, cancelled: bool = False) -> None:
        """Record a request that ended in an error (or was cancelled by its caller)."""
        reason = error.reason if isinstance(error, RagError) else "INTERNAL"
        message = error.message if isinstance(error, RagError) else "internal error"
        await self._insert(
            question,
            Outcome.CANCELLED if cancelled else Outcome.FAILED,
            error_reason="CANCELLED" if cancelled else reason,
            error_message="cancelled by the caller" if cancelled else message,
        )

    async def recent(self, tenant_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The tenant's latest rows, newest first, with JSON columns decoded."""
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

    async def _insert(self, question: Question, outcome: Outcome, **fields: Any) -> None:
        row: dict[str, Any] = {
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": question.request_id,
            "tenant_id": question.tenant_id or self._default_tenant,
            "session_id": question.session_id,
            "query": question.query,
            "outcome": outcome.value,
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
            **fields,
        }
        for column in ("confidence", "citations", "flags", "timings"):
            row[column] = _json(row[column])
        columns = ", ".join(row)
        await self._db.execute(
            f"INSERT INTO answers ({columns}) VALUES ({', '.join('?' * len(row))})",  # noqa: S608 - fixed names
            [int(v) if isinstance(v, bool) else v for v in row.values()],
        )
