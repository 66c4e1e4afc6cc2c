"""Changes that every replica must apply, announced through Redis: a template created, updated or deleted, new
ranking weights. The change itself is in the records database; the feed only says that a topic changed, and
each replica reloads that topic from the database.

Each topic is a counter in Redis (`{prefix}:<topic>`), raised by `announce`. Every replica reads all counters
every `interval_s` (one MGET) and calls the topic's callbacks when a counter differs from what it last saw, so a
change made on one replica applies on all within `interval_s` plus the reload (the issue asks for one second).
A counter that went backwards (Redis restarted empty) counts as a change too: reloading is always safe.
Polling rather than pub/sub: a replica that was disconnected for a while still sees every topic that changed
meanwhile at its next read, with nothing to replay.

Redis down: the poll skips and tries again at the next interval; an `announce` that cannot reach Redis is
remembered and made at the first poll that reaches it again (a replica restarted meanwhile forgets it: the
others then load that change at their own next start or the topic's next change).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from ragsvc.shared.guard import RedisGuard

Callback = Callable[[], Awaitable[object]]
_log = logging.getLogger(__name__)


class ChangeFeed:
    def __init__(
        self,
        guard: RedisGuard,
        topics: Iterable[str],
        *,
        interval_s: float = 0.25,
        prefix: str = "{ragsvc}:changes",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.topics = tuple(topics)
        self.interval_s = interval_s
        self._guard = guard
        self._prefix = prefix
        self._sleep = sleep
        self._seen: dict[str, int] = {}  # the counters at the last read (0: never raised)
        self._read = False
        self._unannounced: set[str] = set()  # changes made here while Redis was out, announced once it is back
        self._callbacks: dict[str, list[Callback]] = {topic: [] for topic in self.topics}
        self._task: asyncio.Task[None] | None = None

    def on_change(self, topic: str, callback: Callback) -> None:
        """Call `callback` when another replica announces a change of `topic`."""
        self._callbacks[topic].append(callback)

    async def announce(self, topic: str) -> bool:
        """Tell the other replicas that `topic` changed; False when Redis could not be reached."""
        if topic not in self._callbacks:
            raise KeyError(f"unknown topic {topic!r}")
        value = await self._guard.run(lambda r: r.incr(self._key(topic)), None)
        if value is None:
            if topic not in self._unannounced:
                _log.warning("could not announce a change of %s yet (Redis is out): retrying at each poll", topic)
            self._unannounced.add(topic)
            return False
        self._unannounced.discard(topic)
        if self._read and self._seen.get(topic) == int(value) - 1:
            self._seen[topic] = int(value)  # our own change: nothing to reload here
        return True

    async def poll_once(self) -> list[str]:
        """Read every counter; run the callbacks of the topics that changed since the last read; returns them.
        The first read only records where the counters are."""
        for topic in sorted(self._unannounced):
            await self.announce(topic)
        values = await self._guard.run(lambda r: r.mget([self._key(topic) for topic in self.topics]), None)
        if values is None:
            return []
        current = {topic: int(value or 0) for topic, value in zip(self.topics, values, strict=True)}
        first, self._read = not self._read, True
        changed = [] if first else [topic for topic in self.topics if current[topic] != self._seen.get(topic)]
        self._seen = current
        for topic in changed:
            for callback in self._callbacks[topic]:
                try:
                    await callback()
                except Exception:  # noqa: BLE001 - a reload that fails must not stop the feed; it is logged
                    _log.exception("reloading %s after a change on another replica failed", topic)
        return changed

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="change feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await self._sleep(self.interval_s)

    def _key(self, topic: str) -> str:
        return f"{self._prefix}:{topic}"
