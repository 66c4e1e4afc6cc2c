"""Shared backends failing under a running server: the real PostgreSQL and Redis-protocol servers are stopped in the
middle of a stream of questions and started again, with the server left running.

- PostgreSQL holds the audit log, and no answer goes out without its row: while it is down every answer is a typed
  UNAVAILABLE (DATABASE_UNAVAILABLE, with RetryInfo), never INTERNAL; so is what reads the records (AdminService);
  health says `db` and `""` NOT_SERVING (the replica leaves rotation), the rest SERVING. Once it is back, the same
  server answers again (its pool reconnects) and health returns, with no restart.
- Redis holds only what can be rebuilt or done locally: while it is down answers go on (without the shared cache,
  under this replica's own rate limit); health says `redis` NOT_SERVING and `""` stays SERVING. Once it is back,
  the cache serves again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from ragsvc.server.app import RagServer
from ragsvc.v1 import admin_service_pb2 as admin_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.polling import eventually
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer
from tests.support.rpc_details import details_of
from tests.support.servers import Stubs, connected, running_server, wait_for_health

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
PROBE_INTERVAL_S = 0.2
# A probe interval, plus PostgreSQL's health check timing out against a server that stopped (2 s), plus margin.
HEALTH_WITHIN_S = 8.0
QUESTION = "What happens on SIGTERM?"


@pytest.fixture
async def shared(
    tmp_path: Path, demo_index: Callable[[Path], Path], postgres_url: str, redis_url: str
) -> AsyncIterator[tuple[RagServer, Stubs]]:
    """A server on PostgreSQL and Redis, with the answer cache on and a rate limit that the test never reaches."""
    async with running_server(
        demo_index(tmp_path), database_url=postgres_url, redis_url=redis_url, cache_max_entries=100,
        rate_limit_per_minute=10_000, health_probe_interval_s=PROBE_INTERVAL_S, redis_retry_s=0.2,
    ) as server, connected(server) as stubs:  # fmt: skip
        yield server, stubs


class Load:
    """Asks in a loop while the test breaks things, keeping the status code of every call."""

    def __init__(self, stubs: Stubs) -> None:
        self.codes: Counter[grpc.StatusCode] = Counter()
        self.reasons: Counter[str] = Counter()
        self.last_ok = 0.0
        self._stubs = stubs
        self._task: asyncio.Task[None] | None = None

    def __str__(self) -> str:
        codes = ", ".join(f"{code.name} {count}" for code, count in self.codes.items())
        return f"{codes}; reasons: {dict(self.reasons)}"

    async def __aenter__(self) -> Load:
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self._stubs.rag.Ask(pb.AskRequest(query=QUESTION, explain=True), timeout=30)
            except grpc.aio.AioRpcError as exc:
                self.codes[exc.code()] += 1
                self.reasons[details_of(exc).reason] += 1
            else:
                self.codes[grpc.StatusCode.OK] += 1
                self.last_ok = time.monotonic()
            await asyncio.sleep(0.01)


async def statuses(stubs: Stubs) -> dict[str, int]:
    names = ("", "db", "redis", "retrieval", "embedder", "liveness", "ragsvc.v1.AdminService")
    return {name: (await stubs.health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)).status for name in names}


async def test_postgresql_stopped_mid_run_is_unavailable_then_recovers_without_a_restart(
    shared: tuple[RagServer, Stubs], postgres_server: PostgresServer
) -> None:
    server, stubs = shared
    await wait_for_health(stubs.health, "", SERVING, within_s=HEALTH_WITHIN_S)
    async with Load(stubs) as load:
        await asyncio.sleep(0.3)
        assert load.codes[grpc.StatusCode.OK] > 0
        await asyncio.to_thread(postgres_server.stop, "immediate")
        try:
            await wait_for_health(stubs.health, "db", NOT_SERVING, within_s=HEALTH_WITHIN_S)
            await wait_for_health(stubs.health, "", NOT_SERVING, within_s=HEALTH_WITHIN_S)
            health = await statuses(stubs)
            assert (health["retrieval"], health["embedder"], health["redis"], health["liveness"]) == (SERVING,) * 4
            assert health["ragsvc.v1.AdminService"] == NOT_SERVING

            with pytest.raises(grpc.aio.AioRpcError) as asked:
                await stubs.rag.Ask(pb.AskRequest(query=QUESTION), timeout=30)
            with pytest.raises(grpc.aio.AioRpcError) as listed:
                await stubs.admin.ListPromptTemplates(admin_pb.ListPromptTemplatesRequest(), timeout=30)
            for refused in (asked.value, listed.value):
                details = details_of(refused)
                assert (details.code, details.reason) == (grpc.StatusCode.UNAVAILABLE, "DATABASE_UNAVAILABLE")
                assert details.retry_after_s is not None
            down_at, down_at_wall = time.monotonic(), datetime.now(UTC)
        finally:
            await asyncio.to_thread(postgres_server.start)
        await wait_for_health(stubs.health, "", SERVING, within_s=HEALTH_WITHIN_S)
        await eventually(lambda: load.last_ok > down_at, within_s=10)
    print(f"\nasks while PostgreSQL stopped and started again: {load}")
    assert set(load.codes) == {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, "typed, never INTERNAL"
    assert set(load.reasons) == {"DATABASE_UNAVAILABLE"}
    # The calls in flight when the load stops are cancelled and logged so; the answers after recovery are there.
    rows = await server.components.answers.recent(server.settings.server.default_tenant, limit=100)
    answered_since = [row for row in rows if row["outcome"] in ("answered", "routed") and row["created_at"] > down_at_wall]
    assert answered_since, "the audit log is written again"


async def test_redis_stopped_mid_run_degrades_and_answers_go_on(
    shared: tuple[RagServer, Stubs], redis_server: RedisServer
) -> None:
    server, stubs = shared
    await wait_for_health(stubs.health, "redis", SERVING, within_s=HEALTH_WITHIN_S)

    async def cache_hit() -> bool:
        return (await stubs.rag.Ask(pb.AskRequest(query=QUESTION), timeout=30)).answer.flags.cache_hit

    await cache_hit()
    assert await cache_hit(), "the shared cache serves"
    async with Load(stubs) as load:
        await asyncio.sleep(0.3)
        redis_server.stop("kill")
        try:
            await wait_for_health(stubs.health, "redis", NOT_SERVING, within_s=HEALTH_WITHIN_S)
            assert (await statuses(stubs))[""] == SERVING, "a Redis outage never takes the replica out of rotation"
            assert not await cache_hit() and not await cache_hit(), "answered, without the cache"
            answered_while_down = load.codes[grpc.StatusCode.OK]
            await asyncio.sleep(0.5)
            assert load.codes[grpc.StatusCode.OK] > answered_while_down
        finally:
            redis_server.start()
        await wait_for_health(stubs.health, "redis", SERVING, within_s=HEALTH_WITHIN_S)
    print(f"\nasks while Redis stopped and started again: {load}")
    assert set(load.codes) == {grpc.StatusCode.OK}, "no call failed"
    # A connection pooled before the restart fails once more ("Connection closed by server") and the guard skips
    # Redis for retry_after_s again, a miss at most: the cache serves within a few of those windows.
    deadline = time.monotonic() + HEALTH_WITHIN_S
    while not await cache_hit():
        assert time.monotonic() < deadline, "the cache serves again once Redis is back"
        await asyncio.sleep(server.components.shared.guard.retry_after_s if server.components.shared else 0.2)
    assert server.components.shared is not None and not server.components.shared.guard.degraded
