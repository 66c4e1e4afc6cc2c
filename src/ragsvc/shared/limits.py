"""The per-client rate limit on Redis: one token bucket per client for all replicas together, so a client gets
`per_minute` calls a minute from the whole service, not from each replica. The `ragsvc.server.limits.RateLimit`
that `TokenBuckets` is in one process (full bucket at first, refilled evenly over a minute; 0.0 when granted,
else the seconds until a token).

The bucket is read, refilled, spent and written by one Lua script, atomically on the server, with the server's
clock (`TIME`), so replicas with skewed clocks still agree. A bucket's key expires once it would be full again:
an idle client costs nothing, as in memory.

Redis down (policy: fail open to the replica's own limit). The limiter protects the service from one client
taking more than its share; it is not an authorization check. Failing closed would turn a cache-class outage
into a full outage for every client, and the in-flight cap (ConcurrencyLimitInterceptor, per replica) still
protects each replica from overload. So while Redis is out, `take` asks `fallback` (give it the in-memory
`TokenBuckets(per_minute).take`: the limit holds per replica, N x per_minute in all, as without Redis) or grants
when there is none. The guard reports the outage (health "redis" NOT_SERVING) and retries Redis every second.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ragsvc.shared.guard import RedisGuard

_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now
if ARGV[3] ~= '' then
    now = tonumber(ARGV[3])
else
    local t = redis.call('TIME')
    now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
return string.format('%.17g', wait)
"""


class RedisTokenBuckets:
    """`clock`, when given, replaces Redis's clock (tests); `fallback` answers while Redis is out."""

    def __init__(
        self,
        guard: RedisGuard,
        per_minute: int,
        *,
        prefix: str = "{ragsvc}:rate",
        fallback: Callable[[str], Awaitable[float]] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if per_minute < 1:
            raise ValueError(f"per_minute must be at least 1, not {per_minute}")
        self.per_minute = per_minute
        self._guard = guard
        self._prefix = prefix
        self._fallback = fallback
        self._clock = clock
        self._script = guard.client.register_script(_TAKE)

    async def take(self, client: str) -> float:
        """Take a token for `client`: 0.0 when granted, else the seconds until one will be there."""
        now = "" if self._clock is None else repr(self._clock())
        args: list[str | int | float] = [self.per_minute, self.per_minute / 60.0, now]
        keys = [f"{self._prefix}:{client}"]
        wait = await self._guard.run(lambda r: self._script(keys=keys, args=args, client=r), None)
        if wait is None:
            return await self._fallback(client) if self._fallback is not None else 0.0
        return float(wait)
