"""The answer cache on Redis, shared by every replica: what one replica cached, all serve; what one invalidates,
none serves any more. The `ragsvc.answering.cache.AnswerStore` that `MemoryAnswerCache` is in one process (keys,
what is admitted, the per-tenant generation that keeps an answer computed during an ingest from being stored).

Layout under `prefix` (a hash tag, so every key of one cache lives in one cluster slot):
- `{prefix}:e:<key>`: a cached answer with the fingerprint of its request (JSON, ragsvc.shared.codec: a
  `Recorded`), expiring after the TTL;
- `{prefix}:gen:<tenant>`: the tenant's generation, a counter raised by every invalidation of the tenant;
- `{prefix}:gen-templates`: raised by every invalidation of a template; a generation is the sum of the two;
- `{prefix}:t:<tenant>`, `{prefix}:tpl:<template>`: the entry keys written for a tenant and from a template;
- `{prefix}:c:<caller>`: the entry keys written by a caller's requests (for `erase_caller`).
`put` (checking the generation), `invalidate_tenant`, `invalidate_template` and `erase_caller` are Lua scripts,
atomic on the server: an invalidation deletes the entries at once for every replica, and no put of an answer computed before
it can land after it. The TTL bounds memory per entry; the number of entries is bounded by Redis's own
`maxmemory` with an LRU policy (set `maxmemory-policy allkeys-lru` or `volatile-lru`), not by `max_entries`.

Redis down (policy): the cache is skipped, never an error. A get is a miss, a put stores nothing, and an
invalidation that could not reach Redis is remembered and applied as soon as Redis answers again, before
anything else is read from it (until then nothing is read: the entries it would have dropped are not served).
A replica restarted meanwhile forgets such invalidations; the TTL bounds what could then be served stale.
An erasure is the exception: it fails (SharedStateUnavailable) rather than report entries dropped that were not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from ragsvc.answering.cache import Recorded, request_fingerprint
from ragsvc.domain import Answer, Question
from ragsvc.errors import SharedStateUnavailable
from ragsvc.shared.codec import decode, encode
from ragsvc.shared.guard import RedisGuard

_log = logging.getLogger(__name__)

# KEYS[1]: the entry; KEYS[2], KEYS[3]: the tenant's and the templates' generations; then the sets it joins.
_PUT = """
local generation = tonumber(redis.call('GET', KEYS[2]) or '0') + tonumber(redis.call('GET', KEYS[3]) or '0')
if generation ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
for i = 4, #KEYS do
    redis.call('SADD', KEYS[i], KEYS[1])
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
"""
# KEYS[1]: the set of entry keys to drop; KEYS[2], when given: the generation to raise.
_DROP = """
local members = redis.call('SMEMBERS', KEYS[1])
local dropped = 0
for i = 1, #members, 500 do
    dropped = dropped + redis.call('DEL', unpack(members, i, math.min(i + 499, #members)))
end
redis.call('DEL', KEYS[1])
if #KEYS > 1 then redis.call('INCR', KEYS[2]) end
return dropped
"""

# KEYS[1]: a caller's set of entry keys; KEYS[2], when given: the tenant's, to drop only the entries of that tenant.
_ERASE = """
local members
if #KEYS > 1 then members = redis.call('SINTER', KEYS[1], KEYS[2]) else members = redis.call('SMEMBERS', KEYS[1]) end
local dropped = 0
for i = 1, #members, 500 do
    local batch = {unpack(members, i, math.min(i + 499, #members))}
    dropped = dropped + redis.call('DEL', unpack(batch))
    for k = 1, #KEYS do redis.call('SREM', KEYS[k], unpack(batch)) end
end
if #KEYS == 1 then redis.call('DEL', KEYS[1]) end
return dropped
"""


@dataclass
class _Missed:
    """Invalidations that could not reach Redis, applied when it answers again."""

    tenants: set[str] = field(default_factory=set)
    templates: set[str] = field(default_factory=set)
    clear: bool = False

    def __bool__(self) -> bool:
        return bool(self.tenants or self.templates or self.clear)


class RedisAnswerCache:
    """The `AnswerStore` on Redis. `admits` says which answers are kept: `ragsvc.answering.cache.is_cacheable` for
    the answer cache, every answer for idempotent replays; give each its own `prefix`."""

    def __init__(
        self,
        guard: RedisGuard,
        *,
        ttl_s: float,
        admits: Callable[[Answer], bool],
        prefix: str = "{ragsvc}:answers",
    ) -> None:
        self.ttl_s = ttl_s
        self._guard = guard
        self._prefix = prefix
        self._admits = admits
        self._put_script = guard.client.register_script(_PUT)
        self._drop_script = guard.client.register_script(_DROP)
        self._erase_script = guard.client.register_script(_ERASE)
        self._missed = _Missed()

    async def get(self, key: str) -> Recorded | None:
        if not await self._caught_up():
            return None
        data = await self._guard.run(lambda r: r.get(self._entry(key)), None)
        if data is None:
            return None
        try:
            return decode(data, Recorded)
        except (ValueError, TypeError, KeyError) as exc:  # written by another release, or damaged: a miss
            _log.warning("dropping an unreadable cache entry: %s", exc)
            await self._guard.run(lambda r: r.delete(self._entry(key)), 0)
            return None

    async def generation(self, tenant_id: str) -> int:
        """The tenant's current generation: take it before computing an answer, hand it to `put`. -1 while
        Redis is out (no put can match it)."""
        while_out: list[bytes | str | None] = [b"-1", b"0"]
        values = await self._guard.run(lambda r: r.mget(self._generation(tenant_id), self._templates_generation), while_out)
        return sum(int(value or 0) for value in values)

    async def put(self, key: str, answer: Answer, *, question: Question, generation: int) -> bool:
        """Store `answer` unless it is not admitted or the tenant changed since `generation`; True if stored."""
        if not self._admits(answer) or generation < 0 or not await self._caught_up():
            return False
        templates = sorted({t for t in (question.template_id, answer.template_version) if t})
        keys = [self._entry(key), self._generation(question.tenant_id), self._templates_generation,
                self._tenant(question.tenant_id), self._caller(question.caller),
                *(self._template(t) for t in templates)]  # fmt: skip
        recorded = Recorded(answer, request_fingerprint(question))
        args: list[str | int | bytes] = [generation, max(1, round(self.ttl_s * 1000)), encode(recorded)]
        stored = await self._guard.run(lambda r: self._put_script(keys=keys, args=args, client=r), 0)
        return bool(stored)

    async def invalidate_tenant(self, tenant_id: str) -> int:
        """Drop every entry of `tenant_id` on every replica (after an ingest or delete); returns how many."""
        await self._caught_up()
        dropped = await self._drop([self._tenant(tenant_id), self._generation(tenant_id)])
        if dropped is None:
            self._missed.tenants.add(tenant_id)
        return dropped or 0

    async def invalidate_template(self, template_id: str) -> int:
        """Drop every entry written from template `template_id` (after it changed); returns how many."""
        await self._caught_up()
        dropped = await self._drop([self._template(template_id), self._templates_generation])
        if dropped is None:
            self._missed.templates.add(template_id)
        return dropped or 0

    async def clear(self) -> None:
        """Drop every entry (the generations stay)."""
        await self._caught_up()
        if not await self._clear():
            self._missed.clear = True

    async def erase_caller(self, caller: str, tenant_id: str | None = None) -> int:
        """Drop every entry `caller`'s requests wrote (in `tenant_id`; None: in every tenant) on every replica;
        returns how many. SharedStateUnavailable when Redis cannot be reached."""
        await self._caught_up()
        keys = [self._caller(caller)] + ([] if tenant_id is None else [self._tenant(tenant_id)])
        dropped: int | None = await self._guard.run(lambda r: self._erase_script(keys=keys, client=r), None)
        if dropped is None:
            raise SharedStateUnavailable(f"Redis is unreachable: the answers {self._prefix} holds of the caller were not erased")
        return dropped

    async def _drop(self, keys: list[str]) -> int | None:
        """Run the drop script; None when Redis could not be reached."""
        result: int | None = await self._guard.run(lambda r: self._drop_script(keys=keys, client=r), None)
        return result

    async def _clear(self) -> bool:
        async def run(client: aioredis.Redis) -> bool:
            for kind in ("e", "t", "tpl", "c"):
                batch: list[bytes] = []
                async for found in client.scan_iter(match=f"{self._prefix}:{kind}:*", count=500):
                    batch.append(found)
                    if len(batch) == 500:
                        await client.delete(*batch)
                        batch = []
                if batch:
                    await client.delete(*batch)
            return True

        return await self._guard.run(run, False)

    async def _caught_up(self) -> bool:
        """Apply the invalidations Redis missed, if any; False while some are still pending."""
        if not self._missed:
            return True
        missed, self._missed = self._missed, _Missed()
        if missed.clear and not await self._clear():
            self._missed.clear = True
        for tenant in missed.tenants:
            if await self._drop([self._tenant(tenant), self._generation(tenant)]) is None:
                self._missed.tenants.add(tenant)
        for template in missed.templates:
            if await self._drop([self._template(template), self._templates_generation]) is None:
                self._missed.templates.add(template)
        if not self._missed:
            _log.info("applied the cache invalidations Redis missed while it was out")
        return not self._missed

    def _entry(self, key: str) -> str:
        return f"{self._prefix}:e:{key}"

    def _generation(self, tenant_id: str) -> str:
        return f"{self._prefix}:gen:{tenant_id}"

    @property
    def _templates_generation(self) -> str:
        return f"{self._prefix}:gen-templates"

    def _tenant(self, tenant_id: str) -> str:
        return f"{self._prefix}:t:{tenant_id}"

    def _template(self, template_id: str) -> str:
        return f"{self._prefix}:tpl:{template_id}"

    def _caller(self, caller: str) -> str:
        return f"{self._prefix}:c:{caller}"
