"""Long-running operations as records: what any replica needs to answer google.longrunning's Get, List, Wait, Cancel
and Delete for an operation that another replica runs.

A row is an operation: its name, kind (ask, ingest), owner (the caller that submitted it: only it reads the row, as
with sessions), tenant, the digest of its request, its state and progress, and once done its result or error as
opaque bytes (the server packs and unpacks them). The replica running an operation holds a lease on it
(`lease_owner`, `lease_expires_at`) and renews it while it runs; an operation whose lease ran out was left by a
replica that died, and `abandon_expired` ends it with the error it is given, from whichever replica notices.
Every change of state is a conditional UPDATE (`done = 0`, and the runner's own lease where it matters), so two
replicas never both finish one operation, and a runner whose operation was deleted or abandoned meanwhile finds
nothing to update.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ragsvc.domain import IngestProgress
from ragsvc.storage.backend import Backend, Row, utc_now


class OperationKind(enum.StrEnum):
    ASK = "ask"  # RagService.SubmitAsk
    INGEST = "ingest"  # IndexService.SubmitIngest, or UploadDocument with long_running


class OperationState(enum.StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


FINAL_STATES = frozenset({OperationState.SUCCEEDED, OperationState.FAILED, OperationState.CANCELLED})


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """An operation as stored. `response` is a packed google.protobuf.Any, `error` a google.rpc.Status, both
    serialized; at most one is set, and only once `done`."""

    seq: int
    name: str
    kind: OperationKind
    owner: str
    tenant_id: str
    request_sha256: str
    state: OperationState
    cancel_requested: bool
    progress: IngestProgress
    response: bytes | None
    error: bytes | None
    lease_owner: str
    lease_expires_at: datetime
    created_at: datetime
    started_at: datetime | None
    updated_at: datetime
    finished_at: datetime | None

    @property
    def done(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_row(cls, row: Row) -> OperationRecord:
        return cls(
            seq=int(row["seq"]),
            name=row["name"],
            kind=OperationKind(row["kind"]),
            owner=row["owner"],
            tenant_id=row["tenant_id"],
            request_sha256=row["request_sha256"],
            state=OperationState(row["state"]),
            cancel_requested=bool(row["cancel_requested"]),
            progress=IngestProgress(
                int(row["documents_done"]),
                int(row["documents_total"]),
                int(row["chunks_done"]),
                int(row["chunks_total"]),
                row["current_document_id"],
            ),
            response=None if row["response"] is None else bytes(row["response"]),
            error=None if row["error"] is None else bytes(row["error"]),
            lease_owner=row["lease_owner"],
            lease_expires_at=row["lease_expires_at"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            updated_at=row["updated_at"],
            finished_at=row["finished_at"],
        )


_COLUMNS = (
    "seq, name, kind, owner, tenant_id, request_sha256, state, cancel_requested, documents_done, documents_total, "
    "chunks_done, chunks_total, current_document_id, response, error, lease_owner, lease_expires_at, created_at, "
    "started_at, updated_at, finished_at"
)


class OperationStore:
    def __init__(self, database: Backend) -> None:
        self._db = database

    async def create(
        self,
        *,
        name: str,
        kind: OperationKind,
        owner: str,
        tenant_id: str,
        request_sha256: str,
        lease_owner: str,
        lease_s: float,
        documents_total: int = 0,
    ) -> OperationRecord:
        """A new QUEUED operation, leased to `lease_owner` for `lease_s`."""
        now = utc_now()
        await self._db.execute(
            "INSERT INTO operations (name, kind, owner, tenant_id, request_sha256, state, done, cancel_requested, "
            "documents_done, documents_total, chunks_done, chunks_total, current_document_id, lease_owner, "
            "lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, ?, 0, 0, '', ?, ?, ?, ?)",
            (name, kind.value, owner, tenant_id, request_sha256, OperationState.QUEUED.value, documents_total,
             lease_owner, now + timedelta(seconds=lease_s), now, now),
        )  # fmt: skip
        created = await self.get(name)
        assert created is not None  # just inserted; a concurrent delete would need its name, which nobody has yet
        return created

    async def get(self, name: str) -> OperationRecord | None:
        rows = await self._db.fetch_all(f"SELECT {_COLUMNS} FROM operations WHERE name = ?", (name,))  # noqa: S608 - a constant
        return OperationRecord.from_row(rows[0]) if rows else None

    async def list_owned(
        self, owner: str, *, before_seq: int | None, limit: int, done: bool | None = None
    ) -> list[OperationRecord]:
        """The owner's operations, newest first, those numbered below `before_seq` (None: from the newest); only
        the finished or unfinished ones when `done` says so."""
        where: list[str] = ["owner = ?"]
        params: list[str | int] = [owner]
        if before_seq is not None:
            where.append("seq < ?")
            params.append(before_seq)
        if done is not None:
            where.append("done = ?")
            params.append(int(done))
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM operations WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?",  # noqa: S608 - constants
            (*params, limit),
        )
        return [OperationRecord.from_row(row) for row in rows]

    async def start(self, name: str, lease_owner: str) -> bool:
        """QUEUED -> RUNNING for the runner holding its lease; False when it is no longer there to start (deleted,
        cancelled, or abandoned meanwhile)."""
        now = utc_now()
        return bool(await self._db.execute(
            "UPDATE operations SET state = ?, started_at = ?, updated_at = ? WHERE name = ? AND lease_owner = ? "
            "AND state = ? AND done = 0",
            (OperationState.RUNNING.value, now, now, name, lease_owner, OperationState.QUEUED.value),
        ))  # fmt: skip

    async def report(self, name: str, lease_owner: str, progress: IngestProgress) -> bool:
        """Record the runner's progress; False when the operation is gone or no longer the runner's."""
        return bool(await self._db.execute(
            "UPDATE operations SET documents_done = ?, documents_total = ?, chunks_done = ?, chunks_total = ?, "
            "current_document_id = ?, updated_at = ? WHERE name = ? AND lease_owner = ? AND done = 0",
            (progress.documents_done, progress.documents_total, progress.chunks_done, progress.chunks_total,
             progress.current_document_id, utc_now(), name, lease_owner),
        ))  # fmt: skip

    async def finish(
        self,
        name: str,
        lease_owner: str,
        state: OperationState,
        *,
        response: bytes | None = None,
        error: bytes | None = None,
    ) -> bool:
        """End the operation in a final `state` with its response or error; False when it is gone, finished or no
        longer the runner's (abandoned by another replica meanwhile)."""
        if state not in FINAL_STATES:
            raise ValueError(f"{state} is not a final state")
        now = utc_now()
        return bool(await self._db.execute(
            "UPDATE operations SET state = ?, done = 1, response = ?, error = ?, current_document_id = '', "
            "updated_at = ?, finished_at = ? WHERE name = ? AND lease_owner = ? AND done = 0",
            (state.value, response, error, now, now, name, lease_owner),
        ))  # fmt: skip

    async def request_cancel(self, name: str) -> bool:
        """Ask the runner to stop (state CANCELLING); False when the operation is gone or done already."""
        return bool(await self._db.execute(
            "UPDATE operations SET cancel_requested = 1, state = ?, updated_at = ? WHERE name = ? AND done = 0",
            (OperationState.CANCELLING.value, utc_now(), name),
        ))  # fmt: skip

    async def cancel_requested(self, lease_owner: str) -> list[str]:
        """The unfinished operations of `lease_owner` whose cancellation was asked for."""
        rows = await self._db.fetch_all(
            "SELECT name FROM operations WHERE lease_owner = ? AND cancel_requested = 1 AND done = 0",
            (lease_owner,),
        )
        return [row["name"] for row in rows]

    async def renew(self, lease_owner: str, names: Sequence[str], lease_s: float) -> None:
        """Extend the lease of the runner's unfinished operations `names` to `lease_s` from now."""
        if names:
            until = utc_now() + timedelta(seconds=lease_s)
            marks = ", ".join("?" for _ in names)
            await self._db.execute(
                f"UPDATE operations SET lease_expires_at = ? WHERE lease_owner = ? AND name IN ({marks}) AND done = 0",  # noqa: S608
                (until, lease_owner, *names),
            )

    async def abandon_expired(self, error: bytes, *, now: datetime | None = None) -> list[str]:
        """Fail every unfinished operation whose lease ran out (its replica died) with `error`; their names."""
        now = now or utc_now()
        rows = await self._db.fetch_all(
            "SELECT name FROM operations WHERE done = 0 AND lease_expires_at < ?", (now,)
        )
        abandoned = []
        for row in rows:  # one by one, each conditional: a runner renewing meanwhile keeps its operation
            if await self._db.execute(
                "UPDATE operations SET state = ?, done = 1, error = ?, current_document_id = '', updated_at = ?, "
                "finished_at = ? WHERE name = ? AND done = 0 AND lease_expires_at < ?",
                (OperationState.FAILED.value, error, now, now, row["name"], now),
            ):
                abandoned.append(row["name"])
        return abandoned

    async def delete(self, name: str) -> bool:
        return bool(await self._db.execute("DELETE FROM operations WHERE name = ?", (name,)))

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        """Delete every operation `caller` submitted (in `tenant_id`; None: in every tenant), with its result or
        error (AdminService.EraseCaller, R-001-20); returns how many. The runner of one still running finds nothing
        to update from then on."""
        if tenant_id is None:
            return await self._db.execute("DELETE FROM operations WHERE owner = ?", (caller,))
        return await self._db.execute("DELETE FROM operations WHERE owner = ? AND tenant_id = ?", (caller, tenant_id))

    async def purge(self, *, retention_days: float, now: datetime | None = None) -> int:
        """Delete the operations that finished more than `retention_days` ago; returns how many."""
        cutoff = (now or utc_now()) - timedelta(days=retention_days)
        return await self._db.execute("DELETE FROM operations WHERE done = 1 AND finished_at < ?", (cutoff,))
