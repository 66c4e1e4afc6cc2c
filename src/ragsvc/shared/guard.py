"""The one boundary between ragsvc and Redis: every call to Redis goes through `RedisGuard.run`.

Redis holds what replicas share (answer cache, rate-limit buckets), never what an answer needs. So when Redis
fails, a call does not fail the request: `run` returns the fallback the call site chose (a cache miss, a local
rate-limit decision), logs the outage once, and skips Redis for `retry_after_s` before trying again (a down
Redis must not add a connect timeout to every request). `degraded` says whether Redis is out; `check_health`
raises SharedStateUnavailable then, for a health name of its own ("redis") that does not take the service down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ragsvc.errors import SharedStateUnavailable

T = TypeVar("T")
_log = logging.getLogger(__name__)


def connect(url: str, *, timeout_s: float = 0.5) -> aioredis.Redis:
    """A client for `url` (redis://host:port/db, rediss:// for TLS) with short timeouts: a slow Redis must cost
    a request little more than a miss. Connections are made lazily, at the first call."""
    return aioredis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)


class RedisGuard:
    def __init__(
        self, client: aioredis.Redis, *, retry_after_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._down_since: float | None = None
        self._retry_at = 0.0
        self.failures = 0  # calls that failed (not those skipped while down)

    @property
    def degraded(self) -> bool:
        return self._down_since is not None

    async def run(self, call: Callable[[aioredis.Redis], Awaitable[T]], fallback: T) -> T:
        """`call(client)`'s result, or `fallback` when Redis fails or is known to be down."""
        if self._down_since is not None and self._clock() < self._retry_at:
            return fallback
        try:
            result = await call(self.client)
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return fallback
        self._succeeded()
        return result

    async def check_health(self) -> None:
        """Return when Redis answers PING; SharedStateUnavailable when it does not (tried now, not skipped)."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as exc:
            self._failed(exc)
            raise SharedStateUnavailable(f"Redis is unreachable: {exc}") from exc
        self._succeeded()

    async def aclose(self) -> None:
        await self.client.aclose()

    def _succeeded(self) -> None:
        if self._down_since is not None:
            _log.warning("Redis is back after %.1f s", self._clock() - self._down_since)
            self._down_since = None

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        now = self._clock()
        if self._down_since is None:
            self._down_since = now
            _log.warning("Redis failed, going on without it (retrying every %g s): %s", self.retry_after_s, exc)
        self._retry_at = now + self.retry_after_s
