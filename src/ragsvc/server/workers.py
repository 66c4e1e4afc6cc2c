"""Several server processes on one address (RAG_WORKERS > 1): a parent that starts and supervises them.

Every worker is a whole ragsvc server (`app.serve`) in a process of its own, started with multiprocessing's
spawn (a fresh interpreter: nothing of the parent's gRPC state is inherited), listening on the same address with
SO_REUSEPORT, so the kernel spreads incoming connections over them. The parent serves nothing itself:

- it starts worker 0 first (with port 0 it learns the port the kernel gave), then the others on that port, and
  prints one line once all of them serve;
- a worker that dies is restarted, up to `MAX_RESTARTS` within `RESTART_WINDOW_S`; beyond that the parent stops
  the others and exits with status 1;
- SIGTERM or SIGINT is passed on to every worker, each drains within RAG_GRACE_PERIOD_SECONDS as one server
  does, and the parent exits 0 when all of them did;
- a worker whose parent is gone (killed with SIGKILL) drains and exits as on SIGTERM, within a second.

What the workers share is what the settings give them: the records (SQLite in WAL mode across processes, or
PostgreSQL), the answer cache, replays and rate limit on Redis when RAG_REDIS_URL is set (otherwise each worker
keeps its own), and the vectors on a Qdrant server when RAG_QDRANT_URL is set. The embedded engine (qdrant-edge)
lets one process open a shard directory (its WAL lock), and a copy of the directory opens as a shard of its own:
so without a Qdrant server the parent holds the live shard (no other server can write to it meanwhile) and gives
each worker a copy of it, and the workers serve that index read-only (`worker_slot.ReadOnlyIndexInterceptor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from ragsvc.config import Settings
from ragsvc.errors import FieldViolation, InvalidRequest, RagError
from ragsvc.retrieval.edge import BUILDING_SUFFIX, PREVIOUS_SUFFIX
from ragsvc.server.app import serve
from ragsvc.server.worker_slot import WorkerSlot

if TYPE_CHECKING:
    from ragsvc.retrieval.base import Embedder

SNAPSHOTS = "workers"  # under RAG_DATA_DIR: one copy of the embedded engine's shards per worker
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
START_TIMEOUT_S = 300.0
PARENT_CHECK_S = 0.5
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
_log = logging.getLogger(__name__)


async def serve_processes(settings: Settings, *, embedder: Embedder | None = None) -> int:
    """`ragsvc serve`: this process serves (`app.serve`), or with RAG_WORKERS > 1 supervises that many worker
    processes that do (`supervise`). Returns the exit status."""
    if settings.server.workers > 1:
        return await supervise(settings, embedder=embedder)
    return await serve(settings, embedder=embedder)


def check_workers(settings: Settings) -> None:
    """The combinations several workers cannot serve, refused before any is started."""
    if settings.hardening.metrics_port:
        raise _refusal(settings, "RAG_METRICS_PORT is set: each worker would serve its own /metrics on that port")


def _refusal(settings: Settings, why: str) -> InvalidRequest:
    description = f"{settings.server.workers} processes cannot be started: {why}"
    return InvalidRequest([FieldViolation("RAG_WORKERS", description)])


@contextlib.contextmanager
def worker_slots(settings: Settings) -> Iterator[list[WorkerSlot]]:
    """A slot per worker. Over the embedded engine, the parent opens every live shard in RAG_DATA_DIR (taking its
    WAL lock for as long as the workers run), flushes it and copies it once per worker; the copies are removed
    at the end."""
    count = settings.server.workers
    if settings.retrieval.qdrant_url:
        yield [WorkerSlot(index, None) for index in range(count)]
        return
    import qdrant_edge as qe  # the embedded engine only

    data_dir = settings.server.data_dir
    shards = [
        path
        for path in sorted(data_dir.glob("qdrant-edge*"))
        if (path / "edge_config.json").exists() and not path.name.endswith((BUILDING_SUFFIX, PREVIOUS_SUFFIX))
    ]
    if not shards:
        raise _refusal(
            settings,
            f"over the embedded engine they serve read-only copies of its index, and {data_dir} holds none: "
            "index with RAG_WORKERS=1 first, or set RAG_QDRANT_URL to share a Qdrant server",
        )
    root = data_dir / SNAPSHOTS
    shutil.rmtree(root, ignore_errors=True)
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, root, True)
        for path in shards:
            try:
                live = qe.EdgeShard.load(str(path))
            except Exception as exc:
                why = f"the embedded engine's shard {path} cannot be opened (in use by another `ragsvc serve`?)"
                raise _refusal(settings, f"{why}: {exc}") from exc
            stack.callback(live.close)
            live.flush()
            for index in range(count):
                shutil.copytree(path, root / str(index) / path.name)
        yield [WorkerSlot(index, root / str(index)) for index in range(count)]


class _Worker:
    """One running worker process and the pipe it reports its port (or why it could not start) on."""

    def __init__(self, process: BaseProcess, reports: Connection) -> None:
        self.process = process
        self.reports = reports

    async def serving_port(self) -> int:
        """The port once the worker serves; RagError with the worker's own message when it could not start."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        sentinel, reader = self.process.sentinel, self.reports.fileno()
        for fd in (sentinel, reader):
            loop.add_reader(fd, ready.set)
        try:
            await asyncio.wait_for(ready.wait(), START_TIMEOUT_S)
        except TimeoutError:
            raise RagError(f"worker pid {self.process.pid} did not serve within {START_TIMEOUT_S:.0f} s") from None
        finally:
            for fd in (sentinel, reader):
                loop.remove_reader(fd)
        try:
            report = self.reports.recv() if self.reports.poll() else None
        except EOFError:  # it exited without a word
            report = None
        if isinstance(report, int):
            return report
        self.process.join()
        raise RagError(report or f"worker pid {self.process.pid} exited with {self.process.exitcode} before serving")


