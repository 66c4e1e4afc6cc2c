"""Load limits: a per-client rate limit, a cap on asks in flight, and the transport limits of the server.

Both limits refuse at once with RESOURCE_EXHAUSTED and RetryInfo (the rate limit adds QuotaFailure): nothing
waits in a queue, so a flood costs the server one cheap refusal per call and never a growing backlog.

The rate limit is a `RateLimit`: `TokenBuckets` here counts one process's calls (the default), and
`ragsvc.shared.limits.RedisTokenBuckets` counts all replicas' together when RAG_REDIS_URL is set (falling back
to this process's own buckets while Redis is out). The cap on calls in flight is always per process: it protects
the process it runs in.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from ragsvc.config import HardeningSettings
from ragsvc.errors import Overloaded, RateLimited
from ragsvc.server.auth import bearer_token
from ragsvc.server.interceptors import CallInput, Interceptor

OVERLOADED_RETRY_AFTER_S = 1.0
MAX_TRACKED_CLIENTS = 10_000


def client_identity(call: CallInput) -> str:
    """Who a call counts against: its key (when authenticated), else its bearer token, else its peer address."""
    principal = call.state.principal
    if principal is not None:
        return f"key:{principal.name}"
    token = bearer_token(call.metadata)
    if token is not None:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]
    return "peer:" + peer_host(call.peer)


def peer_host(peer: str) -> str:
    """The address of a gRPC peer string without its port ("ipv4:127.0.0.1:5123" -> "ipv4:127.0.0.1")."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer


class RateLimit(Protocol):
    """A token per call per client: `per_minute` tokens, refilled evenly over a minute (so a client may spend a
    whole minute's quota at once, then one call per 60/per_minute seconds)."""

    per_minute: int

    async def take(self, client: str) -> float:
        """Take a token for `client`: 0.0 when granted, else the seconds until one will be there."""
        ...


class TokenBuckets:
    """The `RateLimit` of one process: one token bucket per client, in memory."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)

    def __len__(self) -> int:
        return len(self._buckets)

    async def take(self, client: str) -> float:
        now = self._clock()
        tokens, at = self._buckets.get(client, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - at) * self._rate)
        if tokens >= 1.0:
            self._buckets[client] = (tokens - 1.0, now)
            if len(self._buckets) > MAX_TRACKED_CLIENTS:
                self._forget_full(now)
            return 0.0
        self._buckets[client] = (tokens, now)
        return (1.0 - tokens) / self._rate

    def _forget_full(self, now: float) -> None:
        """Drop the clients whose bucket has refilled: they are indistinguishable from new ones."""
        for client, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self._rate >= self.per_minute:
                del self._buckets[client]


class RateLimitInterceptor(Interceptor):
    """RAG_API_RATE_LIMIT calls per minute per client identity -> RESOURCE_EXHAUSTED RATE_LIMITED."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit

    @contextlib.asynccontextmanager
    async def intercept(self, call: CallInput) -> AsyncIterator[None]:
        client = client_identity(call)
        wait_s = await self.limit.take(client)
        if wait_s > 0:
            quota = f"{self.limit.per_minute} requests per minute"
            raise RateLimited(
                f"rate limit of {quota} reached; retry in {math.ceil(wait_s)} s",
                retry_after_s=round(wait_s, 3),
                metadata={"client": client, "quota": quota},
            )
        yield


class ConcurrencyLimitInterceptor(Interceptor):
    """At most `limit` Ask/AskStream calls in flight; one more is refused at once (RESOURCE_EXHAUSTED
    OVERLOADED), never queued."""

    def __init__(self, limit: int, *, retry_after_s: float = OVERLOADED_RETRY_AFTER_S) -> None:
        self.limit = limit
        self.in_flight = 0
        self._retry_after_s = retry_after_s

    @contextlib.asynccontextmanager
    async def intercept(self, call: CallInput) -> AsyncIterator[None]:
        if not call.is_ask:
            yield
            return
        if self.in_flight >= self.limit:
            raise Overloaded(
                f"{self.limit} questions are already in flight; retry shortly",
                retry_after_s=self._retry_after_s,
                metadata={"limit": str(self.limit)},
            )
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


def server_options(settings: HardeningSettings) -> list[tuple[str, int]]:
    """grpc.aio server options: message size limits (grpc itself refuses bigger messages with
    RESOURCE_EXHAUSTED) and keepalive, pinging idle clients and enforcing how often clients may ping."""
    options = [
        ("grpc.max_receive_message_length", settings.max_receive_message_bytes),
        ("grpc.max_send_message_length", settings.max_send_message_bytes),
        ("grpc.keepalive_time_ms", int(settings.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_s * 1000)),
        # Enforcement: a client pinging more often than this gets strikes, and GOAWAY after max_ping_strikes.
        ("grpc.http2.min_ping_interval_without_data_ms", int(settings.keepalive_min_ping_interval_s * 1000)),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.keepalive_permit_without_calls", 0),
    ]
    if settings.max_connection_age_s:
        # GOAWAY after this age; calls in flight get the keepalive timeout to finish.
        options.append(("grpc.max_connection_age_ms", int(settings.max_connection_age_s * 1000)))
        options.append(("grpc.max_connection_age_grace_ms", int(settings.keepalive_timeout_s * 1000)))
    return options
