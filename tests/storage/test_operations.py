"""The operation records, on SQLite and on PostgreSQL (the `database` fixture runs each test on both): created
QUEUED and leased, changed only by their runner while they run, cancelled or abandoned from anywhere, listed per
owner newest first, purged after their retention."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ragsvc.domain import IngestProgress
from ragsvc.storage.backend import Backend, utc_now
from ragsvc.storage.operations import OperationKind, OperationState, OperationStore

RUNNER, OTHER = "host:1:aaaa", "host:2:bbbb"


async def created(store: OperationStore, name: str, *, owner: str = "key:acme/a", lease_s: float = 30.0) -> None:
    await store.create(
        name=name,
        kind=OperationKind.INGEST,
        owner=owner,
        tenant_id="acme",
        request_sha256="ab" * 32,
        lease_owner=RUNNER,
        lease_s=lease_s,
        documents_total=3,
    )


async def test_an_operation_is_created_queued_and_leased_then_runs_reports_and_finishes(database: Backend) -> None:
    store = OperationStore(database)
    record = await store.create(
        name="operations/1", kind=OperationKind.ASK, owner="peer:ipv4:127.0.0.1", tenant_id="default",
        request_sha256="cd" * 32, lease_owner=RUNNER, lease_s=30.0,
    )  # fmt: skip
    assert (record.state, record.done, record.kind, record.started_at, record.finished_at) == (
        OperationState.QUEUED, False, OperationKind.ASK, None, None
    )
    assert timedelta(seconds=29) < record.lease_expires_at - record.created_at <= timedelta(seconds=30)

    assert not await store.start("operations/1", OTHER), "only the lease holder starts it"
    assert await store.start("operations/1", RUNNER)
    assert not await store.start("operations/1", RUNNER), "started once"
    progress = IngestProgress(1, 3, 64, 200, "doc-2")
    assert await store.report("operations/1", RUNNER, progress)
    assert not await store.report("operations/1", OTHER, IngestProgress(3, 3, 200, 200))
    running = await store.get("operations/1")
    assert running is not None and running.state is OperationState.RUNNING and running.started_at is not None
    assert running.progress == progress

    assert await store.finish("operations/1", RUNNER, OperationState.SUCCEEDED, response=b"\x0a\x01x")
    assert not await store.finish("operations/1", RUNNER, OperationState.FAILED, error=b"late"), "finished once"
    done = await store.get("operations/1")
    assert done is not None and done.done and done.state is OperationState.SUCCEEDED
    assert (done.response, done.error, done.progress.current_document_id) == (b"\x0a\x01x", None, "")
    assert done.finished_at is not None and done.finished_at >= done.started_at  # type: ignore[operator]
    with pytest.raises(ValueError, match="not a final state"):
        await store.finish("operations/1", RUNNER, OperationState.RUNNING)


async def test_cancellation_is_asked_from_anywhere_and_seen_by_the_runner_only_while_it_is_undone(database: Backend) -> None:
    store = OperationStore(database)
    await created(store, "operations/c")
    assert await store.cancel_requested(RUNNER) == []
    assert await store.request_cancel("operations/c")
    record = await store.get("operations/c")
    assert record is not None and record.state is OperationState.CANCELLING and record.cancel_requested
    assert await store.cancel_requested(RUNNER) == ["operations/c"]
    assert await store.cancel_requested(OTHER) == []
    assert await store.finish("operations/c", RUNNER, OperationState.CANCELLED, error=b"cancelled")
    assert await store.cancel_requested(RUNNER) == []
    assert not await store.request_cancel("operations/c"), "a finished operation is not cancelled"
    assert not await store.request_cancel("operations/unknown")


async def test_an_expired_lease_is_abandoned_once_and_a_renewed_one_is_kept(database: Backend) -> None:
    store = OperationStore(database)
    await created(store, "operations/kept", lease_s=1.0)
    await created(store, "operations/lost", lease_s=1.0)
    await created(store, "operations/finished", lease_s=1.0)
    await store.finish("operations/finished", RUNNER, OperationState.SUCCEEDED, response=b"")
    await store.renew(RUNNER, ["operations/kept"], 3600.0)
    later = utc_now() + timedelta(seconds=5)

    assert await store.abandon_expired(b"abandoned", now=later) == ["operations/lost"]
    assert await store.abandon_expired(b"abandoned", now=later) == [], "abandoned once"
    lost = await store.get("operations/lost")
    assert lost is not None and (lost.state, lost.error, lost.done) == (OperationState.FAILED, b"abandoned", True)
    assert not await store.finish("operations/lost", RUNNER, OperationState.SUCCEEDED, response=b""), (
        "its runner, back from a pause, cannot finish it after another replica failed it"
    )
    kept = await store.get("operations/kept")
    assert kept is not None and kept.state is OperationState.QUEUED


async def test_an_owner_lists_its_own_operations_newest_first_a_page_at_a_time(database: Backend) -> None:
    store = OperationStore(database)
    for i in range(5):
        await created(store, f"operations/{i}")
    await created(store, "operations/theirs", owner="key:acme/b")
    await store.finish("operations/1", RUNNER, OperationState.SUCCEEDED, response=b"")

    first = await store.list_owned("key:acme/a", before_seq=None, limit=2)
    assert [r.name for r in first] == ["operations/4", "operations/3"]
    rest = await store.list_owned("key:acme/a", before_seq=first[-1].seq, limit=10)
    assert [r.name for r in rest] == ["operations/2", "operations/1", "operations/0"]
    assert [r.name for r in await store.list_owned("key:acme/a", before_seq=None, limit=10, done=True)] == ["operations/1"]
    assert len(await store.list_owned("key:acme/a", before_seq=None, limit=10, done=False)) == 4
    assert [r.name for r in await store.list_owned("key:acme/b", before_seq=None, limit=10)] == ["operations/theirs"]


async def test_finished_operations_are_purged_after_their_retention_and_running_ones_never(database: Backend) -> None:
    store = OperationStore(database)
    await created(store, "operations/old")
    await created(store, "operations/running")
    await store.finish("operations/old", RUNNER, OperationState.FAILED, error=b"")
    assert await store.purge(retention_days=1.0) == 0
    assert await store.purge(retention_days=1.0, now=utc_now() + timedelta(days=2)) == 1
    assert await store.get("operations/old") is None
    assert await store.get("operations/running") is not None
    assert await store.delete("operations/running")
    assert not await store.delete("operations/running")


async def test_a_callers_operations_are_erased_finished_or_not(database: Backend) -> None:
    store = OperationStore(database)
    await created(store, "operations/1")
    await created(store, "operations/2")
    await created(store, "operations/3", owner="key:acme/b")
    assert await store.start("operations/1", RUNNER)
    assert await store.erase_caller("key:acme/a", "globex") == 0, "in another tenant it has none"
    assert await store.erase_caller("key:acme/a", "acme") == 2
    assert await store.get("operations/1") is None and await store.get("operations/2") is None
    assert not await store.report("operations/1", RUNNER, IngestProgress(1, 3, 1, 3, "d")), "its runner finds nothing"
    assert await store.get("operations/3") is not None
    assert await store.erase_caller("key:acme/b") == 1, "None: in every tenant"
