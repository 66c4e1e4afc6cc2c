"""grpc.health.v1 that does not lie: each dependency is probed in the background and reported under its own
name; the overall status ("" and the service names) is SERVING only while every dependency is."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from grpc_health.v1 import health_pb2
from grpc_health.v1.health import aio

Probe = Callable[[], Awaitable[None]]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_log = logging.getLogger(__name__)


class HealthMonitor:
    def __init__(
        self,
        servicer: aio.HealthServicer,
        probes: Mapping[str, Probe],
        *,
        service_names: Sequence[str],
        interval_s: float,
        probe_timeout_s: float = 5.0,
    ) -> None:
        self.servicer = servicer
        self._probes = dict(probes)
        self._overall = ("", *service_names)
        self._interval_s = interval_s
        self._probe_timeout_s = probe_timeout_s
        self._task: asyncio.Task[None] | None = None

    async def probe_once(self) -> dict[str, bool]:
        """Run every probe concurrently and publish the results; returns name -> healthy."""
        results = await asyncio.gather(*(self._healthy(name, probe) for name, probe in self._probes.items()))
        healthy = dict(zip(self._probes, results, strict=True))
        # After enter_graceful_shutdown the servicer ignores these: NOT_SERVING stays.
        for name, ok in healthy.items():
            await self.servicer.set(name, SERVING if ok else NOT_SERVING)
        overall = SERVING if all(healthy.values()) else NOT_SERVING
        for name in self._overall:
            await self.servicer.set(name, overall)
        return healthy

    async def _healthy(self, name: str, probe: Probe) -> bool:
        try:
            async with asyncio.timeout(self._probe_timeout_s):
                await probe()
        except Exception as exc:  # noqa: BLE001 - any failure of a probe means "not serving"
            _log.warning("health probe %s failed: %s", name, exc)
            return False
        return True

    async def start(self) -> None:
        """Probe once (so the first Check already tells the truth), then keep probing in the background."""
        await self.probe_once()
        self._task = asyncio.create_task(self._loop(), name="health-probes")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            await self.probe_once()

    async def shutdown(self) -> None:
        """Report NOT_SERVING for everything (first step of draining) and stop probing."""
        if self._task is not None:
            self._task.cancel()
        await self.servicer.enter_graceful_shutdown()
