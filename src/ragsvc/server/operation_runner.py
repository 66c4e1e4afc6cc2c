"""Runs long-running operations in the background of one replica, and keeps their records true.

`submit` stores a QUEUED operation leased to this replica and starts its work as a task; at most
RAG_OPERATION_MAX_RUNNING operations of each kind run at once (the rest wait QUEUED, up to RAG_OPERATION_MAX_QUEUED;
one more is refused with OVERLOADED). The work's outcome is stored when it ends: its response, or its error as a
google.rpc.Status (`wire.status.to_rpc_status`), so that any replica can answer for it.

Cancellation is asked for in the records (`cancel`, from any replica). The replica running the operation learns it
at once when it was asked here, else within RAG_OPERATION_POLL_SECONDS, and tells the work through its
`OperationControl`: an interruptible work (an ask) is cancelled at once; an ingest stops at its next progress
report, between two embedding batches, so that no document is left half-written.

Leases, so that no operation stays RUNNING forever: this replica renews the lease of the operations it holds every
third of RAG_OPERATION_LEASE_SECONDS. A replica that dies stops renewing, and every replica, this one at its start
included, fails the operations whose lease ran out with ABORTED (OPERATION_ABANDONED). A replica that stops
(`stop`, on SIGTERM, while the gRPC server drains its calls) lets its operations finish within the grace period,
else stops them and fails them the same way.
Leases rather than a fixed replica identity: a restarted process, a new pod and another replica all reclaim
through the same rule, with no identity to configure and no replica trusted to come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

from ragsvc.config import OperationSettings
from ragsvc.domain import IngestProgress
from ragsvc.errors import OperationAbandoned, OperationCancelled, Overloaded, RagError
from ragsvc.storage.operations import OperationKind, OperationRecord, OperationState, OperationStore
from ragsvc.wire.status import domain_error, to_rpc_status

NAME_PREFIX = "operations/"
_log = logging.getLogger(__name__)


@dataclass(eq=False)
class OperationControl:
    """What a running operation's work sees: whether it should stop, and where it reports its progress."""

    name: str
    _store: OperationStore
    _lease_owner: str
    _report_every_s: float
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    stop_error: RagError | None = None  # why it should stop: cancelled by its caller, or abandoned on shutdown
    _last_report: float = 0.0

    def check(self) -> None:
        """Raise the error to stop with when the operation was asked to stop."""
        if self.stop_requested.is_set():
            raise self.stop_error or OperationCancelled("the operation was cancelled")

    async def report(self, progress: IngestProgress) -> None:
        """Record `progress` (at most every RAG_OPERATION_POLL_SECONDS, and the last one), then stop here when the
        operation was asked to."""
        self.check()
        now = time.monotonic()
        final = progress.documents_done == progress.documents_total
        if final or now - self._last_report >= self._report_every_s:
            self._last_report = now
            await self._store.report(self.name, self._lease_owner, progress)
        self.check()


# An operation's work: it returns the operation's response, a google.protobuf.Any packed and serialized.
Work = Callable[[OperationControl], Coroutine[object, object, bytes]]


@dataclass(eq=False)
class _Running:
    control: OperationControl
    interruptible: bool
    task: asyncio.Task[None] | None = None  # the runner's task: waits for a slot, runs the work, stores the end
    work: asyncio.Task[bytes] | None = None  # the work itself, once started
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self, error: RagError) -> None:
        if self.control.stop_error is None:
            self.control.stop_error = error
        self.control.stop_requested.set()
        if self.interruptible and self.work is not None:
            self.work.cancel()


