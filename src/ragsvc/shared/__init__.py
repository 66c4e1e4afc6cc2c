"""State shared by replicas on Redis (or Valkey), used when RAG_REDIS_URL names one; memory is the default.
The interfaces are the server's: `ragsvc.answering.cache.AnswerStore` and `ragsvc.server.limits.RateLimit`.

- guard.py      `connect(url)` and `RedisGuard`, the one boundary: Redis failing never fails a request
- cache.py      `RedisAnswerCache`: answer cache and idempotent replays, invalidation seen by every replica
- limits.py     `RedisTokenBuckets`: the per-client rate limit for all replicas together (fails open to the
                replica's own limit while Redis is out)
- changes.py    `ChangeFeed`: a template or weight change on one replica reloaded by all within a second
- state.py      `SharedState`: the one client, and everything above built on it from the settings
- codec.py      answers as JSON (never pickle: whoever writes to Redis must not run code in a replica)
"""
