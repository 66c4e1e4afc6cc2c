"""State shared by replicas on Redis (or Valkey), used when RAG_REDIS_URL names one; memory is the default.

- guard.py      `connect(url)` and `RedisGuard`, the one boundary: Redis failing never fails a request
- cache.py      `RedisAnswerCache`: answer cache and idempotent replays, invalidation seen by every replica
- limits.py     `RedisTokenBuckets`: the per-client rate limit for all replicas together (fails open to the
                replica's own limit while Redis is out)
- changes.py    `ChangeFeed`: a template or weight change on one replica reloaded by all within a second
- protocols.py  the interfaces the server calls; codec.py: answers as JSON
"""