class OperationRunner:
    def __init__(self, store: OperationStore, settings: OperationSettings, *, grace_s: float) -> None:
        self.store = store
        self.settings = settings
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # this process's leases
        self._grace_s = grace_s
        self._slots = {kind: asyncio.Semaphore(settings.operation_max_running) for kind in OperationKind}
        self._waiting = dict.fromkeys(OperationKind, 0)
        self._running: dict[str, _Running] = {}
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Fail what dead replicas left behind now, then keep leases, cancellations and that check going."""
        await self._abandon_expired()
        self._loop = asyncio.get_running_loop().create_task(self._keep(), name="operation leases")

    async def submit(
        self,
        kind: OperationKind,
        *,
        owner: str,
        tenant_id: str,
        request_sha256: str,
        work: Work,
        interruptible: bool,
        documents_total: int = 0,
    ) -> OperationRecord:
        """Store a new operation and start `work` for it; Overloaded when this replica already holds
        RAG_OPERATION_MAX_QUEUED waiting operations of the kind, or is stopping."""
        if self._stopping:
            raise Overloaded("this replica is shutting down: submit the operation again (to another replica)")
        if self._slots[kind].locked() and self._waiting[kind] >= self.settings.operation_max_queued:
            raise Overloaded(
                f"{self._waiting[kind]} {kind} operations are waiting on this replica already; retry shortly",
                metadata={"limit": str(self.settings.operation_max_queued)},
            )
        name = NAME_PREFIX + uuid.uuid4().hex
        record = await self.store.create(
            name=name,
            kind=kind,
            owner=owner,
            tenant_id=tenant_id,
            request_sha256=request_sha256,
            lease_owner=self.replica,
            lease_s=self.settings.operation_lease_s,
            documents_total=documents_total,
        )
        control = OperationControl(name, self.store, self.replica, self.settings.operation_poll_s)
        running = _Running(control, interruptible)
        self._running[name] = running
        self._waiting[kind] += 1
        # The work outlives the call that submitted it: a task of its own, not cancelled when that call ends.
        running.task = asyncio.get_running_loop().create_task(self._run(kind, running, work), name=name)
        return record

    async def cancel(self, name: str) -> bool:
        """Ask the operation to stop, wherever it runs; False when it is done (or gone) already."""
        if not await self.store.request_cancel(name):
            return False
        running = self._running.get(name)
        if running is not None:
            running.stop(OperationCancelled("the operation was cancelled"))
        return True

    async def changed(self, name: str, timeout_s: float) -> None:
        """Wait until the operation ends, if it runs here, or `timeout_s` (at most RAG_OPERATION_POLL_SECONDS when
        it runs elsewhere: its record is read again then)."""
        running = self._running.get(name)
        if running is None:
            await asyncio.sleep(min(timeout_s, self.settings.operation_poll_s))
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(running.finished.wait(), timeout_s)

    async def stop(self) -> None:
        """Refuse new operations; give those running half the grace period to finish, then ask them to stop (an
        ingest stops at its next batch) and give them the other half; cancel what is left. Each one stopped ends
        FAILED with OPERATION_ABANDONED. Stopping again does nothing more."""
        self._stopping = True
        half = self._grace_s / 2
        tasks = {r.task for r in self._running.values() if r.task is not None}
        if tasks:
            _log.info("waiting up to %.1f s for %d operations", self._grace_s, len(tasks))
            _, left = await asyncio.wait(tasks, timeout=half)
            for running in list(self._running.values()):
                running.stop(OperationAbandoned("the server stopped before the operation finished; submit it again"))
            if left:
                _, left = await asyncio.wait(left, timeout=half)
            for running in list(self._running.values()):
                if running.work is not None:
                    running.work.cancel()
            if left:
                await asyncio.wait(left)
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.wait({self._loop})
            self._loop = None

    async def _run(self, kind: OperationKind, running: _Running, work: Work) -> None:
        name = running.control.name
        try:
            slot = await self._slot(kind, running.control.stop_requested)
            self._waiting[kind] -= 1
            if not slot:  # stopped while it waited
                await self._end(running, None)
                return
            try:
                if not await self.store.start(name, self.replica):
                    return  # deleted, or abandoned, while it waited
                running.work = asyncio.get_running_loop().create_task(work(running.control))
                await asyncio.wait({running.work})
                await self._end(running, running.work)
            finally:
                self._slots[kind].release()
        except RagError as exc:  # the records database, while starting or ending: the lease will end it
            _log.warning("operation %s: %s", name, exc)
        finally:
            self._running.pop(name, None)
            running.finished.set()

    async def _slot(self, kind: OperationKind, stop: asyncio.Event) -> bool:
        """Take a running slot of `kind`; False (and no slot) when `stop` is set first."""
        acquire = asyncio.ensure_future(self._slots[kind].acquire())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if acquire.done():
            if stop.is_set():
                self._slots[kind].release()
                return False
            return True
        acquire.cancel()
        return False

    async def _end(self, running: _Running, work: asyncio.Task[bytes] | None) -> None:
        """Store how the operation ended: its response, or the error it stopped or failed with."""
        error: RagError | None = None
        response: bytes | None = None
        if work is None or work.cancelled():
            error = running.control.stop_error or OperationCancelled("the operation was cancelled")
        elif (exc := work.exception()) is not None:
            error = domain_error(exc)
        else:
            response = work.result()
        if error is None:
            state = OperationState.SUCCEEDED
        else:
            state = OperationState.CANCELLED if isinstance(error, OperationCancelled) else OperationState.FAILED
        status = None if error is None else to_rpc_status(error).SerializeToString()
        if not await self.store.finish(running.control.name, self.replica, state, response=response, error=status):
            _log.info("operation %s ended (%s) after it was deleted or abandoned", running.control.name, state)

    async def _keep(self) -> None:
        """Every RAG_OPERATION_POLL_SECONDS: the cancellations asked on other replicas; every third of the lease:
        renew this replica's leases, and fail the operations whose lease ran out."""
        poll_s, renew_s = self.settings.operation_poll_s, self.settings.operation_lease_s / 3
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(min(poll_s, renew_s))
            try:
                if self._running:
                    for name in await self.store.cancel_requested(self.replica):
                        if (running := self._running.get(name)) is not None:
                            running.stop(OperationCancelled("the operation was cancelled"))
                if time.monotonic() - renewed >= renew_s:
                    renewed = time.monotonic()
                    await self.store.renew(self.replica, list(self._running), self.settings.operation_lease_s)
                    await self._abandon_expired()
            except RagError as exc:
                _log.warning("operation leases: %s; trying again in %g s", exc, poll_s)

    async def _abandon_expired(self) -> None:
        error = OperationAbandoned(
            "the replica running the operation stopped before it finished (its lease ran out); submit it again"
        )
        names = await self.store.abandon_expired(to_rpc_status(error).SerializeToString())
        if names:
            _log.warning("failed %d operations abandoned by a replica that died: %s", len(names), ", ".join(names))
