"""grpc.health.v1 for a service mesh: each name says what a caller of it needs to know.

Every dependency is probed in the background and reported under its own name (`retrieval`: the vector engine,
`embedder`, `llm`, `db`: the records database, SQLite or PostgreSQL alike; `redis`: the state replicas share, only
when RAG_REDIS_URL is set). Each service name is SERVING while the dependencies its RPCs need are, and `""` means
"this replica can answer":

- `""` and `ragsvc.v1.RagService`: retrieval, embedder, db, and the llm; with RAG_FALLBACK_EXTRACTIVE the
  extractive fallback answers when the llm cannot, so an llm outage degrades answers (`llm` NOT_SERVING,
  rag_dependency_up{dependency="llm"} 0, answers flagged degraded) without taking the replica out of rotation;
- `ragsvc.v1.IndexService`: retrieval, embedder, db (never the llm);
- `ragsvc.v1.AdminService`: db (templates and weights live there; SimulateAsk reports a retrieval outage as
  UNAVAILABLE);
- `retrieval`, `embedder`, `llm`, `db`, `redis`: that dependency answers its probe;
- no service name needs `redis`: while Redis is out, answers go on without the shared cache, the rate limit falls
  back to each replica's own, and template and weight changes reach the other replicas once it is back. So a
  Redis outage degrades (`redis` NOT_SERVING, rag_dependency_up{dependency="redis"} 0) and never takes a replica
  out of rotation. PostgreSQL is another matter: it holds the audit log, and an answer without its audit row is
  never sent, so `db` is needed by `""` whichever database it is;
- `liveness`: SERVING from start until shutdown begins, whatever the dependencies do. It is the name for a
  liveness probe: a dependency outage must take a replica out of rotation (readiness, on `""`), not restart it;
  a wedged process does not answer at all, which is what a liveness probe detects.

Every name is NOT_SERVING until the first probes ran, so no caller is routed to a replica before it knows it
can answer.

A dependency's state changes are logged once (and again every REPEAT_LOG_S while it stays down), and reported
to `on_change` (the metrics' rag_dependency_up gauge).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from grpc_health.v1 import health_pb2
from grpc_health.v1.health import aio

Probe = Callable[[], Awaitable[None]]
LIVENESS = "liveness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
REPEAT_LOG_S = 300.0
_log = logging.getLogger(__name__)


def requirements(*, rag_service: str, index_service: str, admin_service: str, llm_fallback: bool) -> dict[str, frozenset[str]]:
    """The dependencies each service name needs (see the module docstring)."""
    answering = frozenset({"retrieval", "embedder", "db"} | (set() if llm_fallback else {"llm"}))
    return {
        "": answering,
        rag_service: answering,
        index_service: frozenset({"retrieval", "embedder", "db"}),
        admin_service: frozenset({"db"}),
    }


class HealthMonitor:
    def __init__(
        self,
        servicer: aio.HealthServicer,
        probes: Mapping[str, Probe],
        *,
        needs: Mapping[str, frozenset[str]],
        interval_s: float,
        probe_timeout_s: float = 5.0,
        on_change: Callable[[Mapping[str, bool]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        unknown = {dependency for needed in needs.values() for dependency in needed} - set(probes)
        if unknown:
            raise ValueError(f"no probe for {', '.join(sorted(unknown))}")
        self.servicer = servicer
        self._probes = dict(probes)
        self._needs = dict(needs)
        self._interval_s = interval_s
        self._probe_timeout_s = probe_timeout_s
        self._on_change = on_change
        self._clock = clock
        self._healthy: dict[str, bool] = {}
        self._last_logged: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def names(self) -> Sequence[str]:
        """Every name this monitor reports."""
        return (*self._needs, *self._probes, LIVENESS)

    async def probe_once(self) -> dict[str, bool]:
        """Run every probe concurrently and publish the results; returns dependency -> healthy."""
        results = await asyncio.gather(*(self._probe(name, probe) for name, probe in self._probes.items()))
        healthy = dict(zip(self._probes, results, strict=True))
        changed = healthy != self._healthy
        self._healthy = healthy
        # After enter_graceful_shutdown the servicer ignores these: NOT_SERVING stays.
        for name, ok in healthy.items():
            await self.servicer.set(name, SERVING if ok else NOT_SERVING)
        for name, needed in self._needs.items():
            await self.servicer.set(name, SERVING if all(healthy[d] for d in needed) else NOT_SERVING)
        if changed and self._on_change is not None:
            self._on_change(healthy)
        return healthy

    async def _probe(self, name: str, probe: Probe) -> bool:
        try:
            async with asyncio.timeout(self._probe_timeout_s):
                await probe()
        except Exception as exc:  # noqa: BLE001 - any failure of a probe means "not serving"
            self._log_down(name, exc)
            return False
        if self._healthy.get(name) is False:
            _log.info("dependency %s is back", name)
        self._last_logged.pop(name, None)
        return True

    def _log_down(self, name: str, exc: Exception) -> None:
        """Log a dependency going down once, then every REPEAT_LOG_S while it stays down."""
        now = self._clock()
        last = self._last_logged.get(name)
        if last is None or now - last >= REPEAT_LOG_S:
            self._last_logged[name] = now
            still = "still " if self._healthy.get(name) is False else ""
            _log.warning("dependency %s is %sdown: %s", name, still, exc)

    async def start(self) -> None:
        """Probe once (so the first Check already tells the truth), then keep probing in the background."""
        await self.probe_once()
        await self.servicer.set(LIVENESS, SERVING)
        self._task = asyncio.create_task(self._loop(), name="health-probes")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            await self.probe_once()

    async def shutdown(self) -> None:
        """Report NOT_SERVING for everything (first step of draining) and stop probing."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.servicer.enter_graceful_shutdown()