class WorkerPool:
    """The workers of one address, started, restarted and stopped by the parent."""

    def __init__(self, settings: Settings, slots: list[WorkerSlot], embedder: Embedder | None) -> None:
        self._settings = settings
        self._slots = slots
        self._embedder = embedder
        self._context = multiprocessing.get_context("spawn")
        self._workers: dict[int, _Worker] = {}
        self.address = settings.server.grpc_address

    async def start_all(self) -> None:
        """Worker 0 first (it learns the port when the address asks for any), then the others together."""
        port = await self._start(self._slots[0])
        self.address = f"{self._settings.server.host}:{port}"
        await asyncio.gather(*(self._start(slot) for slot in self._slots[1:]))

    async def restart(self, index: int) -> None:
        await self._start(self._slots[index])

    def dead(self) -> list[tuple[int, int | None]]:
        """The workers that exited (their slot and exit code), forgotten here."""
        gone = [(i, w.process.exitcode) for i, w in self._workers.items() if not w.process.is_alive()]
        for index, _ in gone:
            self._workers.pop(index).reports.close()
        return gone

    def sentinels(self) -> list[int]:
        return [worker.process.sentinel for worker in self._workers.values()]

    async def stop(self) -> bool:
        """SIGTERM to every worker, then wait for them to drain (the grace period and some start-up slack);
        those still running then are killed. True when every worker exited 0."""
        for worker in self._workers.values():
            if worker.process.is_alive() and worker.process.pid is not None:
                os.kill(worker.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._settings.server.grace_period_s + 10.0
        clean = True
        for index, worker in self._workers.items():
            await asyncio.to_thread(worker.process.join, max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                _log.error("worker %d (pid %s) did not stop in time: killed", index, worker.process.pid)
                worker.process.kill()
                worker.process.join()
            clean = clean and worker.process.exitcode == 0
            worker.reports.close()
        self._workers.clear()
        return clean

    async def _start(self, slot: WorkerSlot) -> int:
        reports, child_end = self._context.Pipe(duplex=False)
        settings = self._settings.model_copy(
            update={"server": self._settings.server.model_copy(update={"grpc_address": self.address})}
        )
        process = self._context.Process(
            target=run_worker, args=(settings, slot, self._embedder, child_end), name=f"ragsvc-worker-{slot.index}"
        )
        process.start()
        child_end.close()
        worker = _Worker(process, reports)
        self._workers[slot.index] = worker
        port = await worker.serving_port()
        _log.info("worker %d serving (pid %d)", slot.index, process.pid)
        return port


class _Restarts:
    """The restarts of the last RESTART_WINDOW_S seconds; `allow` says whether one more is within the budget."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def allow(self) -> bool:
        now = time.monotonic()
        while self._times and now - self._times[0] > RESTART_WINDOW_S:
            self._times.popleft()
        self._times.append(now)
        return len(self._times) <= MAX_RESTARTS


async def supervise(settings: Settings, *, embedder: Embedder | None = None) -> int:
    """Run RAG_WORKERS server processes until SIGTERM or SIGINT; returns the exit status (0: all drained)."""
    check_workers(settings)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with worker_slots(settings) as slots:
        if not settings.shared.redis_url.get_secret_value():
            _log.warning("RAG_WORKERS=%d without RAG_REDIS_URL: each worker keeps its own answer cache and rate "
                         "limit", settings.server.workers)  # fmt: skip
        pool = WorkerPool(settings, slots, embedder)
        try:
            await pool.start_all()
            _log.info("%d worker processes serving", len(slots))
            print(f"ragsvc serving on {pool.address}", flush=True)  # the line `ragsvc serve` prints
            failed = await _watch(pool, stop)
        finally:
            clean = await pool.stop()
    return 1 if failed or not clean else 0


async def _watch(pool: WorkerPool, stop: asyncio.Event) -> bool:
    """Restart the workers that die until `stop` is set; True when the restart budget ran out."""
    restarts = _Restarts()
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        exited = asyncio.Event()
        sentinels = pool.sentinels()
        for fd in sentinels:
            loop.add_reader(fd, exited.set)
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(exited.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fd in sentinels:
                loop.remove_reader(fd)
            for wait in waits:
                wait.cancel()
        if stop.is_set():
            return False
        for index, code in pool.dead():
            if not restarts.allow():
                _log.error("worker %d exited with %s, and %d workers were restarted within %.0f s: stopping",
                           index, code, MAX_RESTARTS, RESTART_WINDOW_S)  # fmt: skip
                return True
            _log.warning("worker %d exited with %s: restarting it", index, code)
            await pool.restart(index)
    return False


def run_worker(settings: Settings, slot: WorkerSlot, embedder: Embedder | None, reports: Connection) -> None:
    """A worker process's body: serve as `ragsvc serve` does, reporting the port (or why it cannot start)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    threading.Thread(target=_stop_with_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    try:
        asyncio.run(serve(settings, embedder=embedder, slot=slot, on_serving=reports.send))
    except RagError as exc:
        reports.send(exc.message)
        raise SystemExit(1) from None


def _stop_with_parent(parent: int) -> None:
    """SIGTERM to this worker once its parent is gone (it is then re-parented), so that no worker outlives it."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    _log.warning("the parent process %d is gone: stopping", parent)
    os.kill(os.getpid(), signal.SIGTERM)
