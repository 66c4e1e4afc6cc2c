"""The audit log: one `answers` row per request, whatever its outcome (answered, refused, routed, failed,
cancelled, dry run).

An answer's row is committed before the answer goes out: `recorded` passes the events of a request through and
holds the final Answer back until its row is committed. Commits are shared (ragsvc.storage.group_commit): a lone
request writes its row at once, alone; rows of requests that finish while a transaction is in flight go together
in the next one. So a crash never loses the row of an answer a client received.

When the row cannot be committed, the request fails with DatabaseUnavailable (UNAVAILABLE) instead of sending
its answer. That fails an answer the model already wrote, and a streaming client has seen its text; but sending
it would leave a client holding an answer the audit log does not have, and the log's promise is a row for every
answer a client received. The caller can retry; nobody can repair a silent gap in an audit trail. (A question
the cache answers is recorded the same way: the row is the record of what the client got.)

What it costs (bench/audit_commit.py, 2 cores, p50, two runs): alone, waiting for the commit adds 0.3-0.4 ms
on SQLite (WAL, synchronous=NORMAL: a commit survives a crash of the process, not a power loss) and 1.3-1.6 ms
on PostgreSQL with fsync on. On SQLite a row is since committed at once on the event loop's thread whenever that
needs no waiting (storage/sqlite.py: ~0.03-0.08 ms a row, the worker thread's two hops saved), which is nearly
always in one process. With 32 concurrent requesters in a closed loop the machine is CPU-bound and rows
share transactions (13-30 per commit): PostgreSQL answers 1.4-1.7x the rate of one transaction per row
(1,790-1,910/s against 1,030-1,390/s); SQLite's commits are cheap enough that sharing them gains nothing there
(2,000-2,500/s either way).

Rows of requests that did not end in an answer (failures, cancellations) are written with the next transaction
without holding anything back: the caller gets its error at once, and a lost row of that kind is logged.
`recent` reads every row handed over before it; `drain` (at shutdown) waits for the last ones.

RAG_AUDIT_BEFORE_ANSWER=false (`before_answer=False`) treats an answer's row the same way: handed to the writer
as the answer goes out and committed by the next transaction, a moment later. The answer then no longer waits for
the commit (0.7-0.8 ms of the answer's path on SQLite in process, side by side at 2k passages: docs/profile).
What is given up, exactly: a process crash (or a database failure) between the answer going out and its commit
loses that answer's row, and a failed commit is logged ("the audit log lost N rows") instead of failing the
request. Every row still reaches the database unless its transaction fails or the process dies within that
moment, and `drain` (at shutdown) still waits for it. The log's promise is weakened from "a row for every answer a
client received" to "a row for every answer, lost only with a crash or a failed commit, and then logged": honest
where the log records use rather than proves it (with SQLite's synchronous=NORMAL a power loss can already undo
the last commits either way).

Erasure and retention (R-001-20: conversations are kept 30 days). A row's text (the question, what was searched,
the answer and its draft, the packed chunks, the error message) is erased apart from its metadata (ids, caller,
times, outcome, confidence, citation ids, flags, model, timings), which may be kept longer: `purge_text` blanks
the text of rows older than the text's retention, `purge` deletes whole rows older than the metadata's.
`erase_session` blanks the text of a deleted session's rows, `erase_caller` that of every row of one caller (and
the caller's name on them). An erased row keeps its place and says when its text went (`text_erased_at`). Each of
them first waits for the rows handed over before it (`drain`), so that no row of an erased request is committed
after its erasure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from ragsvc.domain import Action, Answer, Event, Question, RefusalReason, ScoredChunk
from ragsvc.errors import RagError
from ragsvc.storage.backend import Backend, utc_now
from ragsvc.storage.group_commit import GroupCommitter


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


# Rows whose text one statement erases: the first text purge of a long log (all of it past the retention at once)
# is many short transactions instead of one that could outlast RAG_DATABASE_COMMAND_TIMEOUT_SECONDS, and none
# holds SQLite's write lock (which answers wait behind) for long. bench/audit_erasure.py, 200k rows, 2 cores at a
# load of 12-16: 75 ms a batch on SQLite (3.0 s in all; one statement 1.3 s), 271 ms on PostgreSQL (10.9 s; one
# statement 5.9 s, which past ~1M rows would outlast the 30 s command timeout and fail at every run).
ERASE_BATCH = 5000
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)  # made once: json.dumps with options makes one a call


def _json(value: Any) -> str:
    return _ENCODER.encode(value)


def _fields(flat: Any) -> dict[str, Any]:
    """A dataclass of plain values as a dict (what dataclasses.asdict makes of it, without its deep copy)."""
    return {f.name: getattr(flat, f.name) for f in dataclasses.fields(flat)}


def _chunks(packed: tuple[ScoredChunk, ...]) -> str:
    return _json([{"marker": n, "score": s.score, **dataclasses.asdict(s.chunk)} for n, s in enumerate(packed, 1)])


class AnswerLog:
    def __init__(self, database: Backend, *, default_tenant: str = "", before_answer: bool = True) -> None:
        """`before_answer`: the final Answer waits for its row's commit (see the module's docstring)."""
        self._db = database
        self._default_tenant = default_tenant
        self._before_answer = before_answer
        self._rows = GroupCommitter(database, _INSERT, what="audit log")

    @property
    def transactions(self) -> int:
        """Transactions written so far (fewer than rows when requests shared them)."""
        return self._rows.transactions

    async def recorded(self, question: Question, events: AsyncIterator[Event]) -> AsyncGenerator[Event, None]:
        """`events` passed through, with the request's row written: the final Answer is passed on only once its
        row is committed (DatabaseUnavailable instead when it cannot be), or, not `before_answer`, once its row is
        handed over; a failed or cancelled stream's row is handed over without waiting."""
        answered = False
        try:
            async for event in events:
                if isinstance(event, Answer):
                    answered = True  # cancelled while committing: the answer's row, not a cancellation, is kept
                    if self._before_answer:
                        await self.record_answer(question, event)
                    else:
                        self._rows.enqueue(self._answer_row(question, event))
                yield event
        except (asyncio.CancelledError, GeneratorExit) as exc:
            if not answered:
                self.record_failure(question, exc, cancelled=True)
            raise
        except Exception as exc:
            self.record_failure(question, exc)
            raise

    async def drain(self) -> None:
        """Wait until every row handed over so far is committed (or its loss logged)."""
        await self._rows.drain()

    async def record_answer(self, question: Question, answer: Answer) -> None:
        """Record a completed request and return once its row is committed (DatabaseUnavailable when it cannot
        be): what was searched (a follow-up's standalone question), the answer (a refused one's draft beside its
        refusal); the packed chunks only when the question asked to `explain`."""
        await self._rows.commit(self._answer_row(question, answer))

    def _answer_row(self, question: Question, answer: Answer) -> list[Any]:
        packed = answer.explanation.packed if answer.explanation is not None and question.explain else None
        return self._row(
            question,
            outcome_of(question, answer),
            answer=answer.text,
            grounded=answer.grounded,
            refusal_reason=answer.refusal.value,
            action=answer.action.value,
            confidence=_fields(answer.confidence),
            citations=[
                {"marker": c.marker, "source_id": c.chunk.source_id, "relevance_score": c.relevance_score}
                for c in answer.citations
            ],
            flags=_fields(answer.flags),
            model=answer.model,
            template_version=answer.template_version,
            timings=_fields(answer.timings),
            packed_chunks=_chunks(packed) if packed is not None else None,
            search_query=answer.search.text if answer.search is not None else "",
            query_rewrite=answer.search.rewrite.value if answer.search is not None else "",
            draft=answer.draft,
            index_version=answer.index_version,
        )

    def record_failure(self, question: Question, error: BaseException, *, cancelled: bool = False) -> None:
        """Record a request that ended in an error (or was cancelled by its caller), without waiting."""
        reason = error.reason if isinstance(error, RagError) else "INTERNAL"
        message = error.message if isinstance(error, RagError) else "internal error"
        self._rows.enqueue(self._row(
            question,
            Outcome.CANCELLED if cancelled else Outcome.FAILED,
            error_reason="CANCELLED" if cancelled else reason,
            error_message="cancelled by the caller" if cancelled else message,
        ))  # fmt: skip

    async def purge(self, *, retention_days: float, now: datetime | None = None) -> int:
        """Delete rows older than the retention period; returns how many were deleted."""
        cutoff = (now or utc_now()) - timedelta(days=retention_days)
        return await self._db.execute("DELETE FROM answers WHERE created_at < ?", (cutoff,))

    async def purge_text(self, *, retention_days: float, now: datetime | None = None) -> int:
        """Erase the text of rows older than the text's retention period (their metadata stays); returns how many
        rows had text erased."""
        now = now or utc_now()
        cutoff = now - timedelta(days=retention_days)
        return await self._erase_text("created_at < ?", (cutoff,), now=now)

    async def erase_session(self, tenant_id: str, session_id: str) -> int:
        """Erase the text of the rows of session `session_id` of `tenant_id` (deleted); returns how many rows."""
        await self.drain()
        return await self._erase_text("tenant_id = ? AND session_id = ?", (tenant_id, session_id))

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        """Erase the text of every row of `caller` (in `tenant_id`; None: in every tenant), and the caller's name on
        them; returns how many rows."""
        await self.drain()
        where, params = ("caller = ?", [caller]) if tenant_id is None else ("caller = ? AND tenant_id = ?", [caller, tenant_id])
        return await self._erase_text(where, params, anonymise=True)

    async def _erase_text(
        self, where: str, params: Sequence[Any], *, now: datetime | None = None, anonymise: bool = False
    ) -> int:
        """Blank the text columns (and, `anonymise`, the caller) of the rows matching `where` whose text is not
        erased yet (or, `anonymise`, that still name the caller), ERASE_BATCH rows a statement; returns how many
        rows changed."""
        assignments = [_ERASED_TEXT, "text_erased_at = COALESCE(text_erased_at, ?)"]
        if anonymise:
            assignments.append("caller = ''")
        pending = "caller <> ''" if anonymise else "text_erased_at IS NULL"
        # By age: the index of the rows with text (`schema`) finds a batch without passing the erased rows; the
        # update then names its rows by id, so that it reads nothing else.
        select = f"SELECT id FROM answers WHERE {where} AND {pending} ORDER BY created_at LIMIT {ERASE_BATCH}"  # noqa: S608
        erased_at, changed = now or utc_now(), 0
        while True:
            ids = [row["id"] for row in await self._db.fetch_all(select, params)]
            if ids:
                update = (f"UPDATE answers SET {', '.join(assignments)} "  # noqa: S608
                          f"WHERE id IN ({', '.join('?' * len(ids))}) AND {pending}")  # fmt: skip
                changed += await self._db.execute(update, (erased_at, *ids))
            if len(ids) < ERASE_BATCH:
                return changed

    async def recent(self, tenant_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The tenant's latest rows, newest first, with JSON columns decoded (every row handed over before
        included)."""
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

    def _row(self, question: Question, outcome: Outcome, **fields: Any) -> list[Any]:
        row: dict[str, Any] = {
            "created_at": utc_now(),
            "request_id": question.request_id,
            "tenant_id": question.tenant_id or self._default_tenant,
            "session_id": question.session_id,
            "caller": question.caller,
            "query": question.query,
            "outcome": outcome.value,
            **_UNSET,
            "language": question.language,  # detected at admission (R-003-04): failures have it too
            **fields,
        }
        for column in ("confidence", "citations", "flags", "timings"):
            row[column] = _json(row[column])
        return [int(row[c]) if isinstance(row[c], bool) else row[c] for c in _COLUMNS]


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
    "index_version": "",
    "language": "",
}
_COLUMNS = ("created_at", "request_id", "tenant_id", "session_id", "caller", "query", "outcome", *_UNSET)
# What erasing a row's text sets: every column that holds text the caller sent or was answered.
_TEXT_COLUMNS = ("query", "answer", "draft", "search_query", "error_message")
_ERASED_TEXT = ", ".join([*(f"{column} = ''" for column in _TEXT_COLUMNS), "packed_chunks = NULL"])
_INSERT = f"INSERT INTO answers ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"  # noqa: S608
